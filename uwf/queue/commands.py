"""The arguments of `uwf queue ...` and `uwf sched ...` and the operations every surface
calls (docs/queue.md).

Cheap to import (msgspec, the argument base and the queue's words): the services load
when an operation runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import msgspec

from uwf.config.args import Args, Count, NonNegative, Seconds, TimeoutSec, arg
from uwf.ids import ULID_PREFIX_PATTERN
from uwf.payload import Plain
from uwf.queue.terms import Priority
from uwf.queue.terms import StatusWord as Status

if TYPE_CHECKING:
    from uwf.queue.results import (
        BatchAdded,
        Drained,
        EntryAdded,
        EntryCounts,
        EntryPage,
        EntryRecord,
        Leased,
        Planned,
        PolicyShown,
        Published,
        Reclaimed,
        Timeline,
        Timelines,
    )
    from uwf.store import Store

EntryId = Annotated[str, msgspec.Meta(pattern=ULID_PREFIX_PATTERN),
                    arg("queue entry id (a ULID, in any case, or its first characters)",
                        positional=True, metavar="ID", ids="queue",
                        expect="a queue entry id (a ULID, as `uwf queue list` prints it)")]
LeaseId = Annotated[str, msgspec.Meta(pattern=ULID_PREFIX_PATTERN),
                    arg("the lease id `uwf sched lease` gave (or its first characters)",
                        metavar="LEASE", ids="lease",
                        expect="a lease id (a ULID, as `uwf sched lease` prints it)")]
Page = NonNegative  # at most SQLite's INTEGER
STATUS_HELP = ("ready, leased, drained, parked or cancelled; or the job registry's pending, "
               "running, completed, error")


class QueueAdd(Args, frozen=True, kw_only=True):
    workflow: Annotated[str | None, arg("a registered workflow (name or hash) to start a "
                                        "run of", alias="--app", metavar="NAME|HASH")] = None
    prompt: Annotated[str | None, arg("with --workflow: the task, the run's prompt",
                                      short="-p")] = None
    run: Annotated[str | None, arg("instead of --workflow: an existing run to continue",
                                   alias="--runId", metavar="RUN", ids="runs")] = None
    repo: Annotated[str | None, arg("repo the entry belongs to (default: the run's, or the "
                                    "git top level of the working directory)",
                                    metavar="PATH")] = None
    priority: Annotated[Priority, arg("lower runs first (default 100)", metavar="N")] = 100
    note: Annotated[str | None, arg("a note kept with the entry")] = None
    session: Annotated[str | None, arg("the agent-session label that may take it "
                                       "(`queue pick --session`)", metavar="LABEL")] = None
    agent: Annotated[str | None, arg("the agent to run it with")] = None
    timeout: Annotated[TimeoutSec, arg("seconds the whole entry may run (default 3600)",
                                       metavar="SEC")] = 3600
    idle_timeout: Annotated[TimeoutSec, arg("seconds it may go without progress (default "
                                            "120)", metavar="SEC")] = 120
    artifact: Annotated[list[str] | None, arg("a file the work must leave (repeatable)",
                                              metavar="PATH")] = None
    key: Annotated[str | None, arg("idempotency key: while an entry with this key is live, "
                                   "return it instead of adding another")] = None
    broker: Annotated[str | None, arg("publish the job's events through this MQTT broker "
                                      "(mqtt://[USER@]HOST[:PORT], mqtts:// for TLS); a "
                                      "token is made for it", metavar="URL")] = None
    broker_password_env: Annotated[str | None, arg(
        "with --broker USER@...: the environment variable holding the broker's password "
        "(the password itself is never recorded)", metavar="VAR")] = None
    topic_prefix: Annotated[str | None, arg("with --broker: where the job's events go, "
                                            "<PREFIX>/events (default uwf/jobs/<id>)",
                                            metavar="PREFIX")] = None
    batch: Annotated[str | None, arg("add every line of a JSON-lines file (or - for stdin) "
                                     "in one write, all or nothing", metavar="FILE")] = None
    quiet: Annotated[bool, arg("print only the entry's id (with --batch: one id a line), "
                               "for ID=$(uwf queue add ...)", alias="--id-only")] = False


class QueuePublish(Args, frozen=True, kw_only=True):
    id: EntryId
    event: Annotated[str | None, arg("the event, a JSON value (an object such as "
                                     '\'{"type":"progress","pct":40}\')',
                                     metavar="JSON")] = None
    resend: Annotated[bool, arg("send again the job's events whose delivery failed "
                                "(instead of --event)")] = False
    timeout: Annotated[Seconds, arg("seconds to wait for the broker (default 5)",
                                    metavar="SEC")] = 5.0


class QueueSubscribe(Args, frozen=True, kw_only=True):
    id: EntryId
    follow: Annotated[bool, arg("keep receiving until the job's final status event (or "
                                "SIGTERM / Ctrl-C)")] = False
    wait: Annotated[Seconds, arg("without --follow: stop once no message came for SEC "
                                 "seconds (default 2)", metavar="SEC")] = 2.0
    timeout: Annotated[Seconds, arg("seconds to wait for the broker (default 5)",
                                    metavar="SEC")] = 5.0


class QueueList(Args, frozen=True, kw_only=True):
    status: Annotated[Status | None, arg(f"only entries in this status: {STATUS_HELP}; or "
                                         "waiting (its run waits for an answer)")] = None
    repo: Annotated[str | None, arg("only entries of this repo", metavar="PATH")] = None
    session: Annotated[str | None, arg("only entries of this session label",
                                       metavar="LABEL")] = None
    limit: Annotated[Page | None, arg("at most N entries (default: all; 50 on a terminal)",
                                      metavar="N")] = None
    offset: Annotated[Page, arg("skip the first N entries", metavar="N")] = 0


class QueueCounts(Args, frozen=True, kw_only=True):
    minutes: Annotated[Annotated[int, msgspec.Meta(ge=1, le=10_080)],
                       arg("the throughput's window: the last N minutes (default 60, at "
                           "most a week)", metavar="N")] = 60


class EntryRef(Args, frozen=True, kw_only=True):
    id: EntryId


class QueueDrain(Args, frozen=True, kw_only=True):
    limit: Annotated[Count | None, arg("at most N entries (default: every ready one)",
                                       metavar="N")] = None
    repo: Annotated[str | None, arg("only entries of this repo", metavar="PATH")] = None


class QueuePick(Args, frozen=True, kw_only=True):
    session: Annotated[str, arg("the agent-session label whose entries it may take",
                                metavar="LABEL")]


class QueueStatus(Args, frozen=True, kw_only=True):
    id: EntryId
    set: Annotated[Status, arg(f"the new status: {STATUS_HELP} (not leased: a lease is "
                               "granted by `queue pick` or `sched lease`)")]


class QueueCancel(Args, frozen=True, kw_only=True):
    id: EntryId
    reason: Annotated[str | None, arg("why, recorded in the event")] = None


class QueueLogs(Args, frozen=True, kw_only=True):
    id: Annotated[Annotated[str, msgspec.Meta(pattern=ULID_PREFIX_PATTERN)] | None,
                  arg("queue entry id (or its first characters); or give --list",
                      positional=True, metavar="ID", ids="queue",
                      expect="a queue entry id (a ULID, as `uwf queue list` prints it)")
                  ] = None
    tail: Annotated[Page | None, arg("only the last N events", metavar="N")] = None
    list: Annotated[bool, arg("every entry with its live status and number of "
                              "events")] = False


class SchedPolicy(Args, frozen=True, kw_only=True):
    action: Annotated[Literal["show", "set"], arg("show the policy, or set values of it",
                                                  positional=True)]
    max_concurrent: Annotated[int | None, arg("leases active at once in each session's pool, "
                                              "at most (default 1)",
                                              alias="--maxConcurrent", metavar="N")] = None
    max_attempts: Annotated[int | None, arg("failed attempts before an entry parks "
                                            "(default 3)", alias="--maxAttempts",
                                            metavar="N")] = None
    lease_ttl_ms: Annotated[int | None, arg("how long a lease lasts unless renewed (default "
                                            "300000)", alias="--leaseTtlMs",
                                            metavar="MS")] = None
    backoff_base_ms: Annotated[int | None, arg("wait after the first failure (default 1000)",
                                               alias="--backoffBaseMs", metavar="MS")] = None
    backoff_factor: Annotated[float | None, arg("each further failure waits this many times "
                                                "longer, at least 1 (default 2)",
                                                alias="--backoffFactor", metavar="F")] = None
    backoff_cap_ms: Annotated[int | None, arg("the longest wait, at least the base (default "
                                              "60000)", alias="--backoffCapMs",
                                              metavar="MS")] = None
    max_total: Annotated[int | None, arg("leases active at once over every session, at most "
                                         "(default: no overall cap; 0 removes it)",
                                         alias="--maxTotal", metavar="N")] = None
    session: Annotated[str | None, arg("set this session label's own ceiling (with "
                                       "--max-concurrent only)", metavar="LABEL")] = None


class SchedPlan(Args, frozen=True, kw_only=True):
    all: Annotated[bool, arg("list every skipped entry (default: the first 20)")] = False


class SchedLease(Args, frozen=True, kw_only=True):
    limit: Annotated[Count | None, arg("lease at most N (default: as many as the ceiling "
                                       "allows)", metavar="N")] = None
    session: Annotated[str | None, arg("only entries of this session label",
                                       metavar="LABEL")] = None


class SchedHeld(Args, frozen=True, kw_only=True):
    id: EntryId
    lease: LeaseId


class SchedRelease(SchedHeld, frozen=True, kw_only=True):
    failed: Annotated[bool, arg("the attempt failed: count it (backoff, or park at "
                                "maxAttempts)")] = False
    reason: Annotated[str | None, arg("why, recorded in the event")] = None


class SchedReclaim(Args, frozen=True, kw_only=True):
    """No arguments; `--now` decides which leases have expired."""


# -- queue -------------------------------------------------------------------------------

def repo_of(path: str | None, store: Store) -> str | None:
    """A `--repo` filter's repo top level, resolved here, at the edge, with the
    command's own settings (a relative path is the command's working folder's)."""
    if path is None:
        return None
    from uwf.config.repo import find_repo

    return find_repo(path, store.settings)


