"""The event envelope, the core event types, and the catalogue that decodes lines (SPEC §3).

A line is `{"seq","id","ts","type","subject","batch","data","prev"}` in that
order. `data` is decoded with the Struct of its type and unknown fields are an
error, so a log written by a newer uwf fails closed instead of being misread.
Each feature owns its event types (`uwf.<feature>.events`); a store's
`EventCatalog` lists them explicitly, with the upcasters that read the older
shapes of a type's `data` as its current one (docs/events.md, "Changing an event").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Union

import msgspec

from uwf.errors import Corrupt

if TYPE_CHECKING:
    from hashlib import _Hash as hashlib_Hash

# A line's digest is taken by every command (the log's head against the views'
# checkpoint): CPython's own SHA-256 loads in a tenth of hashlib's time (which loads
# OpenSSL, ~2 ms of a CLI call), for about 1 µs more a line; a rebuild's loop, which
# digests every line, uses hashlib's (`fold.py`).
def _builtin_sha256() -> Callable[[bytes], hashlib_Hash]:
    import importlib

    for name in ("_sha256", "_sha2"):  # CPython 3.11, 3.12+
        try:
            return importlib.import_module(name).sha256  # type: ignore[no-any-return]
        except (ImportError, AttributeError):
            continue
    from hashlib import sha256

    return sha256


_sha256 = _builtin_sha256()

# 2: the log may hold node records (`cas.node`); a store of format 1 never does until
# this uwf writes one, and an older uwf refuses both (the format, or the unknown type).
FORMAT_VERSION = 2
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


class CasNode(EventData, frozen=True):
    """A node of the content-addressed store, kept in the log (SPEC §4): written in the
    same batch as, and before, the events that name it, so the batch's one fsync makes
    both durable and the chain covers the node. `node` is the node's JSON as json-cas
    writes it, `{"type","payload","timestamp"}`, compact (on one line) and kept as
    bytes: a replay never parses a payload it does not need."""

    type: ClassVar[str] = "cas.node"
    hash: str
    node: msgspec.Raw


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


CORE_EVENTS: tuple[type[EventData], ...] = (StoreCreated, LogRepaired, CasNode)


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


class Upcaster(msgspec.Struct, frozen=True):
    """Reads shape `version` of `event_type`'s `data` as shape `version + 1`.

    Versions are never written: a line's shape is its version. `applies` tells shape
    `version` from the later ones (a key it still has, a value of its old JSON type);
    `upcast` returns the next shape. Both are pure functions of the decoded `data`
    object: no clock, no I/O, nothing else from the line, so a replay reads the same.
    (A Struct, not a dataclass, which would compile its methods at every start-up.)
    """

    event_type: str
    version: int
    applies: Callable[[Mapping[str, Any]], bool]
    upcast: Callable[[dict[str, Any]], dict[str, Any]]


def _chains(upcasters: Iterable[Upcaster], types: Mapping[str, type[EventData]]
            ) -> dict[str, tuple[Upcaster, ...]]:
    """Each type's upcasters in version order; its versions must run 1, 2, ... n."""
    by_type: dict[str, list[Upcaster]] = {}
    for upcaster in upcasters:
        if upcaster.event_type not in types:
            raise ValueError(f"an upcaster names the unknown event type {upcaster.event_type}")
        by_type.setdefault(upcaster.event_type, []).append(upcaster)
    chains: dict[str, tuple[Upcaster, ...]] = {}
    for name, found in by_type.items():
        chain = tuple(sorted(found, key=lambda upcaster: upcaster.version))
        versions = [upcaster.version for upcaster in chain]
        if versions != list(range(1, len(chain) + 1)):
            raise ValueError(f"the upcasters of {name} are for versions {versions}, "
                             f"not 1 to {len(chain)}")
        chains[name] = chain
    return chains


