"""Every lease transition judges expiry by a clock read inside the writers' section
(SPEC §8), and `log verify` holds the log to the same rule (issue 16).

A process that read the time and then stalled before the writers' lock must not act
on that stale time: another process may have seen the lease expire, and leased the
freed slot, in between. The stall is injected at a precise point, not raced: in
process, the clock moves when the command enters the exclusive section; across real
processes, the renewer stops at the lock's door until the test lets it in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE, Cli
from uwf.engine.clock import format_ts, parse_instant
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome
from uwf.errors import NothingToDo, Rejected
from uwf.queue import sched
from uwf.queue import service as queue
from uwf.queue.events import (
    QueueCompleted,
    QueueLeased,
    QueueReclaimed,
    QueueRenewed,
)
from uwf.store import Store
from uwf.workflows.service import put_workflow

T0 = parse_instant("2026-11-26T12:00:00Z")
TTL_MS = 10_000
LATE = T0 + TTL_MS + 1_000  # the instant the stalled command gets the lock: expired


class SteppedClock:
    """A clock the test moves by hand."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Store, SteppedClock]]:
    clock = SteppedClock(T0)
    opened = Store.open(tmp_path / "store", clock=clock)
    try:
        put_workflow(opened, EXAMPLE)
        sched.set_policy(opened.journal, {"leaseTtlMs": TTL_MS})
        yield opened, clock
    finally:
        opened.close()


def stall_at_the_lock(store: Store, clock: SteppedClock, meanwhile: Callable[[], None]
                      ) -> None:
    """The next write stalls at the writers' lock: `meanwhile` happens, and the clock
    reads LATE, before it gets in. Once, then the lock is as it was."""
    log = store.log
    original = log.exclusive

    @contextmanager
    def stalled() -> Iterator[Any]:
        log.exclusive = original  # type: ignore[method-assign]
        meanwhile()
        clock.ms = LATE
        with original() as session:
            yield session

    log.exclusive = stalled  # type: ignore[method-assign]


def add(store: Store, prompt: str) -> str:
    spec = queue.EntrySpec(workflow="solve-issue", prompt=prompt, repo=str(store.root))
    result = queue.add(store, spec, store.settings)
    return result.entry.id


def leased(store: Store) -> tuple[str, str]:
    (lease,) = sched.lease(store, 1).leases
    return lease.id, lease.lease_id


def last_event(store: Store) -> Any:
    line = store.log.line(store.log.head().seq)
    assert line is not None
    return json.loads(line)


@pytest.mark.parametrize("transition", ["renew", "complete", "release"])
def test_a_holder_stalled_past_its_lease_is_refused(
        store: tuple[Store, SteppedClock], transition: str) -> None:
    opened, clock = store
    add(opened, "first")
    entry, lease = leased(opened)
    stall_at_the_lock(opened, clock, lambda: None)
    act: dict[str, Callable[[], Any]] = {
        "renew": lambda: sched.renew(opened, entry, lease),
        "complete": lambda: sched.complete(opened, entry, lease),
        "release": lambda: sched.release(opened, entry, lease, failed=True),
    }
    head = opened.log.head()
    with pytest.raises(Rejected, match="expired"):
        act[transition]()
    assert opened.log.head() == head  # refused: nothing written


def test_a_lease_judges_the_ceiling_at_the_instant_it_gets_the_lock(
        store: tuple[Store, SteppedClock]) -> None:
    opened, clock = store
    add(opened, "first")
    second = add(opened, "second")
    leased(opened)  # the only slot (maxConcurrent 1), until T0 + TTL
    with pytest.raises(NothingToDo):
        sched.lease(opened, 1)
    stall_at_the_lock(opened, clock, lambda: None)
    granted = sched.lease(opened, 1)  # the first lease expired while it waited
    assert granted.now == format_ts(LATE)
    (lease,) = granted.leases
    assert lease.id == second
    assert lease.lease_expires_at == format_ts(LATE + TTL_MS)
    event = last_event(opened)
    assert (event["type"], event["ts"]) == ("queue.leased", format_ts(LATE))


