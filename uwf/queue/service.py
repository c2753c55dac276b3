"""`uwf queue add|list|show|drain|status|cancel|logs`: the durable queue (SPEC §8).

An entry is a row of the `queue` view, folded from `queue.*` events; every
selection is an indexed query in queue order (priority, enqueuedAt, id), so a
page, a drain or a pick costs what it returns however long the queue is. What
leases an entry (`queue pick`, `sched ...`) is the scheduler's: `uwf.queue.sched`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import msgspec

from uwf.config.args import TimeoutSec
from uwf.config.inputfile import (
    LIMITS_DOC,
    MAX_BATCH_BYTES,
    MAX_BATCH_ENTRIES,
    MAX_BATCH_LINE_BYTES,
    read_lines,
    shown,
)
from uwf.config.repo import find_repo
from uwf.config.settings import Settings
from uwf.engine.clock import format_ts
from uwf.engine.events import NewEvent, to_builtins
from uwf.engine.gcpause import paused
from uwf.engine.journal import Journal, Outcome, Views
from uwf.engine.ulids import new_ulids
from uwf.engine.viewspec import Query
from uwf.errors import NotFound, UsageError, UwfError
from uwf.ids import check_ulid
from uwf.queue import decide as decider
from uwf.queue.batch import speller
from uwf.queue.events import QueueAdded
from uwf.queue.projection import (
    DEFAULT_IDLE_TIMEOUT_SEC,
    DEFAULT_PRIORITY,
    DEFAULT_TIMEOUT_SEC,
    QUEUE_ORDER,
    QueueEntry,
    QueueProjection,
)
from uwf.queue.results import (
    BatchAdded,
    BrokerShown,
    Drained,
    EntryAdded,
    EntryLease,
    EntryPage,
    EntryRecord,
    Timeline,
    TimelineEvent,
    TimelineLength,
    Timelines,
)
from uwf.queue.terms import ALIASES, JOB_WORDS, STATUSES, Priority
from uwf.store import Store
from uwf.threads.service import check_thread_id
from uwf.workflows.service import resolve_workflow

Label = Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, as editors write it


class EntrySpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                rename="camel"):
    """What `queue add` takes: its flags, or one line of a `--batch` file (camelCase)."""

    workflow: Label | None = None
    prompt: str | None = None
    run: str | None = None
    repo: str | None = None
    priority: Priority = DEFAULT_PRIORITY
    note: str = ""
    session: Label | None = None
    agent: Label | None = None
    timeout_sec: TimeoutSec = DEFAULT_TIMEOUT_SEC
    idle_timeout_sec: TimeoutSec = DEFAULT_IDLE_TIMEOUT_SEC
    expected_artifacts: list[str] = []  # msgspec copies mutable defaults
    key: Label | None = None
    broker: Label | None = None  # mqtt://[user@]host[:port]
    broker_password_env: Label | None = None
    topic_prefix: Label | None = None


def entry_spec(values: dict[str, Any]) -> EntrySpec:
    """An EntrySpec from camelCase values, its bounds checked (a usage error naming the
    value otherwise)."""
    try:
        return msgspec.convert(values, EntrySpec)
    except msgspec.ValidationError as exc:
        raise UsageError(f"invalid entry: {exc}", "see `uwf queue add -h`") from None


def check_entry_id(entry_id: str) -> None:
    """Refuse what cannot be an entry id before looking it up (a usage error, exit 2)."""
    check_ulid(entry_id, "a queue entry id", "copy the id from `uwf queue list`")


def get_entry(views: Views, entry_id: str) -> QueueEntry:
    check_entry_id(entry_id)
    entry: QueueEntry | None = views.get("queue", entry_id)
    if entry is None:
        raise NotFound(f"no queue entry {entry_id}", "list them with `uwf queue list`")
    return entry


def canonical_status(word: str) -> str:
    """A status word, or the job registry's alias for one (pending, running...)."""
    if word in STATUSES:
        return word
    if word in ALIASES:
        return ALIASES[word]
    raise UsageError(f"unknown status {word!r}",
                     f"give one of {', '.join(STATUSES)} (or {', '.join(ALIASES)})")


