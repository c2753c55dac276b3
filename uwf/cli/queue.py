"""Declarations of `uwf queue ...` and `uwf sched ...`: the durable queue and its
scheduling policy (docs/queue.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from uwf.cli.context import Context
from uwf.cli.spec import Command
from uwf.config.args import Args, Count, NonNegative, arg
from uwf.config.limits import MAX_TIMEOUT_S
from uwf.ids import ULID_PATTERN
from uwf.payload import Plain
from uwf.queue.terms import Priority
from uwf.queue.terms import StatusWord as Status

_ULID = ULID_PATTERN
EntryId = Annotated[str, msgspec.Meta(pattern=_ULID),
                    arg("queue entry id (a ULID)", positional=True, metavar="ID",
                        expect="a queue entry id (a ULID, as `uwf queue list` prints it)")]
LeaseId = Annotated[str, msgspec.Meta(pattern=_ULID),
                    arg("the lease id `uwf sched lease` gave", metavar="LEASE",
                        expect="a lease id (a ULID, as `uwf sched lease` prints it)")]
TimeoutSec = Annotated[int, msgspec.Meta(ge=1, le=MAX_TIMEOUT_S)]
Page = NonNegative  # at most SQLite's INTEGER
STATUS_HELP = ("ready, leased, drained, parked or cancelled; or the job registry's pending, "
               "running, completed, error")


class QueueAdd(Args, frozen=True, kw_only=True):
    workflow: Annotated[str | None, arg("a registered workflow (name or hash) to start a "
                                        "run of", alias="--app", metavar="NAME|HASH")] = None
    prompt: Annotated[str | None, arg("with --workflow: the task, the run's prompt",
                                      short="-p")] = None
    run: Annotated[str | None, arg("instead of --workflow: an existing run to continue",
                                   alias="--runId", metavar="RUN")] = None
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
    batch: Annotated[str | None, arg("add every line of a JSON-lines file (or - for stdin) "
                                     "in one write, all or nothing", metavar="FILE")] = None
    quiet: Annotated[bool, arg("print only the entry's id (with --batch: one id a line), "
                               "for ID=$(uwf queue add ...)", alias="--id-only")] = False


class QueueList(Args, frozen=True, kw_only=True):
    status: Annotated[Status | None, arg(f"only entries in this status: {STATUS_HELP}")] = None
    repo: Annotated[str | None, arg("only entries of this repo", metavar="PATH")] = None
    session: Annotated[str | None, arg("only entries of this session label",
                                       metavar="LABEL")] = None
    limit: Annotated[Page | None, arg("at most N entries (default: all)",
                                      metavar="N")] = None
    offset: Annotated[Page, arg("skip the first N entries", metavar="N")] = 0


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
    id: Annotated[Annotated[str, msgspec.Meta(pattern=_ULID)] | None,
                  arg("queue entry id; or give --list", positional=True, metavar="ID",
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

def _add(args: QueueAdd, ctx: Context) -> Any:
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
        added = queue.add_batch(ctx.store, args.batch)
        return Plain("\n".join(added["ids"])) if args.quiet else added
    spec = queue.entry_spec({
        "workflow": args.workflow, "prompt": args.prompt, "run": args.run, "repo": args.repo,
        "priority": args.priority, "note": args.note or "", "session": args.session,
        "agent": args.agent, "timeoutSec": args.timeout, "idleTimeoutSec": args.idle_timeout,
        "expectedArtifacts": args.artifact or [], "key": args.key})
    result = queue.add(ctx.store, spec)
    return Plain(result["entry"]["id"]) if args.quiet else result


def _list(args: QueueList, ctx: Context) -> Any:
    from uwf.queue import service as queue

    return queue.list_entries(ctx.store, args.status, args.repo, args.session,
                              limit=args.limit, offset=args.offset)


def _show(args: EntryRef, ctx: Context) -> Any:
    from uwf.queue import service as queue

    return queue.show(ctx.store, args.id)


def _drain(args: QueueDrain, ctx: Context) -> Any:
    from uwf.queue import service as queue

    return queue.drain(ctx.store, args.limit, args.repo)


def _pick(args: QueuePick, ctx: Context) -> Any:
    from uwf.queue import sched

    return sched.pick(ctx.store, args.session)


def _status(args: QueueStatus, ctx: Context) -> Any:
    from uwf.queue import service as queue

    return queue.set_status(ctx.store, args.id, args.set)


def _cancel(args: QueueCancel, ctx: Context) -> Any:
    from uwf.queue import service as queue

    return queue.cancel(ctx.store, args.id, args.reason or "")


def _logs(args: QueueLogs, ctx: Context) -> Any:
    from uwf.errors import UsageError
    from uwf.queue import service as queue

    if args.list:
        if args.id is not None or args.tail is not None:
            raise UsageError("--list shows every entry: it takes no ID and no --tail",
                             "give either an ID or --list")
        return queue.logs_list(ctx.store)
    if args.id is None:
        raise UsageError("give a queue entry id, or --list", "see `uwf queue logs -h`")
    return queue.logs(ctx.store, args.id, args.tail)


def _entries_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import table

    rows = [{"id": e["id"], "status": e["status"], "priority": e["priority"],
             "session": e["session"], "work": e["workflow"] or f"run {e['run']}",
             "attempts": e["attempts"], "enqueued": e["enqueuedAt"]}
            for e in payload["entries"]]
    foot = f"{payload['total']} entries"
    if rows:
        start = payload["offset"]
        foot += f"; showing {start + 1}-{start + len(rows)}"
    return table(rows) + "\n" + foot if rows else foot


def _logs_panel(payload: dict[str, Any]) -> str:
    import json

    from uwf.cli.render import table

    if "events" not in payload or not isinstance(payload["events"], list):
        return table(payload["entries"])
    lines = [f"{payload['id']}  {payload['status']}"]
    for item in payload["events"]:
        change = (f"{item['from']} -> {item['to']}" if item["from"] != item["to"]
                  else item["to"])
        data = json.dumps(item["data"], ensure_ascii=False, separators=(",", ":"))
        lines.append(f"{item['seq']:>6}  {item['ts']}  {item['event']:<15} {change}  {data}")
    return "\n".join(lines)


# -- sched -------------------------------------------------------------------------------

def _policy(args: SchedPolicy, ctx: Context) -> Any:
    from uwf.errors import UsageError
    from uwf.queue import sched

    values = {"maxConcurrent": args.max_concurrent, "maxAttempts": args.max_attempts,
              "leaseTtlMs": args.lease_ttl_ms, "backoffBaseMs": args.backoff_base_ms,
              "backoffFactor": args.backoff_factor, "backoffCapMs": args.backoff_cap_ms,
              "maxTotal": args.max_total}
    if args.action == "show":
        if any(value is not None for value in values.values()) or args.session is not None:
            raise UsageError("`sched policy show` takes no values", "use `sched policy set`")
        return sched.show_policy(ctx.store)
    return sched.set_policy(ctx.store, values, args.session)


def _plan(args: SchedPlan, ctx: Context) -> Any:
    from uwf.queue import sched

    return sched.plan(ctx.store, args.all)


def _lease(args: SchedLease, ctx: Context) -> Any:
    from uwf.queue import sched

    return sched.lease(ctx.store, args.limit, args.session)


def _complete(args: SchedHeld, ctx: Context) -> Any:
    from uwf.queue import sched

    return sched.complete(ctx.store, args.id, args.lease)


def _release(args: SchedRelease, ctx: Context) -> Any:
    from uwf.queue import sched

    return sched.release(ctx.store, args.id, args.lease, failed=args.failed,
                         reason=args.reason or "")


def _renew(args: SchedHeld, ctx: Context) -> Any:
    from uwf.queue import sched

    return sched.renew(ctx.store, args.id, args.lease)


def _reclaim(args: SchedReclaim, ctx: Context) -> Any:
    from uwf.queue import sched

    return sched.reclaim(ctx.store)


def _reset(args: EntryRef, ctx: Context) -> Any:
    from uwf.queue import sched

    return sched.reset(ctx.store, args.id)


_ID = "01MB23Y70010GPA2PQX31XGT24"
_LEASE = "01MB23Y7001K9T4VQ2D6WZ8E3C"

QUEUE_COMMANDS: list[Command[Any]] = [
    Command(("queue", "add"), "Queue work: a registered workflow and a prompt, or a run to "
            "continue; --batch FILE.jsonl adds many in one write.",
            "uwf queue add --workflow solve-issue -p 'Fix the login bug' --session tmux:a",
            QueueAdd, _add),
    Command(("queue", "list"), "List entries in queue order (priority, enqueuedAt, id), "
            "filtered.", "uwf queue list --status pending --session tmux:a",
            QueueList, _list, human=_entries_panel),
    Command(("queue", "show"), "Show one entry with every field.",
            f"uwf queue show {_ID}", EntryRef, _show),
    Command(("queue", "drain"), "Mark the next ready entries drained and return them (no "
            "policy: the host runs them).", "uwf queue drain --limit 5", QueueDrain, _drain),
    Command(("queue", "pick"), "Lease the first eligible entry of a session under the policy "
            "and print its id (exit 3 when there is none).",
            "uwf queue pick --session tmux:a", QueuePick, _pick, plain=True),
    Command(("queue", "status"), "Set an entry's status by hand (the job registry's words "
            "too); a lease it had is void.", f"uwf queue status {_ID} --set completed",
            QueueStatus, _status),
    Command(("queue", "cancel"), "Cancel an entry: it never runs; a lease it had is void.",
            f"uwf queue cancel {_ID} --reason 'no longer needed'", QueueCancel, _cancel),
    Command(("queue", "logs"), "An entry's timeline from the log (registered, status "
            "changes, leases, attempts), or --list every entry.",
            f"uwf queue logs {_ID} --tail 20", QueueLogs, _logs, human=_logs_panel),
    Command(("sched", "policy"), "Show the scheduling policy, or set values of it "
            "(validated; the whole policy is recorded).",
            "uwf sched policy set --max-concurrent 4 --max-attempts 5", SchedPolicy, _policy),
    Command(("sched", "plan"), "What `sched lease` would grant now and why the rest waits "
            "(read-only; skipped capped at 20).", "uwf sched plan --now 2026-12-01T10:00:00Z",
            SchedPlan, _plan),
    Command(("sched", "lease"), "Lease the first eligible entries, never more active "
            "leases than maxConcurrent (exit 3 when none).",
            "uwf sched lease --limit 2 --session tmux:a", SchedLease, _lease),
    Command(("sched", "complete"), "Finish a leased entry: drained.",
            f"uwf sched complete {_ID} --lease {_LEASE}", SchedHeld, _complete),
    Command(("sched", "release"), "Give a leased entry back; --failed counts an attempt "
            "(backoff, or park at maxAttempts).",
            f"uwf sched release {_ID} --lease {_LEASE} --failed --reason 'tests fail'",
            SchedRelease, _release),
    Command(("sched", "renew"), "Extend a live lease to now + leaseTtlMs.",
            f"uwf sched renew {_ID} --lease {_LEASE}", SchedHeld, _renew),
    Command(("sched", "reclaim"), "Take back every expired lease, each one failed attempt.",
            "uwf sched reclaim --now 2026-12-01T11:00:00Z", SchedReclaim, _reclaim),
    Command(("sched", "reset"), "Make a parked entry ready again with attempts 0.",
            f"uwf sched reset {_ID}", EntryRef, _reset),
]
