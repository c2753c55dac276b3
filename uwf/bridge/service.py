"""`uwf bridge mqtt`: every event of the log, published to `<prefix>/<subject>/events`.

The payload is the log line itself (its exact bytes, without the newline). The
bridge keeps its place in the store: `<store>/bridge/mqtt-<digest>.json` holds the
last seq the broker acknowledged, for that broker (host:port) and prefix, and is
replaced atomically after each chunk; everything after it is published again by the
next run, so nothing is missed (at least once: after a crash or a dropped connection
an event may come twice; subscribers drop the seqs they have seen).

Lines are read from the log in chunks, only whole batches (a batch whose last line
is not written yet waits), and published with up to `WINDOW` messages awaiting the
broker's acknowledgement at once. When the connection drops, the bridge makes a new
one and publishes again from the acknowledged seq.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

import msgspec

from uwf.bridge.results import Bridged
from uwf.engine.events import CasNode
from uwf.engine.log import EventLog
from uwf.errors import (
    BrokerUnavailable,
    Corrupt,
    Rejected,
    StoreBusy,
    StoreUnavailable,
    UsageError,
)
from uwf.queue.broker import (
    WINDOW,
    Connection,
    check_topic_prefix,
    connect_retrying,
    parse_broker,
    where,
)
from uwf.queue.events import BrokerRef
from uwf.store import Store

if TYPE_CHECKING:
    from uwf.engine.pgdb import PgDatabase

# Lines read from the log, published and acknowledged before the seq is saved.
CHUNK = 2_000
# How often a following bridge looks at the log for new lines.
POLL_S = 0.05
# Waits between attempts to reach a broker that is down, while following.
STATE_FOLDER = "bridge"


@dataclass(frozen=True)
class Target:
    """Where the events go: the broker, the topic prefix and the QoS."""

    broker: BrokerRef
    prefix: str
    qos: int

    @property
    def where(self) -> str:
        return where(self.broker)


def target(url: str, prefix: str, qos: int, password_env: str | None) -> Target:
    """The broker URL, prefix and QoS checked (usage errors naming what is wrong)."""
    broker = parse_broker(url, password_env)
    if broker.password_env is not None and broker.username is None:
        raise UsageError("--broker-password-env needs a user in the URL",
                         "give mqtt://USER@HOST:PORT")
    if prefix.startswith("$"):
        raise UsageError(f"topic prefix {prefix!r} starts with $, which brokers keep for "
                         "themselves", "give a prefix such as uwf")
    return Target(broker, check_topic_prefix(prefix), qos)


def topic(prefix: str, subject: str) -> str:
    """`<prefix>/<subject>/events`, the wildcards and NUL of the subject made `_`."""
    for char in "+#\x00":
        subject = subject.replace(char, "_")
    return f"{prefix}/{subject}/events"


# -- where the bridge stands -----------------------------------------------------------

class _State(msgspec.Struct, forbid_unknown_fields=True):
    broker: str
    prefix: str
    seq: Annotated[int, msgspec.Meta(ge=0)]


def state_path(root: Path, to: Target) -> Path:
    """`<store>/bridge/mqtt-<digest of host:port and prefix>.json`."""
    key = f"{to.where}\n{to.prefix}".encode()
    return root / STATE_FOLDER / f"mqtt-{hashlib.sha256(key).hexdigest()[:16]}.json"


def load_seq(path: Path, to: Target, log: EventLog) -> int:
    """The last seq the broker acknowledged (0: none yet)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise Corrupt(f"cannot read the bridge's state {path}: {exc.strerror}",
                      "check the file") from None
    try:
        state = msgspec.json.decode(data, type=_State)
    except msgspec.DecodeError as exc:
        raise Corrupt(f"the bridge's state {path} is not {{broker, prefix, seq}}: {exc}",
                      "remove it to publish every event again") from None
    if (state.broker, state.prefix) != (to.where, to.prefix):
        raise Corrupt(f"the bridge's state {path} is for {state.broker} under "
                      f"{state.prefix!r}, not {to.where} under {to.prefix!r}",
                      "remove it to publish every event again")
    head = log.head().seq
    if state.seq > head:
        raise Rejected(f"the bridge's state {path} says seq {state.seq} was published, but "
                       f"the log ends at seq {head}",
                       "it is another store's, or the log was replaced: remove it to "
                       "publish every event again")
    return state.seq