def ms_ts(ms: int | None) -> str | None:
    return None if ms is None else format_ts(ms)


def record(entry: QueueEntry) -> EntryRecord:
    """An entry as SPEC §8 lists its fields (plus the job registry's status word)."""
    lease = entry.lease
    return EntryRecord(
        id=entry.id, status=entry.status, job_status=JOB_WORDS[entry.status],
        priority=entry.priority, enqueued_at=entry.enqueued_at, updated_at=entry.updated_at,
        workflow=entry.workflow, workflow_hash=entry.workflow_hash, prompt=entry.prompt,
        run=entry.run, repo=entry.repo, session=entry.session, agent=entry.agent,
        timeout_sec=entry.timeout_sec, idle_timeout_sec=entry.idle_timeout_sec,
        expected_artifacts=entry.expected_artifacts, note=entry.note, key=entry.key,
        attempts=entry.attempts,
        lease=None if lease is None else EntryLease(
            id=lease.id, expires_at=format_ts(lease.expires_at_ms), attempt=lease.attempt,
            session=lease.session),
        next_eligible_at=ms_ts(entry.next_eligible_at_ms), parked_reason=entry.parked_reason,
        **_messaging(entry))


def _messaging(entry: QueueEntry) -> dict[str, Any]:
    """A job over MQTT's fields of its record (none for an entry without a broker)."""
    broker = entry.broker
    if broker is None:
        return {}
    return {"broker": BrokerShown(host=broker.host, port=broker.port, tls=broker.tls,
                                  username=broker.username, password_env=broker.password_env),
            "topic_prefix": entry.topic.removesuffix("/events"),
            "auth_token": entry.auth_token, "last_seq": entry.last_seq,
            "received_seq": entry.received_seq, "undelivered": entry.undelivered}


# -- add ---------------------------------------------------------------------------

class _Resolver:
    """Turns specs into `queue.added` data, resolving each workflow once; a repo path
    with `settings` (the command's: its working folder and HOME)."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.views = store.read()
        self.workflows: dict[str, tuple[str, str]] = {}
        self.repos: dict[str | None, str] = {}

    def added(self, spec: EntrySpec, *, nul: bool = True) -> QueueAdded:
        """`queue.added`'s data for `spec`; `nul=False`: the caller saw no NUL in it."""
        if nul:
            _refuse_nul(spec)
        if (spec.workflow is None) == (spec.run is None):
            raise UsageError("an entry names a workflow (with a prompt) or a run, not both "
                             "and not neither", "give --workflow NAME --prompt TEXT, or "
                             "--run ID")
        workflow = workflow_hash = None
        if spec.workflow is not None:
            prompt = spec.prompt
            if not prompt or prompt.isspace():  # (not a copy of it stripped)
                raise UsageError("the prompt is empty", "give the task with --prompt")
            workflow, workflow_hash = self._workflow(spec.workflow)
            repo = self.repos.get(spec.repo) or self._repo(spec.repo)
        else:
            assert spec.run is not None
            if spec.prompt is not None:
                raise UsageError("--prompt goes with --workflow; a run has its prompt",
                                 "leave out --prompt")
            check_thread_id(spec.run)
            run = self.views.get("runs", spec.run)
            if run is None:
                raise NotFound(f"no run {spec.run}", "find runs with `uwf run search`")
            repo = self._repo(spec.repo) if spec.repo else run.thread.repo
        # In QueueAdded's order (a batch makes 50,000: by position, a third less time).
        fields = (repo, spec.priority, workflow, workflow_hash, spec.prompt, spec.run,
                  spec.session, spec.agent, spec.timeout_sec, spec.idle_timeout_sec,
                  list(spec.expected_artifacts), spec.note, spec.key)
        if spec.broker is spec.broker_password_env is spec.topic_prefix is None:
            return QueueAdded(*fields)
        return QueueAdded(*fields, **_job_fields(spec))

    def _repo(self, path: str | None) -> str:
        """The git top level of `path` (else of the working folder); a folder that does
        not exist is refused, not recorded as a repo nobody can work in."""
        found = self.repos.get(path)
        if found is None and path:
            try:
                exists = self.settings.path(path).is_dir()
            except (OSError, ValueError):
                exists = True  # find_repo names what is wrong with such a path
            if not exists:
                shown = path if len(path) <= 60 else path[:57] + "..."
                raise UsageError(f"repo folder {shown!r} does not exist",
                                 "give the folder of an existing repo with --repo")
        if found is None:
            found = self.repos[path] = find_repo(path, self.settings)
        return found

    def _workflow(self, ref: str) -> tuple[str, str]:
        found = self.workflows.get(ref)
        if found is None:
            workflow_hash, payload = resolve_workflow(self.store.cas, self.views, ref)
            found = self.workflows[ref] = (str(payload["name"]), workflow_hash)
        return found


