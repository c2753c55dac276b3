"""What a command's decide and a read get: the views, read-only and typed, over the
view store and the states a write holds of them (uwf/engine/held.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from uwf.engine.fold import Key, Projection
from uwf.engine.held import ABSENT as _ABSENT
from uwf.engine.held import Held
from uwf.engine.log import Checkpoint
from uwf.engine.viewspec import ColumnValue, Query, ViewStore


class Views:
    """A read-only, typed view of the persisted views (what `decide` and reads get).

    `known`: states as of `head` already at hand (a write's fold), read from there;
    every state `get` reads is remembered in `known` (a write's fold starts from them).
    `held`: the states of a fold this process has not committed yet (held.py), as of
    `head` too, read after `known` (and, with `remember`, given the states read from
    the store: a write's, in its section); `settle` commits them, and runs before any
    query, count or scan (which the view store answers over every row)."""

    def __init__(self, store: ViewStore, projections: Mapping[str, Projection],
                 head: Checkpoint, known: dict[Key, Any] | None = None, *,
                 held: Held | None = None,
                 settle: Callable[[], None] | None = None, remember: bool = False) -> None:
        self._store = store
        self._projections = projections
        self.head = head
        self.known = known
        self._held = held
        self._settle = settle
        self._remember = remember  # (a write's) states read from the store kept in `held`

    def get(self, view: str, key: str) -> Any:
        """The typed state of one entity, or None."""
        known = self.known
        if known is not None and (view, key) in known:
            return known[(view, key)]
        held = self._held
        state = _ABSENT if held is None else held.state((view, key))
        if state is _ABSENT:
            raw = self._store.load(view, key)
            state = None if raw is None else self._projections[view].decode(raw)
            if self._remember and held is not None:
                held.saw((view, key), state)
        if known is not None:
            known[(view, key)] = state
        return state

    def absent(self, view: str, keys: Iterable[str]) -> None:
        """Say that these entities are not in the view (ids this command has just
        minted): a write's fold starts them from nothing and reads none of them."""
        known = self.known
        if known is not None:
            known.update(((view, key), None) for key in keys)

    def _settled(self) -> None:
        """The held states committed before the view store answers over its rows."""
        if self._settle is not None and self._held is not None and self._held.writes:
            self._settle()

    def query(self, query: Query) -> list[Any]:
        self._settled()
        decode = self._projections[query.view].decode
        rows = self._store.query(query)
        known = self.known
        if known is None:
            return [decode(raw) for _, raw in rows]
        view = query.view
        found = []
        for key, raw in rows:
            found.append(state := decode(raw))
            known[(view, key)] = state
        return found

    def count(self, query: Query) -> int:
        self._settled()
        return self._store.count(query)

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        self._settled()
        return self._store.counts(view, column)

    def scan(self, view: str) -> Iterator[tuple[str, Any]]:
        self._settled()
        decode = self._projections[view].decode
        for key, raw in self._store.scan(view):
            yield key, decode(raw)