def test_a_reclaim_judges_expiry_at_the_instant_it_gets_the_lock(
        store: tuple[Store, SteppedClock]) -> None:
    opened, clock = store
    entry = add(opened, "first")
    leased(opened)
    assert sched.reclaim(opened.journal).count == 0
    stall_at_the_lock(opened, clock, lambda: None)
    reclaimed = sched.reclaim(opened.journal)
    assert reclaimed.now == format_ts(LATE)
    assert [item.id for item in reclaimed.reclaimed] == [entry]


def test_a_stalled_renew_never_makes_two_active_leases(
        store: tuple[Store, SteppedClock]) -> None:
    """The outside check's case, in process: the renew read the time while its lease
    was live, stalled, and meanwhile another process leased the freed slot."""
    opened, clock = store
    first = add(opened, "first")
    add(opened, "second")
    entry, lease = leased(opened)
    assert entry == first
    other = Store.open(opened.root, clock=clock)

    def another_process_leases() -> None:
        clock.ms = LATE
        sched.lease(other, 1)

    try:
        stall_at_the_lock(opened, clock, another_process_leases)
        with pytest.raises(Rejected, match="expired"):
            sched.renew(opened, entry, lease)
    finally:
        other.close()
    assert sched.plan(opened).active == 1


# -- across real processes ---------------------------------------------------------------
# The renewer is a process of its own; the commands beside it run in this one (another
# process than the renewer's, as the race needs).

# Renews a lease, stopping at the writers' lock until told to go: prints "at-lock",
# waits for a line on stdin, then goes in; prints the result or the refusal.
RENEWER = textwrap.dedent('''
    import json, sys
    from uwf.queue import sched
    from uwf.store import Store
    from uwf.engine.filelog import FileLog
    from uwf.errors import UwfError
    from uwf.payload import to_payload

    original = FileLog.exclusive

    def at_the_door(self):
        print("at-lock", flush=True)
        sys.stdin.readline()
        return original(self)

    FileLog.exclusive = at_the_door
    store = Store.open(sys.argv[1])
    try:
        print(json.dumps(to_payload(sched.renew(store, sys.argv[2], sys.argv[3]))), flush=True)
    except UwfError as exc:
        print("refused: " + exc.line(), flush=True)
        sys.exit(exc.exit_code)
''')