def add(args: QueueAdd, store: Store) -> EntryAdded | BatchAdded | Plain:
    """Queue one entry (or every line of `--batch`); with `--quiet` only the ids."""
    from uwf.errors import UsageError
    from uwf.queue import service as queue

    if args.batch is not None:
        alone = msgspec.structs.asdict(QueueAdd(batch=args.batch, quiet=args.quiet))
        given = [name for name, value in msgspec.structs.asdict(args).items()
                 if value != alone[name]]
        if given:
            raise UsageError(f"--batch takes its entries from the file, not "
                             f"--{given[0].replace('_', '-')}",
                             "put the values in each line of the file")
        added = queue.add_batch(store, args.batch if args.batch == "-"
                                else store.settings.path(args.batch), store.settings)
        return Plain("\n".join(added.ids)) if args.quiet else added
    spec = queue.entry_spec({
        "workflow": args.workflow, "prompt": args.prompt, "run": args.run, "repo": args.repo,
        "priority": args.priority, "note": args.note or "", "session": args.session,
        "agent": args.agent, "timeoutSec": args.timeout, "idleTimeoutSec": args.idle_timeout,
        "expectedArtifacts": args.artifact or [], "key": args.key, "broker": args.broker,
        "brokerPasswordEnv": args.broker_password_env, "topicPrefix": args.topic_prefix})
    result = queue.add(store, spec, store.settings)
    return Plain(result.entry.id) if args.quiet else result