def _refuse_nul(spec: EntrySpec) -> None:
    """A NUL character in an entry's text is refused, on every store: PostgreSQL keeps
    no NUL in text, so such an entry could be added there but never leased (and a
    folder store's entry could not be copied there)."""
    for name, field in zip(spec.__struct_encode_fields__, spec.__struct_fields__,
                           strict=True):
        value = getattr(spec, field)
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(text, str) and "\x00" in text for text in texts):
            raise UsageError(f"{name} holds a NUL character (\\u0000), which uwf does "
                             "not keep in text", "remove it; nothing was added")


def _job_fields(spec: EntrySpec) -> dict[str, Any]:
    """`queue.added`'s broker, topic prefix and a new token, for a job over MQTT."""
    if spec.broker is None:
        if spec.broker_password_env is not None or spec.topic_prefix is not None:
            raise UsageError("--broker-password-env and --topic-prefix go with --broker",
                             "give the broker with --broker mqtt://HOST:PORT")
        return {}
    import secrets

    from uwf.queue.broker import check_topic_prefix, parse_broker

    broker = parse_broker(spec.broker, spec.broker_password_env)
    if broker.password_env is not None and broker.username is None:
        raise UsageError("--broker-password-env needs a user in the URL",
                         "give mqtt://USER@HOST:PORT")
    found: dict[str, Any] = {"broker": broker, "auth_token": secrets.token_urlsafe(32)}
    if spec.topic_prefix is not None:
        found["topic_prefix"] = check_topic_prefix(spec.topic_prefix)
    return found


def add(store: Store, spec: EntrySpec, settings: Settings) -> EntryAdded:
    """Queue one entry; with a `key` matching a live entry, that entry instead. Its repo
    path is resolved with `settings` (the command's)."""
    data = _Resolver(store, settings).added(spec)
    ids, added = _write_added(store, [data])
    entry = get_entry(store.read(), ids[0])
    return EntryAdded(added=bool(added), entry=record(entry))


def add_batch(store: Store, path: str | Path, settings: Settings) -> BatchAdded:
    """Queue every line of a JSON-lines file (resolved at the edge, or `-`: stdin) in
    one write (one lock, one fsync): all or nothing, and a bad line rejects the batch,
    naming its number. The file is read whole, its lines each at most
    MAX_BATCH_LINE_BYTES, the whole at most MAX_BATCH_BYTES and MAX_BATCH_ENTRIES
    entries (docs/queue.md); it may start with a byte-order mark. Its lines and rows are
    spelled in one pass (uwf/queue/batch.py). Its lines' repo paths are resolved with
    `settings` (the command's)."""
    with paused():  # a batch's many objects hold no cycles
        return _add_batch(store, path, settings)