def test_a_renew_stalled_at_the_lock_across_processes(cli: Cli, tmp_path: Path) -> None:
    def ok(*args: str) -> Any:
        result = cli.run(*args, "--json")
        assert result.code == 0, result.err
        return json.loads(result.out)

    ok("workflow", "put", str(EXAMPLE))
    ok("sched", "policy", "set", "--lease-ttl-ms", "1500")
    first = ok("queue", "add", "--workflow", "solve-issue", "-p", "first")["entry"]["id"]
    second = ok("queue", "add", "--workflow", "solve-issue", "-p", "second")["entry"]["id"]
    (lease,) = ok("sched", "lease")["leases"]
    assert lease["id"] == first
    expires = parse_instant(lease["leaseExpiresAt"])
    script = tmp_path / "renewer.py"
    script.write_text(RENEWER, "utf-8")
    renewer = subprocess.Popen([sys.executable, str(script), str(cli.home), first,
                                lease["leaseId"]], env=cli.env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert renewer.stdout is not None
        assert renewer.stdin is not None
        assert renewer.stdout.readline().strip() == "at-lock", renewer.communicate()
        while time.time() * 1000 <= expires + 50:  # until the lease has surely expired
            time.sleep(0.05)
        (taken,) = ok("sched", "lease")["leases"]  # the freed slot, in another process
        assert taken["id"] == second
        renewer.stdin.write("go\n")
        renewer.stdin.flush()
        out, err = renewer.communicate(timeout=60)
    finally:
        if renewer.poll() is None:
            renewer.kill()
    assert renewer.returncode == 1, (out, err)
    assert out.startswith("refused: ")
    assert "expired" in out
    verified = cli.run("log", "verify", "--json")
    assert verified.code == 0, verified.out
    # Nothing of the stalled renew was written (an active-lease count here would depend
    # on how long these commands take: the second lease lives 1.5 s).
    tail = cli.run("log", "tail", "--type", "queue.renewed", "--json")
    assert tail.code == 0
    assert tail.out == ""


# -- log verify holds the log to the same rule -------------------------------------------

def forge(opened: Store, clock: SteppedClock, at: int, entry: str, data: EventData) -> None:
    """Write an event the commands would refuse, at `at`, straight through the journal:
    a log that chains and parses, with a transition that should never happen."""
    clock.ms = at
    opened.journal.write(lambda views: Outcome([NewEvent(f"queue/{entry}", data)]))


def problems(opened: Store) -> list[str]:
    from uwf.audit.verify import verify

    return [item.problem for item in verify(opened).problems]


def test_verify_passes_what_the_commands_wrote(store: tuple[Store, SteppedClock]) -> None:
    opened, clock = store
    entries = [add(opened, name) for name in ("a", "b", "c")]
    entry, lease = leased(opened)
    clock.ms = T0 + TTL_MS - 1
    sched.renew(opened, entry, lease)
    clock.ms = T0 + 2 * TTL_MS - 2  # live until T0 + 2 TTL - 1
    sched.complete(opened, entry, lease)
    entry, lease = leased(opened)
    clock.ms += TTL_MS  # expired exactly now: not active, reclaimed
    sched.reclaim(opened.journal)
    leased(opened)
    assert entries
    assert problems(opened) == []


def test_verify_names_a_renew_after_expiry(store: tuple[Store, SteppedClock]) -> None:
    opened, clock = store
    add(opened, "first")
    entry, lease = leased(opened)
    forge(opened, clock, T0 + TTL_MS, entry, QueueRenewed(lease, T0 + 3 * TTL_MS))
    seq = opened.log.head().seq
    (problem,) = problems(opened)
    assert "queue.renewed" in problem
    assert f"lease {lease} had expired at" in problem
    from uwf.audit.verify import verify

    assert verify(opened).problems[0].seq == seq


def test_verify_names_a_complete_after_expiry(store: tuple[Store, SteppedClock]) -> None:
    opened, clock = store
    add(opened, "first")
    entry, lease = leased(opened)
    forge(opened, clock, T0 + TTL_MS + 5, entry, QueueCompleted(lease))
    (problem,) = problems(opened)
    assert "queue.completed" in problem
    assert "had expired" in problem


def test_verify_names_a_reclaim_of_a_live_lease(store: tuple[Store, SteppedClock]) -> None:
    opened, clock = store
    add(opened, "first")
    entry, lease = leased(opened)
    forge(opened, clock, T0 + 1, entry, QueueReclaimed(lease, 1, "forged", T0 + 2000))
    (problem,) = problems(opened)
    assert "before it expired" in problem


def test_verify_names_a_lease_over_the_ceiling(store: tuple[Store, SteppedClock]) -> None:
    opened, clock = store
    add(opened, "first")
    second = add(opened, "second")
    leased(opened)
    forge(opened, clock, T0 + 5, second,
          QueueLeased("01KAZZZZZZZZZZZZZZZZZZZZZZ", T0 + 5 + TTL_MS, 1))
    (problem,) = problems(opened)
    assert "over its ceiling (maxConcurrent 1)" in problem
    assert "1 leases of the default pool were active" in problem


def test_verify_counts_only_leases_live_at_the_event(
        store: tuple[Store, SteppedClock]) -> None:
    """A lease after the others expired (unreclaimed) is within the ceiling; a raised
    ceiling is the ceiling from its event on."""
    opened, clock = store
    ids = [add(opened, name) for name in ("a", "b", "c", "d", "e")]
    leased(opened)
    forge(opened, clock, T0 + TTL_MS, ids[1],
          QueueLeased("01KAZZZZZZZZZZZZZZZZZZZZZY", T0 + 2 * TTL_MS, 1))
    sched.set_policy(opened.journal, {"maxConcurrent": 3})
    clock.ms = T0 + TTL_MS + 1
    assert sched.lease(opened).granted == 2
    assert problems(opened) == []
    forge(opened, clock, T0 + TTL_MS + 2, ids[4],
          QueueLeased("01KAZZZZZZZZZZZZZZZZZZZZZX", T0 + 3 * TTL_MS, 1))
    (problem,) = problems(opened)
    assert "3 leases of the default pool were active" in problem
    assert "maxConcurrent 3" in problem