def save_seq(path: Path, to: Target, seq: int, durable: bool) -> None:
    """Replace the state with `seq`: a temporary file, synced, then renamed over it."""
    from uwf.cas.backends import replace_atomically

    data = msgspec.json.encode(_State(broker=to.where, prefix=to.prefix, seq=seq)) + b"\n"
    try:
        replace_atomically(str(path.parent), str(path), data, durable)
    except OSError as exc:
        raise StoreUnavailable(f"cannot write the bridge's state {path}: {exc.strerror}",
                               "free space or fix its folder; the next run publishes again "
                               "what was published since it was last written") from None


@contextlib.contextmanager
def _held(path: Path, to: Target) -> Iterator[None]:
    """The state's lock, so two bridges never publish from one store to one place."""
    import portalocker  # imported here: only the bridge pays for it

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            portalocker.lock(fd, portalocker.LockFlags.EXCLUSIVE
                             | portalocker.LockFlags.NON_BLOCKING)
        except portalocker.exceptions.LockException:
            raise StoreBusy(f"another `uwf bridge mqtt` publishes this store's events to "
                            f"{to.where} under {to.prefix!r}",
                            "stop it first, or leave it running") from None
        yield
    finally:
        os.close(fd)  # closing the file lets the lock go


class Place(Protocol):
    """Where a bridge keeps the last seq its broker acknowledged, and its lock."""

    @property
    def shown(self) -> str: ...

    def held(self) -> contextlib.AbstractContextManager[None]: ...

    def load(self, log: EventLog) -> int: ...

    def save(self, seq: int) -> None: ...


@dataclass(frozen=True)
class FilePlace:
    """A store folder's: the state file and its lock file."""

    path: Path
    to: Target
    durable: bool

    @property
    def shown(self) -> str:
        return str(self.path)

    def held(self) -> contextlib.AbstractContextManager[None]:
        return _held(self.path, self.to)

    def load(self, log: EventLog) -> int:
        return load_seq(self.path, self.to, log)

    def save(self, seq: int) -> None:
        save_seq(self.path, self.to, seq, self.durable)


BRIDGE_TABLE = "uwf_bridge"
_BRIDGE_LOCK = int.from_bytes(b"uwfb")  # the advisory locks' first key: a bridge's


@dataclass
class DatabasePlace:
    """A PostgreSQL store's: a row of `uwf_bridge` per broker and prefix, and a session
    advisory lock held on a connection of its own while the bridge runs."""

    database: PgDatabase
    to: Target

    @property
    def shown(self) -> str:
        return f"{BRIDGE_TABLE} ({self.to.where}, {self.to.prefix})"

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.database.create(BRIDGE_TABLE, f"CREATE TABLE IF NOT EXISTS {BRIDGE_TABLE} "
                             "(broker text, prefix text, seq bigint NOT NULL, "
                             "PRIMARY KEY (broker, prefix))")
        connection = self.database.session()
        try:
            key = f"{self.to.where}\n{self.to.prefix}"
            got = connection.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                                     (_BRIDGE_LOCK, key)).fetchone()
            if not (got and got[0]):
                raise StoreBusy(f"another `uwf bridge mqtt` publishes this store's events to "
                                f"{self.to.where} under {self.to.prefix!r}",
                                "stop it first, or leave it running")
            yield
        finally:
            connection.close()  # the session's lock goes with it

    def load(self, log: EventLog) -> int:
        row = self.database.connection().execute(
            f"SELECT seq FROM {BRIDGE_TABLE} WHERE broker = %s AND prefix = %s",
            (self.to.where, self.to.prefix)).fetchone()
        seq = 0 if row is None else int(row[0])
        head = log.head().seq
        if seq > head:
            raise Rejected(f"the bridge's place says seq {seq} was published, but the log "
                           f"ends at seq {head}", "the log was replaced: delete its row of "
                           f"{BRIDGE_TABLE} to publish every event again")
        return seq

    def save(self, seq: int) -> None:
        with self.database.transaction() as connection:
            connection.execute(f"INSERT INTO {BRIDGE_TABLE} VALUES (%s, %s, %s) ON CONFLICT "
                               "(broker, prefix) DO UPDATE SET seq = excluded.seq",
                               (self.to.where, self.to.prefix, seq))


