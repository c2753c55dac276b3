"""Open a store: wire the log, views and CAS together, with the features and settings
it runs under.

Below the features: it names none. The features it holds are values it is given
(`features`: each feature's events, views, verify check and upcasters, listed once at
the top in `uwf/features.py`); every feature's service takes the `Store`. The store
carries the `Settings` its entry point resolved (`store.settings`: the
environment agents get, the working folder, the config path, the lock timeout),
so a service reaches them without reading the process's own.

Store root: `--store DIR` > `UWF_HOME` > `$XDG_STATE_HOME/uwf` > `~/.local/state/uwf`
(resolved in `uwf.config.settings`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from uwf.cas.backends import FileBlobs, MemoryBlobs
from uwf.cas.records import LoggedBlobs
from uwf.cas.store import Cas
from uwf.config.settings import Settings, process_settings, store_root
from uwf.engine.dburl import is_database_url
from uwf.engine.events import EventCatalog

if TYPE_CHECKING:
    from uwf.engine.pgdb import PgDatabase
from uwf.engine.clock import Clock, system_clock
from uwf.engine.feature import Feature, catalog_of, valid, views_of
from uwf.engine.filelog import FileLog
from uwf.engine.fold import Progress
from uwf.engine.held import HOLD_WRITES
from uwf.engine.journal import Journal, Views
from uwf.engine.log import EventLog, MemoryLog
from uwf.engine.nodeview import NodeRecords, NodesProjection
from uwf.engine.projection import StructProjection
from uwf.engine.snapshot import SqliteSnapshots
from uwf.engine.storeview import StoreProjection
from uwf.engine.viewspec import ViewStore
from uwf.engine.viewstore import SqliteViewStore
from uwf.engine.writerlink import WriterLink
from uwf.errors import UsageError, UwfError
from uwf.redact import Redact


def default_features() -> tuple[Feature, ...]:
    """The features uwf's entry points list (`uwf.features.FEATURES`), for a library
    caller that opens a store without naming its own: the one place the store reaches
    up to the composition root, when it is given no list (tests/e2e/test_layers.py)."""
    from uwf.features import FEATURES

    return FEATURES


def all_projections(features: Sequence[Feature] | None = None) -> list[StructProjection]:
    """Every view a store of `features` (by default uwf's) maintains, in a fixed order:
    the store's own, each feature's, the CAS nodes'."""
    listed = default_features() if features is None else features
    return [StoreProjection(), *views_of(listed), NodesProjection()]


def event_catalog(features: Sequence[Feature] | None = None) -> EventCatalog:
    """The core event types plus those of `features` (by default uwf's), and their
    upcasters."""
    return catalog_of(default_features() if features is None else features)


class Store(msgspec.Struct):
    """A store's parts: the event log, its views (via the journal) and the CAS."""

    root: Path | None
    journal: Journal
    cas: Cas
    # Shown while absent views are rebuilt by a read (the CLI sets a terminal bar).
    progress: Progress | None = None
    # Told (steps taken, at most how many or 0) after each step of a long command
    # (`thread run`): an MCP server turns it into progress notifications.
    steps: Progress | None = None
    # The fixed time (`--now` / `UWF_NOW`) agents are given, so they agree with uwf.
    now: str | None = None
    redact: Redact | None = None
    # What the entry point resolved from its environment, working folder and argv.
    settings: Settings = msgspec.field(default_factory=process_settings)
    # The PostgreSQL database the parts share, closed with the store (None: a folder).
    database: PgDatabase | None = None
    # The features whose events, views, checks and upcasters the parts were wired with.
    features: tuple[Feature, ...] = msgspec.field(default_factory=default_features)
    # The store's resident writer, if one answers (`uwf writer`: uwf/writer/): None for a
    # store whose commands it cannot decide as this process would (a fixed clock, a
    # redactor, features of its own, a database) and inside the writer itself.
    writer: WriterLink | None = None

    @property
    def log(self) -> EventLog:
        return self.journal.log

    @property
    def views(self) -> ViewStore:
        """The view store, holding every write this process made (the writes' held fold
        committed first: uwf/engine/held.py)."""
        self.journal.flush()
        return self.journal.views

    @property
    def location(self) -> str:
        """Where the store is, as it may be printed: its folder, its database's URL
        without the password, or `:memory:`."""
        if self.settings.store_url is not None and self.database is not None:
            from uwf.engine.dburl import shown

            return shown(self.settings.store_url)
        return str(self.root) if self.root is not None else ":memory:"

    @property
    def durability(self) -> str:
        return "fsync" if self.log.durable else "none"

    @property
    def clock(self) -> Clock:
        return self.journal.clock

    @classmethod
    def open(cls, root: str | Path | None = None, *, settings: Settings | None = None,
             now: str | None = None, clock: Clock | None = None,
             redact: Redact | None = None, features: Sequence[Feature] | None = None
             ) -> Store:
        """The embedded default: file log, SQLite views, file CAS, in one folder.

        `features` are the features the store holds, as the entry point listed them
        (`uwf.features.FEATURES`, or a library's own list); without them, uwf's.

        `settings` are what an entry point resolved (root, `--now`, UWF_*); without
        them, this process's are used (`process_settings(root, now)`): a convenience
        for tests, benchmarks and embedding. With `settings`, a `root` overrides
        their store root and `now` must be in them. The clock is `settings.clock`
        (`--now`, else `UWF_NOW`, else the wall clock) unless `clock` is given.
        `redact` hides secrets from the log and the CAS.
        """
        if settings is None:
            settings = process_settings(root, now)
        elif now is not None:
            raise ValueError("give --now in the settings (Settings.from_env(now=...))")
        elif root is not None and is_database_url(str(root)):
            settings = msgspec.structs.replace(settings, store_url=str(root))
        elif root is not None:
            settings = msgspec.structs.replace(
                settings, store_root=store_root(str(root), settings.environ), store_url=None)
        clock = clock or settings.clock
        listed = valid(default_features() if features is None else features)
        if settings.store_url is not None:
            return cls._on_server(settings, clock, redact, listed)
        path = settings.store_root
        if path.exists() and not path.is_dir():
            raise UsageError(f"the store root {path} is not a folder",
                             "give a folder with --store or UWF_HOME")
        log = FileLog(path / "events", path / "lock", segment_bytes=settings.segment_bytes,
                      durable=settings.durable, lock_timeout=settings.lock_timeout)
        projections = all_projections(listed)
        specs = [projection.spec() for projection in projections]
        views = SqliteViewStore(path / "views" / "views.sqlite3", specs)
        snapshots = SqliteSnapshots(views.path, specs, durable=settings.durable)
        journal = Journal(log, views, projections, catalog_of(listed), clock=clock,
                          redact=redact, snapshots=snapshots, hold_writes=HOLD_WRITES)
        loose = FileBlobs(path / "cas", settings.durable, wall=system_clock)
        Cas(loose, clock=clock).refuse_old_bootstrap(path)  # a loose file, if any
        cas = Cas(LoggedBlobs(loose, NodeRecords(journal)), clock=clock, redact=redact)
        served = (clock is system_clock and redact is None
                  and (features is None or listed == default_features()))
        return cls(path, journal, cas, now=settings.now, redact=redact, settings=settings,
                   features=listed, writer=WriterLink(path) if served else None)

    @classmethod
    def _on_server(cls, settings: Settings, clock: Clock, redact: Redact | None,
                   features: tuple[Feature, ...]) -> Store:
        """A store in a PostgreSQL database (docs/hosts.md): its log, views and CAS on one
        `PgDatabase`, so a writer's section is one transaction."""
        from uwf.engine.pgdb import PgDatabase

        assert settings.store_url is not None
        # First: without the driver this is the error that names the extra.
        database = PgDatabase(settings.store_url, lock_timeout=settings.lock_timeout)
        try:
            from uwf.cas.pgblobs import PgBlobs
            from uwf.engine.pglog import PgLog
            from uwf.engine.pgviews import PgViewStore

            projections = all_projections(features)
            from uwf.engine.pgwrite import OneCall

            overlays = {view: overlay for feature in features if feature.overlays
                        for view, overlay in feature.overlays().items()}
            views = PgViewStore(database, [projection.spec() for projection in projections],
                                overlays)
            log = PgLog(database, durable=settings.durable)
            journal = Journal(log, views, projections, catalog_of(features), clock=clock,
                              redact=redact, first=OneCall(log, views))
            cas = Cas(LoggedBlobs(PgBlobs(database), NodeRecords(journal)), clock=clock,
                      redact=redact)
        except BaseException:
            database.close()
            raise
        return cls(None, journal, cas, now=settings.now, redact=redact, settings=settings,
                   database=database, features=features)

    @classmethod
    def memory(cls, *, clock: Clock = system_clock, redact: Redact | None = None,
               settings: Settings | None = None, features: Sequence[Feature] | None = None
               ) -> Store:
        """The in-memory twin of every part, for tests and embedding. `settings` (default:
        this process's) give its services their environment, working folder and config;
        the clock is `clock`, never theirs; `features` as for `open`."""
        from uwf.engine.memviews import MemoryViewStore  # a folder's store uses none of it

        listed = valid(default_features() if features is None else features)
        projections = all_projections(listed)
        views = MemoryViewStore([projection.spec() for projection in projections])
        journal = Journal(MemoryLog(), views, projections, catalog_of(listed), clock=clock,
                          redact=redact)
        # Nodes' ages (gc's grace) by the wall clock, whatever `clock` is.
        cas = Cas(LoggedBlobs(MemoryBlobs(wall=system_clock), NodeRecords(journal)),
                  clock=clock, redact=redact)
        return cls(None, journal, cas, redact=redact,
                   settings=settings if settings is not None else process_settings(),
                   features=listed)

    def read(self, progress: Progress | None = None) -> Views:
        """The views, caught up with the log (absent ones built first)."""
        head = self.journal.refresh(progress or self.progress)
        return self.journal.reader(head)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        with contextlib.suppress(UwfError):
            self.journal.flush()  # the fold its last writes hold (uwf/engine/held.py)
        self.journal.views.close()
        close = getattr(self.log, "close", None)
        if close is not None:
            close()
        if self.database is not None:
            self.database.close()
