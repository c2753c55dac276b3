"""The event envelope and one msgspec Struct per event type (SPEC §3).

A line is `{"seq","id","ts","type","subject","batch","data","prev"}` in that
order. `data` is decoded with the Struct of its type and unknown fields are an
error, so a log written by a newer uwf fails closed instead of being misread.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import msgspec

from uwf.engine.errors import Corrupt

FORMAT_VERSION = 1
GENESIS_PREV = "0" * 32


class EventData(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Base of every event's `data`; subclasses name their `type`."""

    type: ClassVar[str]
    # Fields holding CAS hashes: `log verify` checks they exist, `gc` keeps them.
    refs: ClassVar[tuple[str, ...]] = ()

    def cas_refs(self) -> list[str]:
        """The hashes this event refers to."""
        found = (getattr(self, name) for name in self.refs)
        return [value for value in found if isinstance(value, str)]


class StoreCreated(EventData, frozen=True):
    """The first event of a store: the on-disk format it was written with."""

    type: ClassVar[str] = "store.created"
    format: int


class LogRepaired(EventData, frozen=True):
    """A writer truncated bytes that were never acknowledged (torn tail, cut batch)."""

    type: ClassVar[str] = "log.repaired"
    segment: str
    offset: int
    dropped_bytes: int
    dropped_lines: int
    digest: str
    reason: str


class WorkflowRegistered(EventData, frozen=True):
    """A workflow name now points at a Workflow node."""

    type: ClassVar[str] = "workflow.registered"
    refs: ClassVar[tuple[str, ...]] = ("hash", "previous")
    name: str
    hash: str
    previous: str | None = None


EVENT_TYPES: dict[str, type[EventData]] = {}


def register(*types: type[EventData]) -> None:
    """Add event types to the catalogue (features extend it as they are built)."""
    for data_type in types:
        EVENT_TYPES[data_type.type] = data_type
        _DATA_DECODERS[data_type.type] = msgspec.json.Decoder(data_type)


_DATA_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
register(StoreCreated, LogRepaired, WorkflowRegistered)


class NewEvent(msgspec.Struct, frozen=True):
    """What a command asks to append; the journal assigns seq, id, ts, batch, prev."""

    subject: str
    data: EventData


class Envelope(msgspec.Struct, frozen=True):
    """One line of the log, decoded."""

    seq: int
    id: str
    ts: str
    type: str
    subject: str
    batch: tuple[int, int]
    data: Any
    prev: str


class _RawEnvelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seq: int
    id: str
    ts: str
    type: str
    subject: str
    batch: tuple[int, int]
    data: msgspec.Raw
    prev: str


_encoder = msgspec.json.Encoder()
_raw_decoder = msgspec.json.Decoder(_RawEnvelope)


def encode_line(envelope: Envelope) -> bytes:
    """The line's bytes, without the newline."""
    return _encoder.encode(envelope)


def decode_line(line: bytes) -> Envelope:
    """Decode one line (without newline); raise Corrupt naming what is wrong."""
    try:
        raw = _raw_decoder.decode(line)
    except msgspec.DecodeError as exc:
        raise Corrupt(f"invalid event line: {exc}") from None
    decoder = _DATA_DECODERS.get(raw.type)
    if decoder is None:
        raise Corrupt(f"unknown event type {raw.type!r}", "upgrade uwf to read this log")
    try:
        data = decoder.decode(raw.data)
    except msgspec.DecodeError as exc:
        raise Corrupt(f"invalid data for {raw.type}: {exc}") from None
    return Envelope(raw.seq, raw.id, raw.ts, raw.type, raw.subject, raw.batch, data, raw.prev)


def digest(line: bytes) -> str:
    """The chain digest of a line: first 32 hex chars of SHA-256 over its bytes."""
    return hashlib.sha256(line).hexdigest()[:32]


def to_builtins(data: EventData) -> Any:
    """The JSON-ready form of an event's data (for `log tail` and exports)."""
    return msgspec.to_builtins(data)
