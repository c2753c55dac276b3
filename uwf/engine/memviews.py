"""The in-memory twin of the SQLite view store: the same answers (uwf/engine/viewspec.py
states the semantics), by brute force."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

from uwf.engine.log import Checkpoint
from uwf.engine.viewspec import (
    ASCII_LOWER,
    STREAMS,
    STREAMS_SIGNATURE,
    Changes,
    ColumnValue,
    Part,
    Query,
    Row,
    StreamEntries,
    ViewSpec,
    order_terms,
    resolved,
    search_terms,
)


class MemoryViewStore:
    """Views as dicts of rows, the stream index as a dict of seq lists, behind a lock."""

    def __init__(self, specs: Sequence[ViewSpec]) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self._rows: dict[str, dict[str, Row]] = {}
        self._streams: dict[str, list[int]] = {}
        self._checkpoints: dict[str, tuple[str, Checkpoint]] = {}
        self._lock = threading.Lock()

    def checkpoints(self) -> dict[str, Checkpoint]:
        return {name: checkpoint for name, (signature, checkpoint) in self._checkpoints.items()
                if signature == self._signature(name)}

    def _signature(self, name: str) -> str | None:
        if name == STREAMS:
            return STREAMS_SIGNATURE
        spec = self.specs.get(name)
        return None if spec is None else spec.signature

    def load(self, view: str, key: str) -> bytes | None:
        row = self._rows.get(view, {}).get(key)
        return None if row is None else row.value

    def load_many(self, view: str, keys: Sequence[str]) -> dict[str, bytes]:
        rows = self._rows.get(view, {})
        return {key: rows[key].value for key in keys if key in rows}

    def _select(self, query: Query) -> list[tuple[str, Row]]:
        spec = self.specs[query.view]
        rows = list(self._rows.get(query.view, {}).items())
        for column, op, value in query.where:
            get = _getter(spec, column)
            rows = [(k, r) for k, r in rows if _compare(get(k, r), op, value)]
        for term in search_terms(query.text):
            rows = [(k, r) for k, r in rows if term in r.text]
        return rows

    def query(self, query: Query) -> list[tuple[str, bytes]]:
        spec = self.specs[query.view]
        rows = self._select(query)
        rows.sort(key=lambda item: item[0])
        for term in reversed(order_terms(query.order)):
            descending = term.startswith("-")
            get = _getter(spec, term.lstrip("-"))
            rows.sort(key=lambda item, g=get: _null_first(g(*item)),  # type: ignore[misc]
                      reverse=descending)
        end = None if query.limit is None else query.offset + query.limit
        return [(key, row.value) for key, row in rows[query.offset:end]]

    def count(self, query: Query) -> int:
        return len(self._select(query))

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        get = _getter(self.specs[view], column)
        found: dict[ColumnValue, int] = {}
        for key, row in self._rows.get(view, {}).items():
            value = get(key, row)
            found[value] = found.get(value, 0) + 1
        return found

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        rows = sorted(self._rows.get(view, {}).items())
        for key, row in rows:
            yield key, row.value

    def stream(self, subject: str, after: int = 0, *, reverse: bool = False) -> list[int]:
        seqs = self._streams.get(subject, [])
        found = seqs[bisect.bisect_right(seqs, after):]
        return found[::-1] if reverse else found

    def version(self, subject: str) -> int:
        seqs = self._streams.get(subject)
        return seqs[-1] if seqs else 0

    def commit(self, changes: Changes, expected: Mapping[str, Checkpoint | None],
               new: Checkpoint | Callable[[], Checkpoint], *, reset: bool = False,
               streams: StreamEntries = (), more: Iterable[Part] = ()) -> bool:
        with self._lock:
            current = self.checkpoints()
            if any(current.get(name) != want for name, want in expected.items()):
                return False
            # All or nothing, as a transaction: what was there comes back on a failure.
            before = ({name: dict(rows) for name, rows in self._rows.items()},
                      {subject: list(seqs) for subject, seqs in self._streams.items()})
            try:
                for number, (part, entries) in enumerate(chain([(changes, streams)], more)):
                    for name, want in expected.items():
                        fresh = (want is None or reset) and number == 0
                        if name == STREAMS:
                            self._index(entries, fresh=fresh)
                        else:
                            self._apply(name, part.get(name, {}), fresh=fresh)
                new = resolved(new)
            except BaseException:
                self._rows, self._streams = before
                raise
            for name in expected:
                signature = STREAMS_SIGNATURE if name == STREAMS else self.specs[name].signature
                self._checkpoints[name] = (signature, new)
            return True

    def _apply(self, name: str, changes: Mapping[str, Row | None], *, fresh: bool) -> None:
        if fresh:
            self._rows[name] = {}
        rows = self._rows.setdefault(name, {})
        for key, row in changes.items():
            if row is None:
                rows.pop(key, None)
            else:
                rows[key] = row._replace(text=row.text.translate(ASCII_LOWER))

    def _index(self, entries: StreamEntries, *, fresh: bool) -> None:
        if fresh:
            self._streams = {}
        for subject, seq in entries:
            seqs = self._streams.setdefault(subject, [])
            if seqs and seq <= seqs[-1]:
                bisect.insort(seqs, seq)  # never in a fold (seqs come in order); kept exact
            else:
                seqs.append(seq)

    def drop(self) -> None:
        self._rows.clear()
        self._streams.clear()
        self._checkpoints.clear()

    def close(self) -> None:
        pass

    def let_go(self) -> None:
        pass


def _getter(spec: ViewSpec, column: str) -> Any:
    if column == "key":
        return lambda key, row: key
    try:
        index = spec.columns.index(column)
    except ValueError:
        raise ValueError(f"view {spec.name} has no column {column!r}") from None
    return lambda key, row: row.columns[index]


def _null_first(value: ColumnValue) -> tuple[bool, Any]:
    return (value is not None, value if value is not None else 0)


def _compare(have: ColumnValue, op: str, want: Any) -> bool:
    if want is None and op == "=":  # `= None` asks for the rows without a value
        return have is None
    if have is None:
        return False
    if op == "=":
        return bool(have == want)
    if op == "in":
        return have in want
    if op == "<":
        return bool(have < want)
    if op == "<=":
        return bool(have <= want)
    if op == ">":
        return bool(have > want)
    if op == ">=":
        return bool(have >= want)
    raise ValueError(f"unknown operator {op!r}")
