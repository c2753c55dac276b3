"""One PostgreSQL database holding a store: the connections its log, views and CAS share.

The PostgreSQL backends (`uwf.engine.pglog`, `uwf.engine.pgviews`, `uwf.cas.pgblobs`)
are built on one `PgDatabase`. It keeps two connections: the writer's (made on the
first section that needs it), on which the log's exclusive section is one transaction
(`transaction()`: the log's append and the views' fold commit together, or neither
does), and the reader's, in autocommit, for everything else. Inside a writer's
section, `connection()` is the writer's, so the section reads what it has written;
elsewhere it is the reader's, which sees only committed transactions.

psycopg (the `postgres` extra) is imported when a database is opened, never by
`uwf --help`. A URL's password is never shown: errors name the host and database.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from uwf.engine import pgarray, pgschema
from uwf.engine.dburl import where
from uwf.errors import OldFormat, StoreUnavailable, UsageError

if TYPE_CHECKING:
    import psycopg

# The version of the tables (uwf/engine/pgschema.py); a newer database fails closed.
SCHEMA_VERSION = pgschema.SCHEMA_VERSION
# The advisory lock creating tables takes (any 64-bit key no other lock uses: "uwf_ddl").
SCHEMA_LOCK = int.from_bytes(b"uwf_ddl")
# psycopg logs a warning for an error it ignored while leaving a pipeline (or rolling
# back) on a connection the server dropped; the error that matters is raised, as
# StoreUnavailable. With no logging handler anywhere, Python prints such warnings on
# stderr, several lines before the command's one. This handler stops that fallback;
# records still reach the handlers of an application that has some.
_QUIET = logging.NullHandler()


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise UsageError("a postgresql:// store needs the PostgreSQL driver, which is not "
                         "installed", "pip install 'uwf[postgres]'") from None
    logging.getLogger("psycopg").addHandler(_QUIET)  # once: the same handler is kept once
    return psycopg


class PgDatabase:
    """The connections of one store's database, and its schema version."""

    def __init__(self, url: str, *, lock_timeout: float = 10.0) -> None:
        self.url = url
        self.lock_timeout = lock_timeout
        self._psycopg = _psycopg()
        self._local = threading.local()
        self._lock = threading.RLock()  # one writer's section at a time in this process
        self._reader: psycopg.Connection[Any] = self._connect(autocommit=True)
        # The writer's connection is made on the first section that needs it: a process
        # whose commands each go in one call (uwf/engine/pgwrite.py, uwf/queue/pgcalls.py)
        # never opens it, and a connection costs the server ~4.5 ms of CPU (a backend
        # started: docs/benchmarks.md).
        self._writer: psycopg.Connection[Any] | None = None
        self._check_schema()

    # A connection the server dropped (a restart, a network cut) fails the statement
    # that meets it (StoreUnavailable); the next use outside a transaction connects
    # again, so a long-running process (a worker, a follower) outlives the outage.

    @property
    def reader(self) -> psycopg.Connection[Any]:
        """The autocommit connection of reads outside a writer's section."""
        if self._reader.closed or self._reader.broken:
            with self._lock:
                if self._reader.closed or self._reader.broken:
                    self._reader = self._connect(autocommit=True)
        return self._reader

    @property
    def writer(self) -> psycopg.Connection[Any]:
        """The connection of the writers' sections (one at a time, under `_lock`), made
        on first use."""
        writer = self._writer
        if writer is None or (not self.in_transaction and (writer.closed or writer.broken)):
            with self._lock:
                writer = self._writer
                if writer is None or writer.closed or writer.broken:
                    writer = self._writer = self._connect(autocommit=False)
        return writer

    def _connect(self, *, autocommit: bool) -> psycopg.Connection[Any]:
        try:
            connection: psycopg.Connection[Any] = self._psycopg.connect(
                self.url, autocommit=autocommit, connect_timeout=10)
        except self._psycopg.Error as exc:
            raise self.unavailable(exc) from None
        pgarray.register(connection)  # arrays built in one pass (uwf/engine/pgarray.py)
        return connection

    def unavailable(self, exc: BaseException) -> StoreUnavailable:
        """A one-line error for a failure to reach or use the server: host and database,
        what it said (first line), never the password."""
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        for secret in filter(None, (urlsplit(self.url).password,)):
            said = said.replace(secret, "***")
        return StoreUnavailable(f"PostgreSQL {where(self.url)}: {said}",
                                "check that the server runs, the database exists and the "
                                "URL's user may log in")

    @contextlib.contextmanager
    def reached(self) -> Iterator[None]:
        """Statements run in this block that cannot reach or use the server raise the
        one-line `unavailable` error instead of psycopg's."""
        try:
            yield
        except self._psycopg.OperationalError as exc:
            raise self.unavailable(exc) from None

    def _check_schema(self) -> None:
        """Refuse a newer schema; bring an older one (or a new database) to this uwf's
        through the migrations (uwf/engine/pgschema.py), once, under the schema's lock.
        A database at this version costs one statement."""
        self.create("uwf_schema", "CREATE TABLE IF NOT EXISTS uwf_schema "
                    "(id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)")
        row = self.reader.execute("SELECT version FROM uwf_schema").fetchone()
        self._refuse_newer(row)
        if row is not None and row[0] == pgschema.SCHEMA_VERSION:
            return
        with self.transaction() as connection:
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            row = connection.execute("SELECT version FROM uwf_schema").fetchone()
            self._refuse_newer(row)  # another process opening it too may have moved it
            if row is None:
                connection.execute("INSERT INTO uwf_schema VALUES (1, %s)",
                                   (pgschema.FIRST_VERSION,))
            pgschema.migrate(connection, pgschema.FIRST_VERSION if row is None else row[0])

    def _refuse_newer(self, row: tuple[Any, ...] | None) -> None:
        if row is not None and row[0] > pgschema.SCHEMA_VERSION:
            raise OldFormat(f"{where(self.url)} was written by a newer uwf (schema "
                            f"{row[0]}, this uwf reads {pgschema.SCHEMA_VERSION})",
                            "upgrade uwf; the database is left as it is")

    @property
    def in_transaction(self) -> bool:
        """Whether this thread is inside `transaction()`."""
        return bool(getattr(self._local, "depth", 0))

    def connection(self) -> psycopg.Connection[Any]:
        """The writer's connection inside this thread's transaction, else the reader's."""
        return self.writer if self.in_transaction else self.reader

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """The writer's transaction: committed when the block ends, rolled back when it
        raises. Nested calls join the outer transaction."""
        with self._lock:
            depth = getattr(self._local, "depth", 0)
            if depth:
                self._local.depth = depth + 1
                try:
                    yield self.writer
                finally:
                    self._local.depth = depth
                return
            writer = self.writer  # connected again first if the server dropped it
            self._local.depth = 1
            try:
                with writer.transaction() as transaction:
                    yield writer
            except self._psycopg.OperationalError as exc:
                raise self.unavailable(exc) from None
            finally:
                self._local.depth = 0
            # psycopg leaves a block whose connection broke inside it without a COMMIT and
            # without an error: a section that went on past a lost statement (a retry, a
            # catch-up) would be taken as written. The server ended it: nothing was.
            if transaction.status != transaction.Status.COMMITTED:
                raise self.unavailable(ConnectionError(
                    "the connection was lost before the commit; nothing was written"))

    def create(self, table: str, *statements: str) -> None:
        """Run `statements` (CREATE ... IF NOT EXISTS) unless `table` exists. Two processes
        opening a new database at once would race in the catalog (a duplicate key in
        pg_type), so the creation holds an advisory lock of its own."""
        found = self.connection().execute("SELECT to_regclass(%s)", (table,)).fetchone()
        if found is not None and found[0] is not None:
            return
        with self.transaction() as connection:
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for statement in statements:
                connection.execute(statement)

    def prepared(self, name: str, sql: str, values: Sequence[bytes | None]) -> bytes | None:
        """Run the statement prepared as `name` (`sql`, prepared first when the server
        says this connection has none of that name) with `values`, each in binary, on
        the reader's connection; its first row's first column, as text (None: no row or
        NULL). An error as psycopg raises it. Through libpq directly: psycopg's own
        execute and wait cost ~40 µs more of this process's CPU a call that waits on the
        server, as a durable commit does (docs/benchmarks.md, issue 31)."""
        from psycopg import errors, pq

        connection = self.reader
        with connection.lock:  # the connection serves one statement at a time, as psycopg's
            pgconn = connection.pgconn
            for attempt in range(2):
                result = pgconn.exec_prepared(name.encode(), cast(Any, values),  # None: NULL
                                              [1] * len(values))
                if result.status == pq.ExecStatus.TUPLES_OK:
                    return result.get_value(0, 0) if result.ntuples else None
                failed = self._failed(pgconn, result)
                if attempt or not isinstance(failed, errors.InvalidSqlStatementName):
                    raise failed
                made = pgconn.prepare(name.encode(), sql.encode())
                if made.status != pq.ExecStatus.COMMAND_OK:
                    raise self._failed(pgconn, made)
        return None

    def _failed(self, pgconn: Any, result: Any) -> Exception:
        """The error psycopg would raise for `result`: a lost connection's is an
        OperationalError (`reached` words it)."""
        from psycopg import errors, pq

        if pgconn.status == pq.ConnStatus.BAD or not result.error_field(
                pq.DiagnosticField.SQLSTATE):
            # The connection's message holds every error of the call, the server's
            # first (`FATAL:  terminating connection ...`), the result's only the last.
            said = (pgconn.error_message or result.error_message).decode(errors="replace")
            said = re.sub(r"^(FATAL|ERROR|PANIC):\s+", "", said.strip())
            lost: Exception = self._psycopg.OperationalError(said or "the connection was lost")
            return lost
        return errors.error_from_result(result)

    def session(self) -> psycopg.Connection[Any]:
        """A connection of its own, in autocommit (for a session's locks); the caller
        closes it."""
        return self._connect(autocommit=True)

    def listener(self, channel: str) -> psycopg.Connection[Any]:
        """A connection of its own that LISTENs on `channel` (for `notifies()`)."""
        connection = self._connect(autocommit=True)
        connection.execute(f"LISTEN {channel}")
        return connection

    def close(self) -> None:
        for connection in filter(None, (self._reader, self._writer)):
            with contextlib.suppress(Exception):
                connection.close()