def publish(args: QueuePublish, store: Store) -> Published:
    """Record the job's next event and send it to its broker; or send again the events
    whose delivery failed."""
    import json

    from uwf.errors import UsageError
    from uwf.queue import messages

    if args.resend:
        if args.event is not None:
            raise UsageError("--resend sends what is recorded; it takes no --event",
                             "give either --event JSON or --resend")
        return messages.resend(store, args.id, store.settings.environ, timeout=args.timeout)
    if args.event is None:
        raise UsageError("give the event to publish with --event JSON", "or give --resend")
    try:
        event = json.loads(args.event)
    except ValueError as exc:
        raise UsageError(f"--event is not JSON: {exc}", "give a JSON value") from None
    return messages.publish(store.journal, args.id, event, store.settings.environ,
                            timeout=args.timeout)


def list_entries(args: QueueList, store: Store) -> EntryPage:
    """Entries in queue order, filtered, a page of them."""
    from uwf.queue import service as queue

    return queue.list_entries(store.read(), args.status, repo_of(args.repo, store), args.session,
                              limit=args.limit, offset=args.offset)


def counts(args: QueueCounts, store: Store) -> EntryCounts:
    """Entries per status, and how many were added and finished in the window."""
    from uwf.queue.counts import counts as count_entries

    return count_entries(store, args.minutes)


