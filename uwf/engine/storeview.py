"""The `store` view: the format the store was created with and its repairs."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from uwf.engine.events import Envelope, LogRepaired, StoreCreated
from uwf.engine.projection import StructProjection


class StoreState(msgspec.Struct, frozen=True, rename="camel"):
    format: int = 0
    created_at: str = ""
    repairs: int = 0
    last_repair_seq: int = 0


class StoreProjection(StructProjection):
    name: ClassVar[str] = "store"
    version: ClassVar[int] = 1
    event_types: ClassVar[frozenset[str]] = frozenset({StoreCreated.type, LogRepaired.type})
    state_type: ClassVar[type[msgspec.Struct]] = StoreState

    def key(self, event: Envelope) -> str:
        return "store"

    def apply(self, state: StoreState | None, event: Envelope) -> StoreState:
        current = state or StoreState()
        if isinstance(event.data, StoreCreated):
            return msgspec.structs.replace(current, format=event.data.format, created_at=event.ts)
        return msgspec.structs.replace(
            current, repairs=current.repairs + 1, last_repair_seq=event.seq
        )