# -- reading the log ---------------------------------------------------------------------

class _Head(msgspec.Struct):
    seq: int
    subject: str
    batch: tuple[int, int]
    type: str = ""




_head = msgspec.json.Decoder(_Head)


def acknowledged(store: Store) -> int:
    """The last seq whose batch is whole and folded: the stream index's checkpoint,
    which moves in the writer's section (caught up first when the views are absent).
    A line after it may still be cut (a writer that died mid-write), so it is never
    published; the lines up to it are made durable (`EventLog.sync`: a writer fsyncs
    after letting its lock go) before they are."""
    from uwf.engine.viewspec import STREAMS

    checkpoint = store.journal.views.checkpoints().get(STREAMS)
    if checkpoint is None:
        store.read()
        checkpoint = store.journal.views.checkpoints().get(STREAMS)
    return 0 if checkpoint is None else checkpoint.seq


def ready(log: EventLog, after: int, limit: int = CHUNK, upto: int | None = None
          ) -> list[tuple[int, str, bytes]]:
    """(seq, subject, line) of the lines after seq `after` (up to seq `upto`): about
    `limit` of them, whole batches only (the lines of a batch whose last line is not
    there yet are left)."""
    found: list[tuple[int, str, bytes]] = []
    whole = 0
    for line in log.read(after):
        if upto is not None and line.seq > upto:
            break
        try:
            head = _head.decode(line.raw)
        except msgspec.DecodeError:
            raise Corrupt(f"line {line.number} of {line.where} (seq {line.seq}) is not an "
                          "event", "run `uwf log verify`") from None
        if head.seq != line.seq:
            raise Corrupt(f"line {line.number} of {line.where} has seq {head.seq} where "
                          f"{line.seq} is due", "run `uwf log verify`")
        if head.type != CasNode.type:  # a node kept in the log: content, never published
            found.append((head.seq, head.subject, line.raw))
        if head.batch[0] >= head.batch[1]:
            whole = len(found)
            if whole >= limit:
                break
    del found[whole:]
    return found


# -- publishing --------------------------------------------------------------------------

def _wait(seconds: float, stopped: Callable[[], bool]) -> bool:
    """Sleep `seconds` unless `stopped()` says so first; whether it did."""
    deadline = time.monotonic() + seconds
    while not stopped():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, 0.05))
    return True


