"""The event envelope, the core event types, and the catalogue that decodes lines (SPEC §3).

A line is `{"seq","id","ts","type","subject","batch","data","prev"}` in that
order. `data` is decoded with the Struct of its type and unknown fields are an
error, so a log written by a newer uwf fails closed instead of being misread.
Each feature owns its event types (`uwf.projections.*_events`); a store's
`EventCatalog` lists them explicitly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import cache
from typing import Any, ClassVar, Union

import msgspec

from uwf.errors import Corrupt

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


class NewEvent(msgspec.Struct, frozen=True):
    """What a command asks to append; the journal assigns seq, id, ts, batch, prev."""

    subject: str
    data: EventData


class Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One line of the log as it is written (fields in log order)."""

    seq: int
    id: str
    ts: str
    type: str
    subject: str
    batch: tuple[int, int]
    data: Any
    prev: str


class _TaggedEnvelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type"):
    """What decoding yields: an Envelope whose `type` is its class's tag."""

    seq: int
    id: str
    ts: str
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


CORE_EVENTS: tuple[type[EventData], ...] = (StoreCreated, LogRepaired)


@cache
def _typed_envelope(data_type: type[EventData]) -> type[msgspec.Struct]:
    """An envelope tagged by `type` whose `data` is `data_type`: msgspec picks the right
    one while parsing, so a whole line is one decode call."""
    typed = msgspec.defstruct(
        f"Envelope_{data_type.__name__}", [("data", data_type)], bases=(_TaggedEnvelope,),
        frozen=True, forbid_unknown_fields=True, tag=data_type.type,
    )
    typed.type = data_type.type  # type: ignore[attr-defined]
    return typed


class EventCatalog:
    """The event types a store knows: the core ones plus each feature's, registered
    explicitly when a store is opened (no import side effects, no global registry)."""

    def __init__(self, *features: Iterable[type[EventData]]) -> None:
        self.types: dict[str, type[EventData]] = {}
        for data_type in (*CORE_EVENTS, *(t for feature in features for t in feature)):
            known = self.types.get(data_type.type)
            if known is not None and known is not data_type:
                raise ValueError(f"two event types are named {data_type.type}")
            self.types[data_type.type] = data_type
        self._data_decoders = {name: msgspec.json.Decoder(t) for name, t in self.types.items()}
        envelopes = tuple(_typed_envelope(t) for t in self.types.values())
        self._line_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
            Union[envelopes]  # noqa: UP007
        )

    def decode(self, line: bytes) -> Envelope:
        """Decode one line (without newline); raise Corrupt naming what is wrong."""
        # msgspec reports bytes that are not UTF-8 in a string as UnicodeDecodeError.
        try:
            envelope: Envelope = self._line_decoder.decode(line)
            return envelope
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass  # decode again, step by step, to name the problem
        try:
            raw = _raw_decoder.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise Corrupt(f"invalid event line: {exc}") from None
        decoder = self._data_decoders.get(raw.type)
        if decoder is None:
            raise Corrupt(f"unknown event type {raw.type!r}", "upgrade uwf to read this log")
        try:
            data = decoder.decode(raw.data)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise Corrupt(f"invalid data for {raw.type}: {exc}") from None
        return Envelope(raw.seq, raw.id, raw.ts, raw.type, raw.subject, raw.batch, data, raw.prev)


def as_envelope(decoded: Envelope) -> Envelope:
    """A decoded event as a plain Envelope (which encodes fields in log order)."""
    return Envelope(decoded.seq, decoded.id, decoded.ts, decoded.type, decoded.subject,
                    decoded.batch, decoded.data, decoded.prev)


def digest(line: bytes) -> str:
    """The chain digest of a line: first 32 hex chars of SHA-256 over its bytes."""
    return hashlib.sha256(line).hexdigest()[:32]


def to_builtins(data: EventData) -> Any:
    """The JSON-ready form of an event's data (for `log tail` and exports)."""
    return msgspec.to_builtins(data)
