"""The shape every projection shares: states are frozen msgspec Structs."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from uwf.engine.events import Envelope


class StructProjection:
    """A named view whose entity states are one msgspec Struct type."""

    name: ClassVar[str]
    version: ClassVar[int]
    event_types: ClassVar[frozenset[str]]
    state_type: ClassVar[type[msgspec.Struct]]

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()
        self._decoder = msgspec.json.Decoder(self.state_type)

    def key(self, event: Envelope) -> str:
        raise NotImplementedError

    def apply(self, state: Any, event: Envelope) -> Any:
        raise NotImplementedError

    def encode(self, state: Any) -> bytes:
        return self._encoder.encode(state)

    def decode(self, raw: bytes) -> Any:
        return self._decoder.decode(raw)