@dataclass
class _Bridge:
    store: Store
    to: Target
    environ: Mapping[str, str]  # the command's: the broker's password, if any, is in it
    timeout: float
    place: Place
    seq: int
    notice: Callable[[str], None]
    stopped: Callable[[], bool]

    def connect(self, *, retry: bool) -> Connection | None:
        """A connection to the broker. Without `retry`, BrokerUnavailable when it cannot
        be reached; with it, attempts again after a short wait, said once by `notice`,
        until it answers (None: stopped meanwhile)."""
        def make() -> Connection:
            return Connection(self.to.broker, self.environ, timeout=self.timeout)

        if not retry:
            try:
                return make()
            except BrokerUnavailable as exc:
                raise BrokerUnavailable(exc.what, self.next_action()) from None
        said: list[BrokerUnavailable] = []

        def first_failure(exc: BrokerUnavailable) -> None:
            said.append(exc)
            self.notice(f"{exc.what}; trying again until it answers (publishing from seq "
                        f"{self.seq + 1})")

        connection = connect_retrying(make, self.stopped, first_failure)
        if connection is not None and said:
            self.notice(f"the MQTT broker {self.to.where} answers again; publishing from "
                        f"seq {self.seq + 1}")
        return connection

    def next_action(self) -> str:
        done = f"seq {self.seq} is published, " if self.seq else ""
        return (f"start it or check --broker; {done}the next run goes on from seq "
                f"{self.seq + 1}")

    def publish(self, connection: Connection, chunk: list[tuple[int, str, bytes]]
                ) -> Bridged | None:
        """Publish `chunk` and save the last seq acknowledged in a row; what was (None:
        nothing)."""
        prefix = self.to.prefix
        acked = connection.publish_all(
            ((topic(prefix, subject), raw) for _, subject, raw in chunk), self.to.qos,
            window=WINDOW, timeout=self.timeout, stopped=self.stopped)
        if not acked:
            return None
        self.seq = chunk[acked - 1][0]
        self.place.save(self.seq)
        return Bridged(broker=self.to.where, prefix=prefix, from_=chunk[0][0], to=self.seq,
                       published=acked, state=self.place.shown)

    def chunks(self, *, follow: bool, poll: float) -> Iterator[Bridged]:
        """Publish chunk after chunk, saving the seq after each; a result per chunk. A
        connection that drops (or leaves a message unacknowledged past the timeout) is
        replaced and what it did not acknowledge is published again; without `follow`,
        one that is replaced having taken nothing is BrokerUnavailable."""
        connection = self.connect(retry=follow)
        taken = False  # whether this connection has had anything acknowledged
        said = False  # whether a connection that took nothing was said (once in a row)
        try:
            while connection is not None and not self.stopped():
                lines = ready(self.store.log, self.seq, upto=acknowledged(self.store))
                if not lines:
                    if not follow:
                        return
                    if self.store.log.wait(self.seq, poll):  # written; acknowledged soon
                        _wait(0.005, self.stopped)
                    continue
                self.store.log.sync()  # nothing is published that a crash could take back
                whole = True
                for start in range(0, len(lines), CHUNK):
                    chunk = lines[start:start + CHUNK]
                    result = self.publish(connection, chunk)
                    if result is not None:
                        taken, said = True, False
                        yield result
                    if result is None or result.published < len(chunk):
                        whole = False
                        break
                if whole or self.stopped():
                    continue
                connection.close()
                connection = None
                if not taken:
                    failed = (f"the MQTT broker {self.to.where} did not acknowledge seq "
                              f"{self.seq + 1}: the connection dropped or "
                              f"{self.timeout:g} s passed")
                    if not follow:
                        raise BrokerUnavailable(failed, self.next_action())
                    if not said:
                        self.notice(f"{failed}; trying again")
                        said = True
                connection, taken = self.connect(retry=follow), False
        finally:
            if connection is not None:
                connection.close()


def _never() -> bool:
    return False


def _bridge(store: Store, to: Target, environ: Mapping[str, str], timeout: float, *,
            notice: Callable[[str], None], stopped: Callable[[], bool]) -> _Bridge:
    place: Place
    if store.root is not None:
        place = FilePlace(state_path(store.root, to), to, store.log.durable)
    elif store.database is not None:
        place = DatabasePlace(store.database, to)
    else:
        raise UsageError("the bridge keeps its place in the store, and a store in memory "
                         "does not last", "bridge a store folder or database")
    return _Bridge(store, to, environ, timeout, place, 0, notice, stopped)


def once(store: Store, to: Target, environ: Mapping[str, str], *, timeout: float
         ) -> Bridged:
    """Publish every event after the last acknowledged seq, then stop: one result."""
    bridge = _bridge(store, to, environ, timeout, notice=lambda text: None, stopped=_never)
    with bridge.place.held():
        bridge.seq = first = bridge.place.load(store.log)
        published = 0
        for result in bridge.chunks(follow=False, poll=POLL_S):
            published += result.published
        return Bridged(broker=to.where, prefix=to.prefix,
                       from_=first + 1 if published else None, to=bridge.seq,
                       published=published, state=bridge.place.shown)


def follow(store: Store, to: Target, environ: Mapping[str, str], *, timeout: float,
           stopped: Callable[[], bool], notice: Callable[[str], None], poll: float = POLL_S
           ) -> Iterator[Bridged]:
    """Publish every event after the last acknowledged seq, then each one appended, until
    `stopped()`: a result per chunk. A broker that is down or goes away is tried again
    (said once by `notice`) and nothing it did not acknowledge is skipped."""
    bridge = _bridge(store, to, environ, timeout, notice=notice, stopped=stopped)
    with bridge.place.held():
        bridge.seq = bridge.place.load(store.log)
        yield from bridge.chunks(follow=True, poll=poll)
