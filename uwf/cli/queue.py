"""`uwf queue ...` and `uwf sched ...` on the command line: help, examples and panels;
the arguments and operations are the queue's (`uwf.queue.commands`, docs/queue.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from uwf.invoker.spec import Command, on_store
from uwf.queue import commands as queue
from uwf.queue.commands import (
    EntryRef,
    QueueAdd,
    QueueCancel,
    QueueCounts,
    QueueDrain,
    QueueList,
    QueueLogs,
    QueuePick,
    QueuePublish,
    QueueStatus,
    QueueSubscribe,
    SchedHeld,
    SchedLease,
    SchedPlan,
    SchedPolicy,
    SchedReclaim,
    SchedRelease,
)

if TYPE_CHECKING:
    from uwf.invoker.context import Context


def _subscribe(args: QueueSubscribe, ctx: Context) -> Iterator[str]:
    """The job's events from its broker, a JSON line each as they come (a line of words
    on a terminal); a refused message is said on stderr."""
    import json
    import sys

    from uwf.invoker.text import one_line
    from uwf.payload import to_payload
    from uwf.queue import messages

    human = not ctx.json and sys.stdout.isatty()
    def notice(line: str) -> None:
        sys.stderr.write(one_line(f"uwf: {line}") + "\n")

    for taken in messages.subscribe(ctx.store, args.id, ctx.store.settings.environ,
                                    follow=args.follow, wait=args.wait,
                                    timeout=args.timeout, notice=notice):
        if isinstance(taken, messages.Refused):
            sys.stderr.write(one_line(f"uwf: refused a message on {taken.topic}: "
                                      f"{taken.why}") + "\n")
            continue
        line = json.dumps(to_payload(taken), ensure_ascii=False, separators=(",", ":"))
        yield (f"{taken.seq:>6}  {taken.ts}  {json.dumps(taken.event, ensure_ascii=False)}"
               if human else line)


def _list(args: QueueList, ctx: Context) -> Any:
    """On a terminal, a page unless --limit says otherwise; piped or --json, every entry."""
    if ctx.terminal and args.limit is None:
        import msgspec

        args = msgspec.structs.replace(args, limit=PAGE)
    return queue.list_entries(args, ctx.store)


def _entries_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import page_footer, table

    rows = [{"id": e["id"], "status": e["status"], "priority": e["priority"],
             "session": e["session"], "work": e["workflow"] or f"run {e['run']}",
             "attempts": e["attempts"], "enqueued": e["enqueuedAt"]}
            for e in payload["entries"]]
    foot = page_footer(payload["total"], payload["offset"], len(rows), ("entry", "entries"))
    return table(rows) + "\n" + foot if rows else foot


def _counts_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import table

    rows = [{"status": status, "entries": count}
            for status, count in payload["statuses"].items()]
    foot = (f"{payload['total']} entries; in the last {payload['minutes']} min: "
            f"{payload['added']} added, {payload['finished']} finished"
            + ("" if payload["exact"] else " (the newest log lines only)"))
    return table(rows) + "\n" + foot


def _logs_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import inline, table

    if "events" not in payload or not isinstance(payload["events"], list):
        return table(payload["entries"])
    lines = [f"{payload['id']}  {payload['status']}"]
    for item in payload["events"]:
        change = (f"{item['from']} -> {item['to']}"
                  if item["from"] is not None and item["from"] != item["to"] else item["to"])
        data = item["data"]
        if isinstance(data, dict):  # what the event set, its empty fields left out
            data = {key: value for key, value in data.items() if value not in (None, "", [])}
        lines.append(f"{item['seq']:>6}  {item['ts']}  {item['event']:<15} {change}  "
                     f"{inline(data)}".rstrip())
    return "\n".join(lines)


PAGE = 50  # entries `queue list` shows on a terminal without --limit
_ID = "01MB23Y70010GPA2PQX31XGT24"
_LEASE = "01MB23Y7001K9T4VQ2D6WZ8E3C"

QUEUE_COMMANDS: list[Command[Any]] = [
    Command(("queue", "add"), "Queue work: a registered workflow and a prompt, or a run to "
            "continue; --batch FILE.jsonl adds many in one write.",
            "uwf queue add --workflow solve-issue -p 'Fix the login bug' --session tmux:a",
            QueueAdd, on_store(queue.add)),
    Command(("queue", "list"), "List entries in queue order (priority, enqueuedAt, id), "
            "filtered.", "uwf queue list --status pending --session tmux:a",
            QueueList, _list, human=_entries_panel, read_only=True),
    Command(("queue", "counts"), "Count entries per status (kept counts: no scan), and the "
            "entries added and finished in the last minutes (the throughput).",
            "uwf queue counts --minutes 60", QueueCounts, on_store(queue.counts),
            human=_counts_panel, read_only=True),
    Command(("queue", "show"), "Show one entry with every field.",
            f"uwf queue show {_ID}", EntryRef, on_store(queue.show), read_only=True),
    Command(("queue", "drain"), "Mark the next ready entries drained and return them (no "
            "policy: the host runs them).", "uwf queue drain --limit 5", QueueDrain,
            on_store(queue.drain)),
    Command(("queue", "pick"), "Lease the first eligible entry of a session under the policy "
            "and print its id (exit 3 when there is none).",
            "uwf queue pick --session tmux:a", QueuePick, on_store(queue.pick), plain=True),
    Command(("queue", "status"), "Set an entry's status by hand (the job registry's words "
            "too); a lease it had is void.", f"uwf queue status {_ID} --set completed",
            QueueStatus, on_store(queue.set_status)),
    Command(("queue", "cancel"), "Cancel an entry: it never runs; a lease it had is void.",
            f"uwf queue cancel {_ID} --reason 'no longer needed'", QueueCancel,
            on_store(queue.cancel)),
    Command(("queue", "logs"), "An entry's timeline from the log (registered, status "
            "changes, leases, attempts), or --list every entry.",
            f"uwf queue logs {_ID} --tail 20", QueueLogs, on_store(queue.logs),
            human=_logs_panel, read_only=True),
    Command(("queue", "publish"), "Record a job's next event (its seq) and send it to the "
            "job's MQTT broker; --resend sends again what was not delivered.",
            f"uwf queue publish {_ID} --event '{{\"type\":\"progress\",\"pct\":40}}'",
            QueuePublish, on_store(queue.publish)),
    Command(("queue", "subscribe"), "Receive a job's events from its MQTT broker (its token, "
            "each seq once), record and print them; --follow until the job ends.",
            f"uwf queue subscribe {_ID} --follow", QueueSubscribe, _subscribe, streams=True,
            stops_on_signal=lambda args: bool(args.follow),
            endless=lambda args: bool(args.follow)),
    Command(("sched", "policy"), "Show the scheduling policy, or set values of it "
            "(validated; the whole policy is recorded).",
            "uwf sched policy set --max-concurrent 4 --max-attempts 5", SchedPolicy,
            on_store(queue.policy)),
    Command(("sched", "plan"), "What `sched lease` would grant now and why the rest waits "
            "(read-only; skipped capped at 20).", "uwf sched plan --now 2026-12-01T10:00:00Z",
            SchedPlan, on_store(queue.plan), read_only=True),
    Command(("sched", "lease"), "Lease the first eligible entries, never more active "
            "leases than maxConcurrent (exit 3 when none).",
            "uwf sched lease --limit 2 --session tmux:a", SchedLease, on_store(queue.lease)),
    Command(("sched", "complete"), "Finish a leased entry: drained.",
            f"uwf sched complete {_ID} --lease {_LEASE}", SchedHeld, on_store(queue.complete)),
    Command(("sched", "release"), "Give a leased entry back; --failed counts an attempt "
            "(backoff, or park at maxAttempts).",
            f"uwf sched release {_ID} --lease {_LEASE} --failed --reason 'tests fail'",
            SchedRelease, on_store(queue.release)),
    Command(("sched", "renew"), "Extend a live lease to now + leaseTtlMs.",
            f"uwf sched renew {_ID} --lease {_LEASE}", SchedHeld, on_store(queue.renew)),
    Command(("sched", "reclaim"), "Take back every expired lease, each one failed attempt.",
            "uwf sched reclaim --now 2026-12-01T11:00:00Z", SchedReclaim,
            on_store(queue.reclaim)),
    Command(("sched", "reset"), "Make a parked entry ready again with attempts 0.",
            f"uwf sched reset {_ID}", EntryRef, on_store(queue.reset)),
]
