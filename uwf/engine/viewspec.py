"""What a view store holds and answers, whatever the backend (SPEC §5): the view
declarations, rows, queries, the stream index, and the `ViewStore` interface.

Each view is a table of entity states (JSON bytes) keyed by a string, plus the
columns its projection declares (filtered and ordered by) and an optional
search text. Each view has its own checkpoint, the (seq, digest) of the last log
line folded into it, and its own signature (version and declared columns): a
new or changed view is built alone while the others stay. Rows and checkpoints
move in one transaction, guarded by compare-and-set on each checkpoint.

Beside the views, the store keeps the **stream index** (`STREAMS`): each event's
(subject, seq), so a subject's events are found without reading the log. It is
not a projection: a projection keeps one row per entity, which here would be a
list rewritten whole on every event of the subject; the index adds one row per
event instead. It has a checkpoint of its own and moves in the same transaction
as the views, so it is rebuilt with them and is never ahead of or behind what
they folded.

Query semantics, identical in every backend: `where` terms are ANDed (`=`,
`in`, `<`, `<=`, `>`, `>=`; a NULL column matches none of them, but `= None`
matches exactly the NULL ones); `text` keeps rows whose search text contains
every whitespace-separated term, ASCII case-insensitively; `order` names columns
(`-col` descending; NULL sorts first ascending, last descending) and always ends
with the key; then offset, limit.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import msgspec

from uwf.engine.log import Checkpoint

ColumnValue = int | str | None
# What a column holds, when the view declares it (`ViewSpec.types`): a backend with
# typed columns (PostgreSQL) needs it; SQLite and memory store any ColumnValue.
COLUMN_TYPES = ("int", "text")
# The stream index's name among the checkpoints (no view may take it), and its
# signature: a change to how it is kept rebuilds it alone, as a view's does.
STREAMS = "streams"
STREAMS_SIGNATURE = json.dumps([STREAMS, 1])
ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def ascii_lower(text: str) -> str:
    """`text` with A-Z lowercased and nothing else (`ASCII_LOWER`): `str.lower` where
    the text is all ASCII (the same characters, without a table lookup a character:
    a run's search text in 0.1 µs, not 2)."""
    return text.lower() if text.isascii() else text.translate(ASCII_LOWER)


class ViewSpec(msgspec.Struct, frozen=True, dict=True):
    """What a projection declares about its view's storage. (A frozen Struct: a
    dataclass compiles its methods at every start-up; `dict` holds the cached
    `signature`.)"""

    name: str
    version: int
    columns: tuple[str, ...] = ()
    indexes: tuple[tuple[str, ...], ...] = ()
    counted: tuple[str, ...] = ()  # columns whose per-value counts are kept up to date
    text: bool = False
    # Each column's type ("int" or "text", in `columns` order), or () undeclared. Not
    # part of `signature`: SQLite and memory store the same either way; a typed backend
    # adds them to the signature it keeps.
    types: tuple[str, ...] = ()
    # Columns NULL in most rows: an index holding one leaves those rows out (a partial
    # index), so a row written while it is NULL costs that index nothing. A query uses
    # such an index when it compares the column (`=`, `<`, `>`...), never for `IS NULL`.
    sparse: tuple[str, ...] = ()
    # Its secondary indexes each made by the first read that may be planned on it, not
    # when a replay loads the view (uwf/engine/readindex.py; a SQLite store's). Not part
    # of `signature`: the rows are the same either way, and read the same.
    on_read: bool = False

    def __post_init__(self) -> None:
        for name in (self.name, *self.columns):
            if not _NAME.fullmatch(name) or name in ("key", "value", "text"):
                raise ValueError(f"invalid view or column name {name!r}")
        if self.name == STREAMS:
            raise ValueError(f"{STREAMS!r} is the stream index's name, not a view's")
        for column in (*(c for index in self.indexes for c in index), *self.counted,
                       *self.sparse):
            if column != "key" and column not in self.columns:
                raise ValueError(f"view {self.name}: {column!r} is not a declared column")
        if self.types and (len(self.types) != len(self.columns)
                           or any(kind not in COLUMN_TYPES for kind in self.types)):
            raise ValueError(f"view {self.name}: types {self.types!r} are not one of "
                             f"{COLUMN_TYPES} per column")

    @functools.cached_property
    def signature(self) -> str:
        """Changes whenever the stored shape or the fold changes: such views are rebuilt."""
        shape = [self.version, self.columns, self.indexes, self.counted, self.text]
        return json.dumps([*shape, self.sparse] if self.sparse else shape)

    def index_where(self, index: tuple[str, ...]) -> tuple[str, ...]:
        """The sparse columns of `index`: the rows it holds have each of them set."""
        return tuple(column for column in index if column in self.sparse)


class Row(NamedTuple):
    """One entity as stored: its state, its column values (in declared order), its text."""

    value: bytes
    columns: tuple[ColumnValue, ...] = ()
    text: str = ""


class Rows(dict[str, "Row | None"]):
    """A view's rows for a commit (key -> row, None deletes), and the rows some of them
    replace as the writer knows them (`before`: key -> the row stored now, None when
    there is none), which a store then need not read back. Any mapping of rows is a
    commit's; `before` only spares reads, and must be what the store holds."""

    __slots__ = ("before",)

    def __init__(self, rows: Mapping[str, Row | None],
                 before: Mapping[str, Row | None]) -> None:
        super().__init__(rows)
        self.before = before


class NewRows(Mapping[str, "Row | None"]):
    """Rows of entities no view holds yet (ids a command just minted), each as a store
    inserts it: (key, value, *column values, text as stored: ASCII lowercased). SQLite
    inserts them as they are (`viewrows.write_rows`); to any other reader they are a
    mapping of rows, made on the first look."""

    __slots__ = ("_rows", "inserts")

    def __init__(self, inserts: list[tuple[Any, ...]]) -> None:
        self.inserts = inserts
        self._rows: dict[str, Row | None] | None = None

    def _made(self) -> dict[str, Row | None]:
        if self._rows is None:
            self._rows = {found[0]: Row(found[1], found[2:-1], found[-1])
                          for found in self.inserts}
        return self._rows

    def __getitem__(self, key: str) -> Row | None:
        return self._made()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._made())

    def __len__(self) -> int:
        return len(self.inserts)


