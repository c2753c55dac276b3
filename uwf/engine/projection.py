"""The shape every projection shares: states are frozen msgspec Structs, and a view
declares the columns it is queried by."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from uwf.engine.events import Envelope
from uwf.engine.viewspec import ColumnValue, Row, ViewSpec
from uwf.errors import Corrupt


class StructProjection:
    """A named view whose entity states are one msgspec Struct type.

    `columns` are state fields (snake_case attribute names) copied into indexed
    columns, `types` their types ("int" or "text", in the same order); `indexes` and
    `counted` name columns; `search_text` feeds text search.
    """

    name: ClassVar[str]
    version: ClassVar[int]
    event_types: ClassVar[frozenset[str]]
    state_type: ClassVar[type[msgspec.Struct]]
    columns: ClassVar[tuple[str, ...]] = ()
    types: ClassVar[tuple[str, ...]] = ()
    indexes: ClassVar[tuple[tuple[str, ...], ...]] = ()
    counted: ClassVar[tuple[str, ...]] = ()
    text: ClassVar[bool] = False
    sparse: ClassVar[tuple[str, ...]] = ()
    indexes_on_read: ClassVar[bool] = False  # `ViewSpec.on_read`

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()
        # Made on the first row read: making it resolves the state type's annotations,
        # which a command that reads no row of this view (most of them) never needs.
        self._decoder: msgspec.json.Decoder[Any] | None = None

    def spec(self) -> ViewSpec:
        return ViewSpec(self.name, self.version, self.columns, self.indexes, self.counted,
                        self.text, self.types, self.sparse, self.indexes_on_read)

    def key(self, event: Envelope) -> str:
        raise NotImplementedError

    def apply(self, state: Any, event: Envelope) -> Any:
        raise NotImplementedError

    def column_values(self, state: Any) -> tuple[ColumnValue, ...]:
        return tuple(getattr(state, column) for column in self.columns)

    def search_text(self, state: Any) -> str:
        return ""

    def row(self, state: Any) -> Row:
        return Row(self._encoder.encode(state), self.column_values(state),
                   self.search_text(state))

    def encode(self, state: Any) -> bytes:
        return self._encoder.encode(state)

    def decode(self, raw: bytes) -> Any:
        if self._decoder is None:
            self._decoder = msgspec.json.Decoder(self.state_type)
        try:
            return self._decoder.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # a string not UTF-8 too
            raise Corrupt(f"a row of the {self.name} view is unreadable ({exc})",
                          "run `uwf registry rebuild`") from None