def _add_batch(store: Store, path: str | Path, settings: Settings) -> BatchAdded:
    resolver = _Resolver(store, settings)
    specs: list[QueueAdded] = []
    decode = msgspec.json.Decoder(EntrySpec).decode
    name = shown(str(path))
    lines = read_lines(path, MAX_BATCH_LINE_BYTES, MAX_BATCH_BYTES, stdin=True)
    if lines:
        lines[0] = lines[0].removeprefix(_BOM)
    nul = any(b"\\u0000" in line for line in lines)  # else no entry is checked for one
    added = resolver.added
    for number, line in enumerate(lines, 1):
        if not line or line.isspace():
            continue
        if len(specs) == MAX_BATCH_ENTRIES:
            raise UsageError(f"{name} line {number}: more than "
                             f"{MAX_BATCH_ENTRIES:,} entries in one batch",
                             f"split it into several batches; nothing was added; "
                             f"{LIMITS_DOC}")
        try:
            spec = decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{name} line {number}: {exc}",
                             "fix that line; nothing was added") from None
        try:
            specs.append(added(spec, nul=nul))
        except UwfError as exc:
            raise type(exc)(f"{name} line {number}: {exc.what}",
                            "fix that line; nothing was added") from None
    if not specs:
        raise UsageError(f"{name} holds no entries", "give one JSON object per line")
    del lines  # the file's lines, before the write (its peak 159 MiB, not 167, at 50,000)
    ids, count = _write_added(store, specs)
    return BatchAdded(count=len(ids), added=count, existing=len(ids) - count, ids=ids)


def _write_added(store: Store, entries: Sequence[QueueAdded]) -> tuple[list[str], int]:
    """Append the entries not already live under their key; (every entry's id, how many
    were added)."""

    def decide(views: Views) -> Outcome[tuple[list[str], int]]:
        # Increasing: entries one command adds keep their order (the queue's last
        # tie-break is the id).
        minted = new_ulids(store.clock(), len(entries))
        if all(data.key is None for data in entries):  # each is new: one id each
            return _added(views, minted, [NewEvent(f"queue/{entry_id}", data) for
                                          entry_id, data in zip(minted, entries, strict=True)])
        fresh = iter(minted)
        keyed: dict[str, str] = {}
        ids: list[str] = []
        events: list[NewEvent] = []
        for data in entries:
            existing = None
            if data.key is not None:
                existing = keyed.get(data.key) or _live_with_key(views, data.key)
            if existing is not None:
                ids.append(existing)
                continue
            entry_id = next(fresh)
            if data.key is not None:
                keyed[data.key] = entry_id
            ids.append(entry_id)
            events.append(NewEvent(f"queue/{entry_id}", data))
        return _added(views, ids, events)

    def _added(views: Views, ids: list[str], events: list[NewEvent]
               ) -> Outcome[tuple[list[str], int]]:
        spell = speller(store.journal, events)
        if spell is None:  # the journal folds them: ids minted just now, nothing to read
            views.absent("queue", (event.subject[6:] for event in events))
        return Outcome(events, (ids, len(events)), spell=spell)

    return store.journal.write(decide)


def _live_with_key(views: Views, key: str) -> str | None:
    found = views.query(Query("queue", (("live_key", "=", key),), limit=1))
    return found[0].id if found else None


# -- reads -------------------------------------------------------------------------

def where_terms(status: str | None = None, repo: str | None = None,
                session: str | None = None) -> list[tuple[str, str, Any]]:
    """The filters of a listing; `repo` is a repo's top level, resolved at the edge
    (`commands.repo_of`)."""
    where: list[tuple[str, str, Any]] = []
    if status is not None:
        where.append(("status", "=", canonical_status(status)))
    if repo is not None:
        where.append(("repo", "=", repo))
    if session is not None:
        where.append(("session", "=", session))
    return where


def list_entries(views: Views, status: str | None = None, repo: str | None = None,
                 session: str | None = None, *, limit: int | None = None, offset: int = 0
                 ) -> EntryPage:
    """Entries in queue order, filtered; `total` is how many the filters select."""
    query = Query("queue", tuple(where_terms(status, repo, session)), None,
                  QUEUE_ORDER, limit, offset)
    entries = [record(entry) for entry in views.query(query)]
    return EntryPage(total=views.count(query), limit=limit, offset=offset, entries=entries)


def show(views: Views, entry_id: str) -> EntryRecord:
    return record(get_entry(views, entry_id))


# -- writes without a lease ------------------------------------------------------------