class EventCatalog:
    """The event types a store knows: the core ones plus each feature's, registered
    explicitly when a store is opened (no import side effects, no global registry),
    and the upcasters that read their older shapes."""

    def __init__(self, *features: Iterable[type[EventData]],
                 upcasters: Iterable[Upcaster] = ()) -> None:
        self.types: dict[str, type[EventData]] = {}
        for data_type in (*CORE_EVENTS, *(t for feature in features for t in feature)):
            known = self.types.get(data_type.type)
            if known is not None and known is not data_type:
                raise ValueError(f"two event types are named {data_type.type}")
            self.types[data_type.type] = data_type
        self.upcasters = _chains(upcasters, self.types)
        # The decoders are made on first use: making them resolves every event type's
        # annotations (~40 M instructions, a third of a process start), which a read of
        # current views never needs.
        self._data_decoders: dict[str, msgspec.json.Decoder[Any]] = {}
        self._line_decoder: msgspec.json.Decoder[Any] | None = None

    def _line(self) -> msgspec.json.Decoder[Any]:
        """The decoder of a whole line, tagged by `type` (made once)."""
        if self._line_decoder is None:
            envelopes = tuple(_typed_envelope(t) for t in self.types.values())
            self._line_decoder = msgspec.json.Decoder(Union[envelopes])  # noqa: UP007
        return self._line_decoder

    def _data(self, name: str) -> msgspec.json.Decoder[Any] | None:
        """The decoder of `name`'s `data` (made once), None for an unknown type."""
        decoder = self._data_decoders.get(name)
        if decoder is None and name in self.types:
            decoder = self._data_decoders[name] = msgspec.json.Decoder(self.types[name])
        return decoder

    def decode(self, line: bytes) -> Envelope:
        """Decode one line (without newline); raise Corrupt naming what is wrong.

        A line in its type's current shape is one typed decode, upcasters or not; only
        a line that shape refuses is decoded again, step by step, and upcast if its
        type has upcasters. The line's bytes (what the chain hashes) are never changed.
        """
        # msgspec reports bytes that are not UTF-8 in a string as UnicodeDecodeError.
        try:
            envelope: Envelope = (self._line_decoder or self._line()).decode(line)
            return envelope
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass  # decode again, step by step, to name the problem
        try:
            raw = _raw_decoder.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise Corrupt(f"invalid event line: {exc}") from None
        decoder = self._data(raw.type)
        if decoder is None:
            raise Corrupt(f"unknown event type {raw.type!r}", "upgrade uwf to read this log")
        try:
            data = decoder.decode(raw.data)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            chain = self.upcasters.get(raw.type)
            upcast = None if chain is None else _upcast(raw, chain)
            if upcast is None:  # no upcaster knows this shape: refused as before
                raise Corrupt(f"invalid data for {raw.type}: {exc}") from None
            data = _decode_upcast(decoder, raw, *upcast)
        return Envelope(raw.seq, raw.id, raw.ts, raw.type, raw.subject, raw.batch, data, raw.prev)


_UPCAST_HINT = "the line is as written: fix the upcaster that reads it"


def _upcast(raw: _RawEnvelope, chain: tuple[Upcaster, ...]
            ) -> tuple[dict[str, Any], int] | None:
    """`raw.data` after every upcaster of `chain` whose shape it has, in version order,
    and the first version upcast; None when it is not an object or none applies."""
    try:
        data = msgspec.json.decode(raw.data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    first: int | None = None
    for step in chain:
        name = f"the {raw.type} upcaster from v{step.version}"
        # An upcaster is code run on stored data: whatever it raises is this line's
        # problem, reported with its seq like any other corrupt line.
        try:
            if not step.applies(data):
                continue
            upcast: object = step.upcast(data)
        except Exception as exc:
            raise Corrupt(f"seq {raw.seq}: {name} failed: {type(exc).__name__}: {exc}",
                          _UPCAST_HINT) from None
        if not isinstance(upcast, dict):
            raise Corrupt(f"seq {raw.seq}: {name} returned a {type(upcast).__name__}, "
                          "not an object", _UPCAST_HINT)
        data = upcast
        first = step.version if first is None else first
    return None if first is None else (data, first)


def _decode_upcast(decoder: msgspec.json.Decoder[Any], raw: _RawEnvelope,
                   data: dict[str, Any], first: int) -> EventData:
    """The upcast `data` through the same JSON decoder as a current line, so it is held
    to exactly the rules a line written in the current shape is."""
    try:
        decoded: EventData = decoder.decode(msgspec.json.encode(data))
        return decoded
    except (msgspec.MsgspecError, TypeError, ValueError) as exc:
        raise Corrupt(f"seq {raw.seq}: invalid data for {raw.type} upcast from "
                      f"v{first}: {exc}", _UPCAST_HINT) from None


def as_envelope(decoded: Envelope) -> Envelope:
    """A decoded event as a plain Envelope (which encodes fields in log order)."""
    return Envelope(decoded.seq, decoded.id, decoded.ts, decoded.type, decoded.subject,
                    decoded.batch, decoded.data, decoded.prev)


def digest(line: bytes) -> str:
    """The chain digest of a line: first 32 hex chars of SHA-256 over its bytes."""
    return _sha256(line).hexdigest()[:32]


def openssl_digester() -> Callable[[bytes], str]:
    """`digest` by hashlib's SHA-256 (OpenSSL's): the same value for about half the CPU
    on a log line, from a module that loads in ten times `digest`'s: for a process that
    digests many lines (a worker past its first appends, the resident writer)."""
    from hashlib import sha256

    def openssl_digest(line: bytes) -> str:
        return sha256(line).hexdigest()[:32]

    return openssl_digest


def to_builtins(data: EventData) -> Any:
    """The JSON-ready form of an event's data (for `log tail` and exports)."""
    return msgspec.to_builtins(data, enc_hook=_raw_json)


def _raw_json(value: Any) -> Any:
    """A `msgspec.Raw` (a node record's node) as the JSON value its bytes hold."""
    if isinstance(value, msgspec.Raw):
        return msgspec.json.decode(value)
    raise TypeError(f"{type(value).__name__} is not JSON")
