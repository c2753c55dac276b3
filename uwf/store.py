"""Open a store: resolve its root, and wire the log, views and CAS together.

The composition root of the features' pure parts: every feature's event types and
projection are registered here, and every feature's service takes the `Store`.

Store root: `--store DIR` > `UWF_HOME` > `$XDG_STATE_HOME/uwf` > `~/.local/state/uwf`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from uwf.cas.backends import FileBlobs, MemoryBlobs
from uwf.cas.store import Cas
from uwf.config.env import env_number
from uwf.engine.clock import Clock, clock_from, system_clock
from uwf.engine.events import EventCatalog
from uwf.engine.filelog import DEFAULT_SEGMENT_BYTES, FileLog
from uwf.engine.journal import Journal, Progress, Views
from uwf.engine.log import EventLog, MemoryLog
from uwf.engine.projection import StructProjection
from uwf.engine.storeview import StoreProjection
from uwf.engine.viewstore import MemoryViewStore, SqliteViewStore, ViewStore
from uwf.errors import UsageError
from uwf.queue.events import QUEUE_EVENTS
from uwf.queue.projection import QueueProjection, SchedProjection
from uwf.redact import Redact
from uwf.runs.events import RUN_EVENTS
from uwf.runs.projection import RunsProjection
from uwf.threads.events import THREAD_EVENTS
from uwf.threads.projection import ThreadsProjection
from uwf.threads.steps import StepsProjection
from uwf.workflows.events import WORKFLOW_EVENTS
from uwf.workflows.projection import WorkflowsProjection


def all_projections() -> list[StructProjection]:
    """Every view uwf maintains, in a fixed order."""
    return [StoreProjection(), WorkflowsProjection(), ThreadsProjection(), RunsProjection(),
            StepsProjection(), QueueProjection(), SchedProjection()]


def event_catalog() -> EventCatalog:
    """The core event types plus every feature's, registered explicitly."""
    return EventCatalog(WORKFLOW_EVENTS, THREAD_EVENTS, RUN_EVENTS, QUEUE_EVENTS)


def resolve_root(explicit: str | None = None) -> Path:
    """Where the store lives, by the precedence above."""
    if explicit:
        return Path(explicit).expanduser()
    if home := os.environ.get("UWF_HOME"):
        return Path(home).expanduser()
    if state := os.environ.get("XDG_STATE_HOME"):
        return Path(state).expanduser() / "uwf"
    return Path.home() / ".local" / "state" / "uwf"


def durability_from_env() -> bool:
    """`UWF_DURABILITY=none` skips fsync (bulk loads, tests); default is fsync."""
    mode = os.environ.get("UWF_DURABILITY", "fsync")
    if mode not in ("fsync", "none"):
        raise UsageError(f"UWF_DURABILITY must be fsync or none, not {mode!r}", "fix or unset it")
    return mode == "fsync"


@dataclass
class Store:
    """A store's parts: the event log, its views (via the journal) and the CAS."""

    root: Path | None
    journal: Journal
    cas: Cas
    # Shown while absent views are rebuilt by a read (the CLI sets a terminal bar).
    progress: Progress | None = None
    # The fixed time (`--now` / `UWF_NOW`) agents are given, so they agree with uwf.
    now: str | None = None
    redact: Redact | None = None

    @property
    def log(self) -> EventLog:
        return self.journal.log

    @property
    def views(self) -> ViewStore:
        return self.journal.views

    @property
    def durability(self) -> str:
        return "fsync" if self.log.durable else "none"

    @property
    def clock(self) -> Clock:
        return self.journal.clock

    @classmethod
    def open(cls, root: str | Path | None = None, *, now: str | None = None,
             clock: Clock | None = None, redact: Redact | None = None) -> Store:
        """The embedded default: file log, SQLite views, file CAS, in one folder.

        `now` (`--now`) fixes the clock, else `UWF_NOW`, else the wall clock (`clock`
        overrides all three). `redact` hides secrets from the log and the CAS.
        """
        clock = clock or clock_from(now, os.environ)
        now = now or os.environ.get("UWF_NOW") or None
        path = resolve_root(str(root) if root is not None else None)
        if path.exists() and not path.is_dir():
            raise UsageError(f"the store root {path} is not a folder",
                             "give a folder with --store or UWF_HOME")
        durable = durability_from_env()
        log = FileLog(
            path / "events", path / "lock",
            segment_bytes=int(env_number("UWF_SEGMENT_BYTES", DEFAULT_SEGMENT_BYTES,
                                         integer=True, positive=True)),
            durable=durable,
            lock_timeout=env_number("UWF_LOCK_TIMEOUT", 10.0),
        )
        projections = all_projections()
        views = SqliteViewStore(path / "views" / "views.sqlite3",
                                [projection.spec() for projection in projections])
        journal = Journal(log, views, projections, event_catalog(), clock=clock, redact=redact)
        cas = Cas(FileBlobs(path / "cas", durable), clock=clock, redact=redact)
        cas.refuse_old_bootstrap(path)
        return cls(path, journal, cas, now=now, redact=redact)

    @classmethod
    def memory(cls, *, clock: Clock = system_clock, redact: Redact | None = None) -> Store:
        """The in-memory twin of every part, for tests and embedding."""
        projections = all_projections()
        views = MemoryViewStore([projection.spec() for projection in projections])
        journal = Journal(MemoryLog(), views, projections, event_catalog(), clock=clock,
                          redact=redact)
        return cls(None, journal, Cas(MemoryBlobs(), clock=clock, redact=redact), redact=redact)

    def read(self, progress: Progress | None = None) -> Views:
        """The views, caught up with the log (absent ones built first)."""
        head = self.journal.refresh(progress or self.progress)
        return self.journal.reader(head)

    def close(self) -> None:
        self.views.close()
        close = getattr(self.log, "close", None)
        if close is not None:
            close()
