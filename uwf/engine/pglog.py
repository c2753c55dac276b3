"""The log in a PostgreSQL table: one row per line, the writer's section one transaction.

`uwf_events` holds each line's exact bytes (`bytea`: the chain covers them) under its
seq, and `ends`, the byte offset just past the line's newline in the log's JSONL form
(what the file log's segments would hold): so `describe()` reads the size off the
last row instead of summing the table, and `problems()` can tell a row removed or
changed in place from the keys and offsets alone.

The writers' exclusive section is `PgDatabase.transaction()` plus a transaction-level
advisory lock (`LOG_LOCK`), waited for at most the lock timeout (`StoreBusy` after).
Appends, and the views' fold that follows them, commit together when the section
ends, or not at all: a writer killed mid-section leaves nothing, so there is never a
torn tail to cut (`recover` has nothing to do) and no repair to record. Readers take
no lock and see only committed sections, whole.

psycopg is imported when a method needs one of its names, never at import: the
database (`uwf.engine.pgdb`) checks it is installed first.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uwf.engine import pglogrow
from uwf.engine.events import LogRepaired
from uwf.engine.log import GENESIS, Checkpoint, LogLine, LogProblem, LogSession, digest
from uwf.engine.pgdb import PgDatabase
from uwf.errors import Corrupt, StoreBusy

if TYPE_CHECKING:
    import psycopg

# The channel a writer NOTIFYs as its section commits (the new head's seq); followers LISTEN.
CHANNEL = "uwf_events"
TABLE = pglogrow.TABLE  # its row and the checks on it: uwf/engine/pglogrow.py
# The writers' advisory lock: a fixed 64-bit key ("uwf_log"), held until the section's
# transaction ends.
LOG_LOCK = int.from_bytes(b"uwf_log")
FIRST_CHUNK = 64  # rows per read at first: a catch-up or a newest-first search is short
LAST_CHUNK = 4096  # ... doubling up to this, so a full read is few round trips
BEYOND = 2**63 - 1  # past every seq: where a newest-first read starts
MANY_LINES = 100  # more lines than this in one append go by COPY



@dataclass(frozen=True)
class Procedure:
    """A server-side command: `create` is the `CREATE PROCEDURE` of `{name}` with `params`
    (the SQL types of the IN parameters, in order). The procedure's name on the server is
    `base` and a digest of its text, so each uwf calls the text it was built with, and
    two versions of uwf side by side never replace each other's."""

    base: str
    params: tuple[str, ...]
    create: str
    function: bool = False  # a FUNCTION, called by a SELECT (its result: the one column)
    conflict: bool = False  # a unique violation means the head moved: `call` says None

    @functools.cached_property
    def name(self) -> str:
        return f"{self.base}_{hashlib.sha256(self.create.encode()).hexdigest()[:12]}"

    @functools.cached_property
    def prepared_sql(self) -> str:
        """A function's SELECT, to prepare: `$n` cast to each parameter's type."""
        casts = ", ".join(f"${n}::{kind}" for n, kind in enumerate(self.params, 1))
        return f"SELECT {self.name}({casts})"

    def binary(self, args: Sequence[Any]) -> list[bytes | None]:
        """`args` in PostgreSQL's binary form of each parameter's type (an array's: a
        `uwf.engine.pgarray.Array` already)."""
        return [_binary(kind, value) for kind, value in zip(self.params, args, strict=True)]

    @functools.cached_property
    def call_sql(self) -> str:
        # In binary (%b): psycopg's text form escapes each array item in Python.
        casts = ", ".join(f"%b::{kind}" for kind in self.params)
        return f"{'SELECT' if self.function else 'CALL'} {self.name}({casts})"


def _binary(kind: str, value: Any) -> bytes | None:
    if value is None:
        return None
    if kind == "boolean":
        return b"\x01" if value else b"\x00"
    if kind in ("int", "bigint"):
        return int(value).to_bytes(4 if kind == "int" else 8, "big", signed=True)
    if kind == "text":
        return str(value).encode()
    if kind == "bytea" and isinstance(value, bytes):
        return value
    if kind.endswith("[]") and isinstance(value, bytes):
        return value
    raise TypeError(f"no binary form of {value!r} as {kind}")


def _chunks(first: int = FIRST_CHUNK) -> Iterator[int]:
    size = first
    while True:
        yield size
        size = min(size * 2, LAST_CHUNK)