Changes = Mapping[str, Mapping[str, Row | None]]  # view -> key -> row (None deletes)
StreamEntries = Sequence[tuple[str, int]]  # (subject, seq) of events, in seq order
Part = tuple[Changes, StreamEntries]  # one stretch of a long fold, written as it comes


def resolved(new: Checkpoint | Callable[[], Checkpoint]) -> Checkpoint:
    """A commit's new checkpoint: given, or known once its last part is written."""
    return new() if callable(new) else new


class Query(msgspec.Struct, frozen=True):
    """A read of one view: filter, search, order, page. (A frozen Struct: a dataclass
    compiles its methods at every start-up.)"""

    view: str
    where: tuple[tuple[str, str, Any], ...] = ()
    text: str | None = None
    order: tuple[str, ...] = ()
    limit: int | None = None
    offset: int = 0


def search_terms(text: str | None) -> list[str]:
    return [] if not text else text.translate(ASCII_LOWER).split()


def order_terms(order: Sequence[str]) -> list[str]:
    """The query's order, ending with the key (so every order is total)."""
    terms = list(order)
    if not any(term.lstrip("-") == "key" for term in terms):
        terms.append("key")
    return terms


class ViewStore(Protocol):
    """Persisted view rows, the stream index, their checkpoints, and queries over them."""

    def checkpoints(self) -> dict[str, Checkpoint]:
        """The checkpoint of every view present at its declared signature, and of the
        stream index (`STREAMS`) when it is present."""
        ...

    def load(self, view: str, key: str) -> bytes | None: ...

    def load_many(self, view: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The states of those of `keys` that have a row (one read, not one per key)."""
        ...

    def query(self, query: Query) -> list[tuple[str, bytes]]:
        """(key, state) of the rows the query selects, in its order."""
        ...

    def count(self, query: Query) -> int:
        """How many rows the query's filter and text select (order and paging ignored)."""
        ...

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        """Rows per value of `column` (values with no rows are absent)."""
        ...

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        """Every (key, state) of a view, in key order."""
        ...

    def stream(self, subject: str, after: int = 0, *, reverse: bool = False) -> list[int]:
        """The seqs the stream index has for `subject`, those above `after`, ascending
        (descending with `reverse`); empty when the index is absent."""
        ...

    def version(self, subject: str) -> int:
        """The last seq the stream index has for `subject` (0: none)."""
        ...

    def commit(self, changes: Changes, expected: Mapping[str, Checkpoint | None],
               new: Checkpoint | Callable[[], Checkpoint], *, reset: bool = False,
               streams: StreamEntries = (), more: Iterable[Part] = ()) -> bool:
        """Move each view of `expected` from its expected checkpoint to `new` and apply
        its changes, all in one transaction; when `expected` names `STREAMS`, move the
        stream index too and add `streams` to it. `None` expects a view (or the index)
        absent or of another signature: it is emptied first, as is everything with
        `reset` (a rebuild, in place, so other processes' connections stay valid).
        Returns False, changing nothing, when any checkpoint is not as expected.

        `more`: further parts (changes, stream entries), each applied in turn in the
        same transaction after the first, so a long fold is written as it goes and
        never held whole; reads made while it is taken (`load`) see the parts written
        so far. `new` is then a function, called after the last part."""
        ...

    def drop(self) -> None:
        """Forget everything, as if the views had been deleted."""
        ...

    def close(self) -> None: ...

    def let_go(self) -> None:
        """Drop what this thread holds open of the views (its connection), so its next
        use opens them again; other threads' are left alone."""
