"""The event envelope and one msgspec Struct per event type (SPEC §3).

A line is `{"seq","id","ts","type","subject","batch","data","prev"}` in that
order. `data` is decoded with the Struct of its type and unknown fields are an
error, so a log written by a newer uwf fails closed instead of being misread.
"""

from __future__ import annotations

import hashlib
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


class WorkflowRegistered(EventData, frozen=True):
    """A workflow name now points at a Workflow node."""

    type: ClassVar[str] = "workflow.registered"
    refs: ClassVar[tuple[str, ...]] = ("hash", "previous")
    name: str
    hash: str
    previous: str | None = None


EVENT_TYPES: dict[str, type[EventData]] = {}
_DATA_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
_TYPED_ENVELOPES: list[type[msgspec.Struct]] = []
_line_decoder: msgspec.json.Decoder[Any] | None = None


def register(*types: type[EventData]) -> None:
    """Add event types to the catalogue (features extend it as they are built)."""
    for data_type in types:
        EVENT_TYPES[data_type.type] = data_type
        _DATA_DECODERS[data_type.type] = msgspec.json.Decoder(data_type)
        # An envelope tagged by `type` whose `data` is this type: msgspec picks the
        # right one while parsing, so a whole line is one decode call.
        typed = msgspec.defstruct(
            f"Envelope_{data_type.__name__}", [("data", data_type)], bases=(_TaggedEnvelope,),
            frozen=True, forbid_unknown_fields=True, tag=data_type.type,
        )
        typed.type = data_type.type  # type: ignore[attr-defined]
        _TYPED_ENVELOPES.append(typed)
    global _line_decoder
    _line_decoder = msgspec.json.Decoder(Union[tuple(_TYPED_ENVELOPES)])  # noqa: UP007


class ThreadStarted(EventData, frozen=True):
    """A thread exists: its workflow, StartNode and repo (and, for a fork, its origin)."""

    type: ClassVar[str] = "thread.started"
    refs: ClassVar[tuple[str, ...]] = ("workflow", "start", "head")
    workflow: str
    name: str
    start: str
    repo: str
    head: str | None = None
    fork_of: str | None = None
    steps: int = 0
    visits: dict[str, int] = {}


class ThreadStepStarted(EventData, frozen=True):
    """The moderator chose a role and an agent is about to run; recorded first, so a
    concurrent step of the same thread is refused."""

    type: ClassVar[str] = "thread.step_started"
    step_id: str
    role: str
    edge_prompt: str
    agent: str
    deadline_ms: int
    takes_over: str | None = None


class ThreadStepped(EventData, frozen=True):
    """The agent's StepNode passed every check: the head moves to it."""

    type: ClassVar[str] = "thread.stepped"
    refs: ClassVar[tuple[str, ...]] = ("head", "output")
    step_id: str
    head: str
    role: str
    status: str
    output: str


class ThreadStepFailed(EventData, frozen=True):
    """A step ended without moving the head: the reason, and what the agent left."""

    type: ClassVar[str] = "thread.step_failed"
    step_id: str
    role: str
    reason: str
    message: str


class ThreadBlocked(EventData, frozen=True):
    """The thread cannot go on until something changes (no transition, no agent)."""

    type: ClassVar[str] = "thread.blocked"
    reason: str
    message: str
    role: str | None = None
    status: str | None = None


class ThreadEnded(EventData, frozen=True):
    """The thread is over: reached `$END` (reason "end") or was killed ("killed")."""

    type: ClassVar[str] = "thread.ended"
    reason: str
    note: str = ""


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


register(
    StoreCreated,
    LogRepaired,
    WorkflowRegistered,
    ThreadStarted,
    ThreadStepStarted,
    ThreadStepped,
    ThreadStepFailed,
    ThreadBlocked,
    ThreadEnded,
)

_encoder = msgspec.json.Encoder()
_raw_decoder = msgspec.json.Decoder(_RawEnvelope)


def encode_line(envelope: Envelope) -> bytes:
    """The line's bytes, without the newline."""
    return _encoder.encode(envelope)


def decode_line(line: bytes) -> Envelope:
    """Decode one line (without newline); raise Corrupt naming what is wrong."""
    assert _line_decoder is not None
    try:
        envelope: Envelope = _line_decoder.decode(line)
        return envelope
    except msgspec.DecodeError:
        pass  # decode again, step by step, to name the problem
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