def drain(store: Store, limit: int | None = None, repo: str | None = None) -> Drained:
    """Mark the next ready entries drained and return them: no policy (the host runs
    them); entries waiting out a backoff are ready too."""
    where = tuple(where_terms("ready", repo))

    def decide(views: Views) -> Outcome[list[QueueEntry]]:
        chosen = decider.drain(views.query(Query("queue", where, None, QUEUE_ORDER, limit)))
        return Outcome([NewEvent(f"queue/{entry.id}", data) for entry, data in chosen],
                       [entry for entry, _ in chosen])

    chosen = store.journal.write(decide)
    views = store.read()
    drained = [record(get_entry(views, entry.id)) for entry in chosen]
    return Drained(count=len(drained), drained=drained)


def missing_artifacts(entry: QueueEntry) -> list[str]:
    """The entry's expectedArtifacts that are not in its repo (a relative path is taken
    from the repo's top level), in the order they were given."""
    missing = []
    for name in entry.expected_artifacts:
        try:
            found = (Path(entry.repo) / name).exists()
        except (OSError, ValueError):  # a name the file system cannot hold
            found = False
        if not found:
            missing.append(name)
    return missing


def artifact_failure(entry: QueueEntry) -> str | None:
    """Why the entry's work is not done although its run ended: the first expected
    artifact missing from its repo (None: all there, or none expected)."""
    missing = missing_artifacts(entry)
    if not missing:
        return None
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    return f"expected artifact {missing[0]!r} is missing from {entry.repo}{more}"


def cancel(store: Store, entry_id: str, reason: str = "") -> EntryRecord:
    """The entry will never run; a live lease on it is void (its holder's complete is
    then refused)."""

    def decide(views: Views) -> Outcome[None]:
        data = decider.cancel(get_entry(views, entry_id), reason)
        return Outcome([NewEvent(f"queue/{entry_id}", data)])

    store.journal.write(decide)
    return show(store.read(), entry_id)


# -- logs ------------------------------------------------------------------------------

_TIMELINE_NAMES = {"queue.added": "registered", "queue.status_set": "status_changed"}


def logs(store: Store, entry_id: str, tail: int | None = None) -> Timeline:
    """The entry's timeline from the log (registered, status changes, leases, attempts),
    oldest first; `tail` keeps the last N. Read through the stream index, so it costs the
    entry's events, not the log written since the entry was added."""
    entry = get_entry(store.read(), entry_id)
    events = list(_subject_events(store.journal, f"queue/{entry_id}"))
    projection = QueueProjection()
    state: QueueEntry | None = None
    timeline: list[TimelineEvent] = []
    for envelope in events:
        before = None if state is None else state.status
        state = projection.apply(state, envelope)
        timeline.append(TimelineEvent(
            seq=envelope.seq, ts=envelope.ts,
            event=_TIMELINE_NAMES.get(envelope.type, envelope.type.partition(".")[2]),
            type=envelope.type, from_=before, to=None if state is None else state.status,
            data=to_builtins(envelope.data)))
    if tail is not None:
        timeline = timeline[len(timeline) - tail:] if tail else []
    return Timeline(id=entry_id, status=entry.status, events=timeline)


def _subject_events(journal: Journal, subject: str) -> Iterator[Any]:
    """The entry's events from its `queue.added` on, oldest first: read newest first
    through the stream index (`Journal.read_subject`) down to that `queue.added`."""
    found = []
    for envelope in journal.read_subject(subject, reverse=True):
        found.append(envelope)
        if envelope.type == QueueAdded.type:
            break
    return reversed(found)


def logs_list(views: Views) -> Timelines:
    """Every entry with its live status and the length of its timeline, in queue order."""
    entries = [TimelineLength(id=entry.id, status=entry.status,
                              job_status=JOB_WORDS[entry.status], events=entry.events,
                              enqueued_at=entry.enqueued_at, updated_at=entry.updated_at)
               for entry in views.query(Query("queue", order=QUEUE_ORDER))]
    return Timelines(count=len(entries), entries=entries)