class PgLog:
    """The event log as rows of `uwf_events` in a store's PostgreSQL database."""

    told = True  # `wait` LISTENs for the writers' NOTIFY

    def __init__(self, db: PgDatabase, *, durable: bool = True) -> None:
        self.db = db
        # Not durable: commits do not wait for the server's WAL flush
        # (synchronous_commit off); a server crash may lose the last sections, whole.
        self.durable = durable
        self._thread_lock = threading.Lock()  # the writer connection serves one section
        self._listener: psycopg.Connection[Any] | None = None  # `wait`'s, made on first use
        with db.reached():
            db.create(TABLE, *pglogrow.CREATE)

    def _connection(self) -> psycopg.Connection[Any]:
        return self.db.connection()

    # -- reading ---------------------------------------------------------

    def head(self) -> Checkpoint:
        with self.db.reached():
            return _last(self._connection())[0]

    def read(self, after: int = 0) -> Iterator[LogLine]:
        return self._chunked(f"SELECT seq, line FROM {TABLE} WHERE seq > %s ORDER BY seq "
                             "LIMIT %s", max(after, 0))

    def read_reverse(self) -> Iterator[LogLine]:
        return self._chunked(f"SELECT seq, line FROM {TABLE} WHERE seq < %s ORDER BY seq "
                             "DESC LIMIT %s", BEYOND)

    def _chunked(self, query: str, position: int) -> Iterator[LogLine]:
        """The lines `query` (after or before a seq, then a limit) pages through, in
        growing chunks from `position`: never the whole table at once."""
        for size in _chunks():
            with self.db.reached():
                rows = self._connection().execute(query, (position, size),
                                                  binary=True).fetchall()
            for seq, raw in rows:
                yield LogLine(seq, bytes(raw), TABLE, seq)  # a buffer, in psycopg's C build
            if len(rows) < size:
                return
            position = rows[-1][0]

    def line(self, seq: int) -> bytes | None:
        with self.db.reached():
            row = self._connection().execute(f"SELECT line FROM {TABLE} WHERE seq = %s",
                                             (seq,), binary=True).fetchone()
        return None if row is None else bytes(row[0])

    def problems(self) -> list[LogProblem]:
        """Rows whose key or offset does not follow the row before: rows removed, or a
        line changed in place (the table's equivalent of a misnamed segment). There is
        no torn tail in a table."""
        with self.db.reached():
            rows = self._connection().execute(
                f"SELECT seq, ends, size, before, before_ends FROM (SELECT seq, ends, "
                "octet_length(line) AS size, lag(seq, 1, 0::bigint) OVER w AS before, "
                f"lag(ends, 1, 0::bigint) OVER w AS before_ends FROM {TABLE} "
                "WINDOW w AS (ORDER BY seq)) AS t "
                "WHERE seq <> before + 1 OR ends <> before_ends + size + 1").fetchall()
        found: list[LogProblem] = []
        for seq, ends, size, before, before_ends in rows:
            if seq != before + 1:
                found.append(LogProblem(seq, TABLE, seq, f"seq {seq} follows {before}: "
                                        f"{seq - before - 1} row(s) missing before it"))
            elif ends != before_ends + size + 1:
                found.append(LogProblem(seq, TABLE, seq, f"the row ends at byte {ends}, "
                                        f"its line at {before_ends + size + 1}: the line was "
                                        "changed in place"))
        return found

    def describe(self) -> dict[str, int]:
        """`rows`: the lines in the table (its last seq: `problems` checks they run from
        1 without a gap); `bytes`: their size as JSONL, newlines included."""
        with self.db.reached():
            head, ends = _last(self._connection())
        return {"rows": head.seq, "bytes": ends}

    def sync(self) -> None:
        """Nothing to do: a section's lines are seen only once its commit is durable."""

    def wait(self, after: int, timeout: float) -> bool:
        """LISTEN for the writers' NOTIFY (sent as each section commits), on a connection
        of its own made on first use; the head is looked at once first, so a line
        appended before the LISTEN is not waited for."""
        if self._listener is not None and (self._listener.closed or self._listener.broken):
            self._listener = None  # dropped by the server: listen again on a new one
        if self._listener is None:
            self._listener = self.db.listener(CHANNEL)
        if self.head().seq > after:
            return True
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            with self.db.reached():
                for _ in self._listener.notifies(timeout=left, stop_after=1):
                    break
            if self.head().seq > after:
                return True
        return False

    def close(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            listener.close()

    # -- writing -----------------------------------------------------------

    def call(self, procedure: Procedure, args: Sequence[Any]) -> tuple[Any, ...] | None:
        """Run a server-side command (SPEC §11: decided, appended and folded in one
        round trip, `CALL`); its INOUT values (a function's: its result). The procedure is
        created on first use (when the server says it does not exist), under the
        schema's lock. None inside a writer's section of this thread: a procedure
        commits on its own, so it cannot join that transaction. A key the command writes
        found taken is None too when the procedure says it means the head moved
        (`Procedure.conflict`): the call's transaction was rolled back, nothing written."""
        from psycopg import errors

        if self.db.in_transaction:
            return None
        for _attempt in range(2):
            try:
                row = self._call(procedure, args)
            except errors.UndefinedFunction:
                self._create(procedure)
                continue
            except errors.UniqueViolation as exc:
                if not procedure.conflict:
                    raise self._failed(procedure, exc) from None
                return None
            except errors.DatabaseError as exc:  # a fault of the procedure, not the network
                raise self._failed(procedure, exc) from None
            return None if row is None else tuple(row)
        return None

    @staticmethod
    def _failed(procedure: Procedure, exc: Exception) -> Corrupt:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return Corrupt(f"the server's {procedure.base} failed: {said}",
                       "see whether it was recorded with `uwf log tail`; run `uwf log "
                       "verify` and `uwf registry verify`")

    def _call(self, procedure: Procedure, args: Sequence[Any]) -> Any:
        """The CALL's row; a lock not had in time is StoreBusy (before `reached` makes
        every OperationalError a lost server)."""
        from psycopg import errors

        with self.db.reached():
            try:
                if procedure.function:  # prepared once a connection, sent through libpq
                    got = self.db.prepared(procedure.name, procedure.prepared_sql,
                                           procedure.binary(args))
                    return (None if got is None else got.decode(),)
                return self.db.reader.execute(procedure.call_sql, list(args)).fetchone()
            except errors.LockNotAvailable:
                raise StoreBusy(f"store is busy: another writer held the log for "
                                f"{self.db.lock_timeout:g}s",
                                "retry, or raise UWF_LOCK_TIMEOUT") from None

    def _create(self, procedure: Procedure) -> None:
        from uwf.engine.pgdb import SCHEMA_LOCK

        with self.db.transaction() as connection, self.db.reached():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            connection.execute(procedure.create.replace("{name}", procedure.name))

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[LogSession]:
        from psycopg.errors import LockNotAvailable

        # One section per process at a time: the writer connection has one transaction.
        if not self._thread_lock.acquire(timeout=max(self.db.lock_timeout, 0)):
            raise StoreBusy(f"store is busy: another thread held the log for "
                            f"{self.db.lock_timeout:g}s", "retry, or raise UWF_LOCK_TIMEOUT")
        try:
            with self.db.transaction() as connection:
                session = _PgSession(connection)
                # Any lock the section waits for is bounded alike (0 would wait forever).
                # The settings, the lock and the head's read go in one round trip; the
                # head is read after the lock is held (each statement has its snapshot).
                wait = f"{max(round(self.db.lock_timeout * 1000), 1)}ms"
                try:
                    with connection.pipeline():
                        connection.execute("SELECT set_config('lock_timeout', %s, true)",
                                           (wait,))
                        if not self.durable:
                            connection.execute(
                                "SELECT set_config('synchronous_commit', 'off', true)")
                        connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
                        session.tail()
                except LockNotAvailable:
                    raise StoreBusy(f"store is busy: another writer held the log for "
                                    f"{self.db.lock_timeout:g}s",
                                    "retry, or raise UWF_LOCK_TIMEOUT") from None
                yield session
        finally:
            self._thread_lock.release()


def _last(connection: psycopg.Connection[Any]) -> tuple[Checkpoint, int]:
    """The head and the byte offset past its line (GENESIS, 0 when empty)."""
    row = connection.execute(f"SELECT seq, line, ends FROM {TABLE} ORDER BY seq DESC LIMIT 1",
                             binary=True).fetchone()
    if row is None:
        return GENESIS, 0
    seq, raw, ends = row
    return Checkpoint(seq, digest(raw)), ends


class _PgSession:
    """A writer's section on the table: the head is read once, then kept."""

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self._connection = connection
        self._last: tuple[Checkpoint, int] | None = None

    def _head(self) -> tuple[Checkpoint, int]:
        if self._last is None:
            self._last = _last(self._connection)
        return self._last

    def tail(self) -> Checkpoint | None:
        return self._head()[0]

    def recover(self) -> tuple[Checkpoint, list[LogRepaired]]:
        return self._head()[0], []  # a section that did not commit left nothing behind

    def defer_sync(self) -> None:
        """Ignored: a section's commit is durable (synchronous_commit)."""

    def append(self, lines: Sequence[bytes]) -> Checkpoint:
        from psycopg.errors import IntegrityError

        head, ends = self._head()
        if not lines:
            return head
        if any(b"\n" in raw for raw in lines):
            raise ValueError("a log line may not contain a newline")
        seqs = range(head.seq + 1, head.seq + len(lines) + 1)
        offsets = list(itertools.accumulate((len(raw) + 1 for raw in lines), initial=ends))[1:]
        last = Checkpoint(seqs[-1], digest(lines[-1]))
        try:
            if len(lines) > MANY_LINES:  # a copy's or an import's: by COPY
                with self._connection.cursor().copy(
                        f"COPY {TABLE} (seq, line, ends) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["int8", "bytea", "int8"])
                    for row in zip(seqs, lines, offsets, strict=True):
                        copy.write_row(row)
                self._connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(last.seq)))
            else:  # a command's: the rows and the NOTIFY in one statement, one round trip
                self._connection.execute(
                    f"WITH added AS (INSERT INTO {TABLE} (seq, line, ends) SELECT * FROM "
                    "unnest(%b::bigint[], %b::bytea[], %b::bigint[])) "
                    "SELECT pg_notify(%s, %s)",
                    (list(seqs), list(lines), offsets, CHANNEL, str(last.seq)))
        except IntegrityError as exc:
            raise Corrupt(f"the log's table refused seq {head.seq + 1}: "
                          f"{str(exc).strip().splitlines()[0]}",
                          "another writer bypassed the lock; run `uwf log verify`") from None
        # NOTIFY is told to every LISTENer when the section commits (never if it rolls back).
        self._last = last, offsets[-1]
        return last
