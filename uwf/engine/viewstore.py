"""Where view states persist: one SQLite file in WAL mode (SPEC §5), and the one place
the rest of uwf imports the view store from.

What a view store holds and answers (views, rows, queries, the stream index, their
checkpoints) is stated in `uwf.engine.viewspec`; the in-memory twin is
`uwf.engine.memviews`. Here each view is a table `v_<view>` with one row per entity,
its declared columns (indexed) and its search text (FTS5 trigram, `f_<view>`, made on
the first text search: uwf/engine/fulltext.py);
`checkpoints` holds every checkpoint (one shared row for the views that move together:
uwf/engine/ckptrows.py), `counts` the kept counts, and `streams` the stream index, one
row per event. Rows, index and checkpoints move in one transaction, guarded by
compare-and-set on each checkpoint, so concurrent catch-ups (readers take
no log lock) never fold an event twice and a rebuild never moves a view backwards.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from uwf.engine import ckptrows, fulltext, readindex
from uwf.engine.log import Checkpoint
from uwf.engine.sqliteguard import Guard
from uwf.engine.sqlquery import (
    chunks,
    column_sql,
    count_value,
    fts_match,
    order_sql,
    where_sql,
)
from uwf.engine.viewrows import (
    add_streams,
    create_table,
    index_table,
    journalled,
    settled,
    unjournalled,
    write_rows,
)
from uwf.engine.viewspec import (
    STREAMS,
    STREAMS_SIGNATURE,
    Changes,
    ColumnValue,
    Part,
    Query,
    StreamEntries,
    ViewSpec,
    resolved,
)
from uwf.engine.walstamp import WalStamp, identity
from uwf.errors import Corrupt, StoreBusy, StoreUnavailable

# A search whose words match at least this many rows walks the order's index for its
# page instead of fetching every match (`query`).
SCAN_ORDER_FROM = 1_000


class SqliteViewStore:
    """One SQLite file in WAL mode, never fsynced (`synchronous=OFF`): the log's append
    is a command's one durability point, and the views are replayed from it. A
    process killed mid-commit loses nothing (the kernel has the pages); a machine
    that loses power may lose the last commits, which the next reader folds again
    from the log, or, rarely, leave the file damaged, which `uwf registry rebuild`
    replaces.

    Each thread gets its own connection, so one store serves many threads.
    """

    def __init__(self, path: Path, specs: Sequence[ViewSpec], *, busy_timeout: float = 30.0
                 ) -> None:
        self.path = path
        self.specs = {spec.name: spec for spec in specs}
        self._signatures = {name: spec.signature for name, spec in self.specs.items()}
        self._signatures[STREAMS] = STREAMS_SIGNATURE
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        # Every connection, with its WAL-index header's reader (`_rows`).
        self._all: dict[sqlite3.Connection, WalStamp] = {}
        self._all_lock = threading.Lock()

    # -- connection and errors -------------------------------------------------

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            return db
        if not create and not self.path.exists():
            return None
        # A file being made by several processes at once: turning WAL on (and the first
        # schema) can be refused as locked without SQLite's busy wait; tried again
        # until the busy timeout, as any other lock is waited for.
        # The views are a cache anyone may delete (`rm -r views/`): a file deleted or
        # replaced while it is opened (its folder, its WAL) is opened again, a new one
        # folded from the log, until the busy timeout; an I/O error on files that stayed,
        # or in a folder this process may not write, is the disk's.
        give_up = time.monotonic() + self.busy_timeout
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            before = identity(self.path)
            try:
                with self._guard():
                    db = self._open()
                break
            except StoreBusy:
                if time.monotonic() >= give_up:
                    raise
                time.sleep(0.02)
            except StoreUnavailable:
                if time.monotonic() >= give_up or not self._vanished(before):
                    raise
        self._local.db = db
        self._local.tables = set()
        self._local.matches = {}
        self._local.indexed = {}  # readindex.ensure's
        self._local.checkpoints = None
        self._local.stamp = stamp = WalStamp(str(self.path))
        with self._all_lock:
            self._all[db] = stamp
        return db

    def _vanished(self, before: tuple[tuple[int, int] | None, ...]) -> bool:
        """Whether the views' files changed since `before` (`identity`): deleted or
        replaced while they were opened, or never made in a folder that is writable (or
        that was deleted meanwhile)."""
        after = identity(self.path)
        if after != before:
            return True
        folder = self.path.parent
        return after == (None, None, None) and (not folder.is_dir()
                                                or os.access(folder, os.W_OK))

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout,
                             check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")
            tables = {row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "state" in tables or "checkpoint" in tables:
                # Views of the earlier single-checkpoint format: rebuilt from the log.
                db.executescript("DROP TABLE IF EXISTS state; DROP TABLE IF EXISTS "
                                 "checkpoint; DROP TABLE IF EXISTS meta;")
            if ckptrows.EARLIER in tables:
                # Checkpoints of the earlier layout (a row per view; or written by an
                # older uwf since): no view has one now, so each is rebuilt from the log.
                db.executescript(f"DROP TABLE IF EXISTS {ckptrows.EARLIER}; "
                                 "DROP TABLE IF EXISTS checkpoints;")
            db.executescript(ckptrows.LAYOUT)
        except BaseException:
            db.close()
            raise
        return db

    def _guard(self) -> Guard:
        """Classify SQLite's errors: busy and I/O errors are transient (never a reason
        to delete the views); only a damaged file is Corrupt. (A class, not a generator:
        every read and commit enters one.)"""
        return Guard(self.path, self._corrupt)

    def _blob(self, value: object) -> bytes:
        """A stored state; anything but a BLOB (a hand-edited row) is a damaged view."""
        if not isinstance(value, bytes):
            raise self._corrupt(ValueError(f"a state stored as {type(value).__name__}"))
        return value

    def _key(self, key: object) -> str:
        """A stored key; anything but TEXT (a hand-edited row) is a damaged view."""
        if not isinstance(key, str):
            raise self._corrupt(ValueError(f"a key stored as {type(key).__name__}"))
        return key

    def _corrupt(self, exc: Exception) -> Corrupt:
        return Corrupt(f"views are unreadable ({self.path}: {exc})", "run `uwf registry rebuild`")

    def close(self) -> None:
        with self._all_lock:
            for db, stamp in self._all.items():
                readindex.optimize(db)
                db.close()
                stamp.close()
            self._all.clear()
        self._local = threading.local()

    def let_go(self) -> None:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            return
        with self._all_lock:
            if db in self._all:
                self._all.pop(db).close()
        with contextlib.suppress(sqlite3.Error):
            db.close()
        self._local.db = self._local.checkpoints = None

    # -- reads -------------------------------------------------------------------

    def checkpoints(self) -> dict[str, Checkpoint]:
        kept = getattr(self._local, "checkpoints", None)  # no commit since: one pread
        if kept is not None and kept[2] is not None and kept[2] == self._local.stamp.read():
            return dict(kept[1].found)
        with self._guard():
            db = self._connect(create=False)
            if db is None:
                return {}
            return self._checkpoints(db)

    def _checkpoints(self, db: sqlite3.Connection) -> dict[str, Checkpoint]:
        """Each view's checkpoint (a view at another signature has none)."""
        return dict(self._rows(db).found)

    def _rows(self, db: sqlite3.Connection) -> ckptrows.Checkpoints:
        """The checkpoint rows, kept while no other connection has committed (SQLite's
        data_version; this connection's own commits keep them up to date), so a write's
        two looks cost one PRAGMA each; with the WAL-index header as it was read before
        (`checkpoints` answers without SQLite while it stays: uwf/engine/walstamp.py)."""
        stamp = self._local.stamp.read()  # first: a commit after it moves it
        version = db.execute("PRAGMA data_version").fetchone()[0]
        kept: tuple[int, ckptrows.Checkpoints, bytes | None] | None = self._local.checkpoints
        if kept is not None and kept[0] == version:
            self._local.checkpoints = (version, kept[1], stamp)
            return kept[1]
        try:
            found = ckptrows.read(db.execute(ckptrows.SELECT), self._signatures)
        except ckptrows.Damaged as exc:  # a hand edit
            raise self._corrupt(exc) from None
        self._local.checkpoints = (version, found, stamp)
        return found

    def _reader(self, view: str) -> sqlite3.Connection | None:
        """A connection when the view's table exists (it may not, before a first fold)."""
        db = self._connect(create=False)
        if db is None:
            return None
        if view not in self.specs:
            raise ValueError(f"unknown view {view!r}")
        known: set[str] = self._local.tables
        if view in known:  # tables are only ever replaced within one transaction
            return db
        row = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                         (f"v_{view}",)).fetchone()
        if row is None:
            return None
        known.add(view)
        return db

    def load(self, view: str, key: str) -> bytes | None:
        with self._guard():
            db = self._reader(view)
            if db is None:
                return None
            row = db.execute(f'SELECT value FROM "v_{view}" WHERE key = ?', (key,)).fetchone()
            return None if row is None else self._blob(row[0])

    def load_many(self, view: str, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with self._guard():
            db = self._reader(view)
            if db is None:
                return found
            for chunk in chunks(sorted(set(keys))):
                found.update(db.execute(
                    f'SELECT key, value FROM "v_{view}" WHERE key IN '
                    f"({', '.join('?' * len(chunk))})", chunk).fetchall())
        return {key: self._blob(value) for key, value in found.items()}

    def query(self, query: Query) -> list[tuple[str, bytes]]:
        spec = self.specs[query.view]
        if query.text is not None and not spec.text:
            raise ValueError(f"view {spec.name} has no search text")
        with self._guard():
            db = self._reader(spec.name)
            if db is None:
                return []
            readindex.ensure(db, spec, query, self._local.indexed)
            match = fts_match(query.text)
            # Many matches: walk the order's index to the page's end, testing each row's
            # text, rather than fetch and sort every match (a common word among 100,000
            # runs: well under a millisecond, not 34). No full-text index (one that
            # cannot be made here): every row's text tested.
            scan = match is not None and (
                not self._searchable(db, spec.name) or (
                    query.limit is not None
                    and self._matches(db, spec.name, match) >= SCAN_ORDER_FROM))
            where, params = where_sql(spec, query, scan=scan)
            sql = (f'SELECT key, value FROM "v_{spec.name}"{where} ORDER BY '
                   f"{order_sql(spec, query.order)} LIMIT ? OFFSET ?")
            rows = db.execute(sql, [*params, -1 if query.limit is None else query.limit,
                                    query.offset]).fetchall()
        return [(self._key(key), self._blob(value)) for key, value in rows]

    def count(self, query: Query) -> int:
        where, params = where_sql(self.specs[query.view], query)
        counted = self.specs[query.view].counted
        with self._guard():
            db = self._reader(query.view)
            if db is None:
                return 0
            if not where and counted:  # every row: the kept counts add up to it
                row = db.execute("SELECT coalesce(sum(n), 0) FROM counts WHERE view = ? AND "
                                 "col = ?", (query.view, counted[0])).fetchone()
                return int(row[0])
            readindex.ensure(db, self.specs[query.view], query, self._local.indexed)
            match = fts_match(query.text)
            if match is not None and not self._searchable(db, query.view):
                where, params = where_sql(self.specs[query.view], query, scan=True)
            elif match is not None and params == [match]:  # words alone: the index counts
                return self._matches(db, query.view, match)
            row = db.execute(f'SELECT count(*) FROM "v_{query.view}"{where}', params).fetchone()
            return int(row[0])

    def _searchable(self, db: sqlite3.Connection, view: str) -> bool:
        """Whether the view's full-text index is there, made now if it is not (the first
        text search after a rebuild or a restore: uwf/engine/fulltext.py)."""
        return fulltext.exists(db, view) or fulltext.make(db, view)

    def _matches(self, db: sqlite3.Connection, view: str, match: str) -> int:
        """Rows whose text holds every term of `match` (its full-text index has one row
        per row of the view, under the same rowid). Kept while the file is unchanged
        (no commit by this connection or another), so a search's page and its total
        look the words up once."""
        version = (db.execute("PRAGMA data_version").fetchone()[0], db.total_changes)
        kept: dict[tuple[str, str], tuple[tuple[int, int], int]] = self._local.matches
        found = kept.get((view, match))
        if found is not None and found[0] == version:
            return found[1]
        row = db.execute(f'SELECT count(*) FROM "f_{view}" WHERE "f_{view}" MATCH ?',
                         (match,)).fetchone()
        if len(kept) >= 64:
            kept.clear()
        kept[(view, match)] = (version, int(row[0]))
        return int(row[0])

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        spec = self.specs[view]
        with self._guard():
            db = self._reader(view)
            if db is None:
                return {}
            if column in spec.counted:  # kept up to date by commit: O(distinct values)
                rows = db.execute("SELECT value, n FROM counts WHERE view = ? AND col = ?",
                                  (view, column)).fetchall()
                return self._counted(view, rows)
            name = column_sql(spec, column)
            rows = db.execute(f'SELECT {name}, count(*) FROM "v_{view}" GROUP BY {name}'
                              ).fetchall()
            return {value: int(n) for value, n in rows}

    def _counted(self, view: str, rows: list[tuple[Any, Any]]) -> dict[ColumnValue, int]:
        """The kept counts as written by commit; anything else is a damaged view."""
        found: dict[ColumnValue, int] = {}
        for value, n in rows:
            decoded = count_value(value)
            if decoded is ... or type(n) is not int:
                raise self._corrupt(ValueError(f"a kept count of view {view} is {value!r}: "
                                               f"{n!r}"))
            if n:
                found[decoded] = n
        return found

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        with self._guard():
            db = self._reader(view)
            if db is None:
                return
            rows = db.execute(f'SELECT key, value FROM "v_{view}" ORDER BY key').fetchall()
        for key, value in rows:
            yield self._key(key), self._blob(value)

    def stream(self, subject: str, after: int = 0, *, reverse: bool = False) -> list[int]:
        order = "DESC" if reverse else "ASC"
        with self._guard():
            db = self._stream_reader()
            if db is None:
                return []
            rows = db.execute(f"SELECT seq FROM streams WHERE subject = ? AND seq > ? "
                              f"ORDER BY seq {order}", (subject, after)).fetchall()
        return [self._seq(seq) for seq, in rows]

    def version(self, subject: str) -> int:
        with self._guard():
            db = self._stream_reader()
            if db is None:
                return 0
            row = db.execute("SELECT max(seq) FROM streams WHERE subject = ?",
                             (subject,)).fetchone()
        return 0 if row[0] is None else self._seq(row[0])

    def _stream_reader(self) -> sqlite3.Connection | None:
        """A connection when the stream index exists; an index whose table is gone while
        its checkpoint stays (a hand edit) is a damaged view, never an empty stream."""
        db = self._connect(create=False)
        if db is None:
            return None
        known: set[str] = self._local.tables
        if STREAMS in known:
            return db
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (STREAMS,)).fetchone() is None:
            if STREAMS in self._checkpoints(db):
                raise self._corrupt(ValueError("the stream index's table is missing"))
            return None
        known.add(STREAMS)
        return db

    def _seq(self, seq: object) -> int:
        """A stored seq; anything but an integer (a hand-edited row) is a damaged view."""
        if type(seq) is not int:
            raise self._corrupt(ValueError(f"a stream seq stored as {type(seq).__name__}"))
        return seq

    # -- writes ------------------------------------------------------------------

    def commit(self, changes: Changes, expected: Mapping[str, Checkpoint | None],
               new: Checkpoint | Callable[[], Checkpoint], *, reset: bool = False,
               streams: StreamEntries = (), more: Iterable[Part] = ()) -> bool:
        with self._guard():
            db = self._connect(create=True)
            assert db is not None
            # A rebuild's replay into views that hold nothing (after `rm -r views/`, a
            # copy's new store) loads with no journal when no other connection is open.
            bare = reset and STREAMS in expected and not any(expected.values()) and \
                unjournalled(db)
            db.execute("BEGIN IMMEDIATE")
            try:
                rows = self._rows(db)
                current = rows.found
                version = self._local.checkpoints[0]
                if any(current.get(name) != want for name, want in expected.items()):
                    db.execute("ROLLBACK")
                    return False
                made = {name for name, want in expected.items() if want is None or reset}
                for number, (part, entries) in enumerate(chain([(changes, streams)], more)):
                    for name in expected:
                        # Emptied before the first part; later parts go onto its rows.
                        fresh = name in made and number == 0
                        if name == STREAMS:
                            add_streams(db, entries, fresh=fresh, ordered=name in made)
                            continue
                        written = part.get(name)
                        if not written and not fresh:
                            continue  # most views have no row in a command's commit
                        spec = self.specs[name]
                        if fresh:
                            create_table(db, spec)
                        write_rows(db, spec, written or {}, fresh=fresh,
                                   searched=name not in made)
                for name in made - {STREAMS}:  # a new table's indexes, made once, loaded
                    index_table(db, self.specs[name])
                if bare:  # every row's page written before the checkpoints' (viewrows)
                    settled(db)
                after = ckptrows.write(db, rows, expected, {
                    name: self._signatures[name] for name in made}, resolved(new))
                db.execute("COMMIT")
                # Read inside the transaction: no other writer could commit since.
                self._local.checkpoints = (version, after, None)  # this commit moved it
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if bare:  # pages may be on disk, a half file: none, never taken for whole
                    self.drop()
                raise
            finally:
                if bare:
                    journalled(db)
            return True

    def drop(self) -> None:
        """Delete the file (and its WAL): the way out of a corrupt view store."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