def show(args: EntryRef, store: Store) -> EntryRecord:
    """One entry with every field."""
    from uwf.queue import service as queue

    return queue.show(store.read(), args.id)


def drain(args: QueueDrain, store: Store) -> Drained:
    """Mark the next ready entries drained and return them."""
    from uwf.queue import service as queue

    return queue.drain(store, args.limit, repo_of(args.repo, store))


def pick(args: QueuePick, store: Store) -> str:
    """Lease the first eligible entry of a session; its id."""
    from uwf.queue import sched

    return sched.pick(store, args.session)


def set_status(args: QueueStatus, store: Store) -> EntryRecord:
    """Set an entry's status by hand."""
    from uwf.queue import sched

    return sched.set_status(store, args.id, args.set)


def cancel(args: QueueCancel, store: Store) -> EntryRecord:
    """Cancel an entry: it never runs."""
    from uwf.queue import service as queue

    return queue.cancel(store, args.id, args.reason or "")


def logs(args: QueueLogs, store: Store) -> Timeline | Timelines:
    """An entry's timeline, or with `--list` every entry's length of timeline."""
    from uwf.errors import UsageError
    from uwf.queue import service as queue

    if args.list:
        if args.id is not None or args.tail is not None:
            raise UsageError("--list shows every entry: it takes no ID and no --tail",
                             "give either an ID or --list")
        return queue.logs_list(store.read())
    if args.id is None:
        raise UsageError("give a queue entry id, or --list", "see `uwf queue logs -h`")
    return queue.logs(store, args.id, args.tail)


# -- sched -------------------------------------------------------------------------------

def policy(args: SchedPolicy, store: Store) -> PolicyShown:
    """Show the scheduling policy, or set values of it."""
    from uwf.errors import UsageError
    from uwf.queue import sched

    values = {"maxConcurrent": args.max_concurrent, "maxAttempts": args.max_attempts,
              "leaseTtlMs": args.lease_ttl_ms, "backoffBaseMs": args.backoff_base_ms,
              "backoffFactor": args.backoff_factor, "backoffCapMs": args.backoff_cap_ms,
              "maxTotal": args.max_total}
    if args.action == "show":
        if any(value is not None for value in values.values()) or args.session is not None:
            raise UsageError("`sched policy show` takes no values", "use `sched policy set`")
        return sched.show_policy(store.read())
    return sched.set_policy(store.journal, values, args.session)


def plan(args: SchedPlan, store: Store) -> Planned:
    """What `sched lease` would grant now and why the rest waits."""
    from uwf.queue import sched

    return sched.plan(store, args.all)


def lease(args: SchedLease, store: Store) -> Leased:
    """Lease the first eligible entries up to the ceilings."""
    from uwf.queue import sched

    return sched.lease(store, args.limit, args.session)


def complete(args: SchedHeld, store: Store) -> EntryRecord:
    """Finish a leased entry: drained."""
    from uwf.queue import sched

    return sched.complete(store, args.id, args.lease)


def release(args: SchedRelease, store: Store) -> EntryRecord:
    """Give a leased entry back; `--failed` counts an attempt."""
    from uwf.queue import sched

    return sched.release(store, args.id, args.lease, failed=args.failed,
                         reason=args.reason or "")


def renew(args: SchedHeld, store: Store) -> EntryRecord:
    """Extend a live lease to now + leaseTtlMs."""
    from uwf.queue import sched

    return sched.renew(store, args.id, args.lease)


def reclaim(args: SchedReclaim, store: Store) -> Reclaimed:
    """Take back every expired lease."""
    from uwf.queue import sched
    from uwf.queue.waiting import settle

    settle(store)  # questions past their deadline, and runs no longer waiting, first
    return sched.reclaim(store.journal)


def reset(args: EntryRef, store: Store) -> EntryRecord:
    """Make a parked entry ready again."""
    from uwf.queue import sched

    return sched.reset(store.journal, args.id)
