"""`uwf sched ...` through the real CLI, with `--now` so nothing sleeps: the policy and
its validation, the lease state machine (every transition and every refusal),
backoff and parking, the plan, and 8 processes leasing at once against the ceiling."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.queuekit import Queue, at, queue_on

DEFAULTS = {"maxConcurrent": 1, "maxAttempts": 3, "leaseTtlMs": 300000, "backoffBaseMs": 1000,
            "backoffFactor": 2, "backoffCapMs": 60000, "sessions": {}, "maxTotal": None}


def ms(ts: str) -> int:
    from uwf.engine.clock import parse_instant

    return parse_instant(ts)


# -- the policy ------------------------------------------------------------------------

def test_policy_defaults_and_set(q: Queue) -> None:
    shown = q.ok("sched", "policy", "show")
    assert shown == {"policy": DEFAULTS, "default": True, "updatedAt": None}
    policy = q.policy("--max-concurrent", "4", "--backoffFactor", "1.5")
    assert policy == {**DEFAULTS, "maxConcurrent": 4, "backoffFactor": 1.5}
    assert q.ok("sched", "policy", "show")["default"] is False
    # The whole policy is recorded, so a replay never depends on today's defaults.
    event = q.events()[-1]
    assert (event["type"], event["subject"]) == ("sched.policy_set", "policy/sched")
    assert event["data"] == {**DEFAULTS, "maxConcurrent": 4, "backoffFactor": 1.5}
    count = len(q.events())
    q.policy("--max-concurrent", "4")  # no change: nothing recorded
    assert len(q.events()) == count


@pytest.mark.parametrize("args", [
    ["--max-concurrent", "0"], ["--max-concurrent", "-1"], ["--max-concurrent", "abc"],
    ["--max-concurrent", "2.5"], ["--max-attempts", "0"], ["--lease-ttl-ms", "0"],
    ["--lease-ttl-ms", "99999999999999"], ["--backoff-base-ms", "0"],
    ["--backoff-factor", "0.5"], ["--backoff-factor", "nan"], ["--backoff-factor", "inf"],
    ["--backoff-cap-ms", "500"],  # below the base (1000)
    ["--backoff-base-ms", "70000"],  # above the cap (60000)
    [],  # nothing to set
])
def test_invalid_policy_values_are_usage_errors(q: Queue, args: list[str]) -> None:
    q.refused(2, "sched", "policy", "set", *args)
    assert q.ok("sched", "policy", "show")["policy"] == DEFAULTS


def test_policy_show_takes_no_values(q: Queue) -> None:
    q.refused(2, "sched", "policy", "show", "--max-concurrent", "2")
    q.refused(2, "sched", "policy", "bogus")


# -- the lease state machine -----------------------------------------------------------

def test_lease_then_complete(q: Queue) -> None:
    entry_id = q.add(now=at(0))
    granted = q.ok("sched", "lease", now=at(1))
    assert granted["now"] == at(1)
    assert granted["granted"] == 1
    (lease,) = granted["leases"]
    assert lease["id"] == entry_id
    assert lease["attempt"] == 1
    assert lease["leaseExpiresAt"] == at(1 + 300)
    entry = q.entry(entry_id)
    assert entry["status"] == "leased"
    assert entry["lease"]["id"] == lease["leaseId"]
    assert entry["lease"]["expiresAt"] == at(301)
    done = q.ok("sched", "complete", entry_id, "--lease", lease["leaseId"], now=at(2))
    assert (done["status"], done["lease"]) == ("drained", None)
    # The lease is over: completing again, renewing or releasing it are refused.
    for command in ("complete", "renew", "release"):
        err = q.refused(1, "sched", command, entry_id, "--lease", lease["leaseId"], now=at(3))
        assert "drained, not leased" in err
    q.refused(3, "sched", "lease", now=at(3))


def test_release_renew_and_refusals_of_a_wrong_lease(q: Queue) -> None:
    entry_id = q.add(now=at(0))
    lease = q.lease(now=at(1))[0]["leaseId"]
    other = "01MB23Y7001K9T4VQ2D6WZ8E3C"
    for command in ("complete", "renew", "release"):
        assert "is not queue entry" in q.refused(1, "sched", command, entry_id, "--lease",
                                                 other, now=at(2))
    q.refused(2, "sched", "complete", entry_id, "--lease", "nope", now=at(2))
    q.refused(2, "sched", "complete", entry_id, now=at(2))  # --lease is required
    renewed = q.ok("sched", "renew", entry_id, "--lease", lease, now=at(100))
    assert renewed["lease"]["expiresAt"] == at(400)
    released = q.ok("sched", "release", entry_id, "--lease", lease, now=at(101))
    assert (released["status"], released["attempts"], released["nextEligibleAt"]) == (
        "ready", 0, None)
    # A stale lease: the entry was leased again since.
    again = q.lease(now=at(102))[0]
    assert again["attempt"] == 1
    assert again["leaseId"] != lease
    assert "is not queue entry" in q.refused(1, "sched", "complete", entry_id, "--lease",
                                             lease, now=at(103))
    q.ok("sched", "complete", entry_id, "--lease", again["leaseId"], now=at(103))


def test_an_expired_lease_is_refused_and_reclaimed(q: Queue) -> None:
    entry_id = q.add(now=at(0))
    lease = q.lease(now=at(0))[0]["leaseId"]
    expiry = 300  # leaseTtlMs 300000
    for command in ("complete", "renew", "release"):
        assert "expired" in q.refused(1, "sched", command, entry_id, "--lease", lease,
                                      now=at(expiry))
    # Not yet expired: nothing to reclaim.
    assert q.ok("sched", "reclaim", now=at(expiry - 1))["count"] == 0
    reclaimed = q.ok("sched", "reclaim", now=at(expiry))
    assert reclaimed["reclaimed"] == [{"id": entry_id, "leaseId": lease, "attempts": 1,
                                       "status": "ready", "nextEligibleAt": at(expiry + 1)}]
    entry = q.entry(entry_id)
    assert (entry["status"], entry["attempts"], entry["lease"]) == ("ready", 1, None)
    assert q.ok("sched", "reclaim", now=at(expiry + 10))["count"] == 0
    # The next lease is attempt 2.
    assert q.lease(now=at(expiry + 1))[0]["attempt"] == 2


def test_an_expired_lease_does_not_count_against_the_ceiling(q: Queue) -> None:
    first = q.add(now=at(0))
    second = q.add(now=at(1))
    q.lease(now=at(2))
    q.refused(3, "sched", "lease", now=at(3))
    # Past the first lease's expiry the ceiling has room, while the entry stays leased
    # (reclaimable) until `sched reclaim`.
    assert [lease["id"] for lease in q.lease(now=at(400))] == [second]
    assert q.entry(first)["status"] == "leased"


def test_cancel_voids_a_lease_and_reset_wants_parked(q: Queue) -> None:
    entry_id = q.add(now=at(0))
    lease = q.lease(now=at(1))[0]["leaseId"]
    assert "not parked" in q.refused(1, "sched", "reset", entry_id, now=at(2))
    cancelled = q.ok("queue", "cancel", entry_id, now=at(2))
    assert (cancelled["status"], cancelled["lease"]) == ("cancelled", None)
    q.refused(1, "sched", "complete", entry_id, "--lease", lease, now=at(3))
    q.refused(1, "sched", "reset", entry_id, now=at(3))
    q.refused(3, "sched", "lease", now=at(3))
    q.refused(1, "sched", "reset", "01MB23Y70010GPA2PQX31XGT24")
    q.refused(2, "sched", "reset", "bogus")


# -- backoff and parking ---------------------------------------------------------------

def fail_once(q: Queue, entry_id: str, now: str) -> dict[str, Any]:
    lease = q.lease("--limit", "1", now=now)[0]
    assert lease["id"] == entry_id
    released: dict[str, Any] = q.ok("sched", "release", entry_id, "--lease", lease["leaseId"],
                                    "--failed", "--reason", "tests fail", now=now)
    return released


def test_backoff_doubles_until_the_cap(q: Queue) -> None:
    q.policy("--max-attempts", "8", "--backoff-cap-ms", "10000")
    entry_id = q.add(now=at(0))
    now = ms(at(1))
    delays = []
    for attempt in range(1, 8):
        released = fail_once(q, entry_id, at((now - ms(at(0))) / 1000))
        assert released["attempts"] == attempt
        assert released["status"] == "ready"
        eligible = ms(released["nextEligibleAt"])
        delays.append(eligible - now)
        # Not before its time: the plan says backoff and lease has nothing.
        early = at((eligible - 1 - ms(at(0))) / 1000)
        assert q.ok("sched", "plan", now=early)["skipped"] == [
            {"id": entry_id, "reason": "backoff"}]
        q.refused(3, "sched", "lease", now=early)
        now = eligible
    assert delays == [1000, 2000, 4000, 8000, 10000, 10000, 10000]
    parked = fail_once(q, entry_id, at((now - ms(at(0))) / 1000))
    assert (parked["status"], parked["attempts"], parked["nextEligibleAt"]) == ("parked", 8,
                                                                                 None)


def test_park_exactly_at_max_attempts_and_reset(q: Queue) -> None:
    entry_id = q.add(now=at(0))
    first = fail_once(q, entry_id, at(1))
    second = fail_once(q, entry_id, at(2))
    assert [first["status"], second["status"]] == ["ready", "ready"]
    assert [first["nextEligibleAt"], second["nextEligibleAt"]] == [at(2), at(4)]
    third = fail_once(q, entry_id, at(4))
    assert (third["status"], third["attempts"], third["jobStatus"]) == ("parked", 3, "error")
    assert third["parkedReason"] == "tests fail (attempt 3 of 3)"
    # A parked entry is never selected, however late.
    q.refused(3, "sched", "lease", now=at(10_000))
    q.refused(3, "queue", "pick", "--session", "any", now=at(10_000))
    assert q.ok("sched", "plan", now=at(10_000))["skippedCounts"]["parked"] == 1
    reset = q.ok("sched", "reset", entry_id, now=at(10_001))
    assert (reset["status"], reset["attempts"], reset["parkedReason"]) == ("ready", 0, None)
    assert q.lease(now=at(10_002))[0]["attempt"] == 1
    assert q.events()[-2]["data"] == {"previousAttempts": 3}


def test_an_expired_lease_parks_at_max_attempts(q: Queue) -> None:
    q.policy("--max-attempts", "1")
    entry_id = q.add(now=at(0))
    q.lease(now=at(0))
    reclaimed = q.ok("sched", "reclaim", now=at(300))["reclaimed"]
    assert reclaimed[0]["status"] == "parked"
    entry = q.entry(entry_id)
    assert entry["status"] == "parked"
    assert entry["parkedReason"].startswith("lease ")


def test_events_record_outcomes_not_the_policy(q: Queue, cli: Cli) -> None:
    """Changing the policy after a failure changes nothing already recorded."""
    entry_id = q.add(now=at(0))
    released = fail_once(q, entry_id, at(1))
    q.policy("--backoff-base-ms", "50000", "--max-attempts", "1")
    assert q.entry(entry_id)["nextEligibleAt"] == released["nextEligibleAt"]
    assert q.ok("registry", "rebuild") is not None
    assert q.entry(entry_id)["status"] == "ready"
    assert q.entry(entry_id)["nextEligibleAt"] == at(2)


# -- lease and plan --------------------------------------------------------------------

def test_lease_never_exceeds_max_concurrent(q: Queue) -> None:
    q.policy("--max-concurrent", "2")
    ids = [q.add("--priority", str(n), now=at(n)) for n in range(5)]
    granted = q.ok("sched", "lease", "--limit", "5", now=at(10))
    assert [lease["id"] for lease in granted["leases"]] == ids[:2]
    assert "2 of 2" in q.refused(3, "sched", "lease", now=at(11))
    q.ok("sched", "complete", ids[0], "--lease", granted["leases"][0]["leaseId"], now=at(12))
    assert [lease["id"] for lease in q.lease("--limit", "5", now=at(13))] == [ids[2]]


def test_lease_of_a_session(q: Queue) -> None:
    q.policy("--max-concurrent", "5")
    a = q.add("--session", "a", now=at(0))
    q.add("--session", "b", now=at(1))
    assert [lease["id"] for lease in q.lease("--session", "a", now=at(2))] == [a]
    q.refused(3, "sched", "lease", "--session", "a", now=at(3))
    assert q.entry(a)["lease"]["session"] == "a"


def test_plan_is_read_only_identical_and_capped(q: Queue, tmp_path: Path) -> None:
    q.policy("--max-concurrent", "3")
    lines = [{"workflow": "solve-issue", "prompt": f"t{n}", "priority": n} for n in range(30)]
    ids = q.ok("queue", "add", "--batch", str(q.batch(tmp_path / "b.jsonl", lines)),
               now=at(0))["ids"]
    leased = q.lease("--limit", "1", now=at(1))[0]
    parked = ids[1]
    q.ok("queue", "status", parked, "--set", "parked", now=at(1))
    q.ok("queue", "status", ids[2], "--set", "completed", now=at(1))
    fail_once(q, ids[3], at(1))
    before = q.cli.log_bytes()
    plan = q.ok("sched", "plan", now=at(1.5))
    assert q.ok("sched", "plan", now=at(1.5)) == plan
    assert q.cli.log_bytes() == before
    assert plan["now"] == at(1.5)
    assert plan["policy"]["maxConcurrent"] == 3
    assert (plan["active"], plan["available"]) == (1, 2)
    assert [lease["id"] for lease in plan["leases"]] == ids[4:6]
    assert len(plan["skipped"]) == 20
    assert plan["skipped"][:5] == [
        {"id": ids[0], "reason": "leased"}, {"id": parked, "reason": "parked"},
        {"id": ids[2], "reason": "terminal"}, {"id": ids[3], "reason": "backoff"},
        {"id": ids[6], "reason": "concurrency-ceiling"}]
    assert plan["skippedCounts"] == {"parked": 1, "terminal": 1, "leased": 1, "waiting": 0,
                                     "backoff": 1, "concurrency-ceiling": 24}
    assert leased["id"] == ids[0]
    everything = q.ok("sched", "plan", "--all", now=at(1.5))
    assert len(everything["skipped"]) == 28
    assert sum(everything["skippedCounts"].values()) == 28


# -- many processes at once ------------------------------------------------------------

WORKER = textwrap.dedent('''
    import json, random, sys, time
    from uwf.queue import sched
    from uwf.store import Store
    from uwf.errors import NothingToDo, UwfError
    from uwf.payload import to_payload

    home, out, start, quota, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), \\
        int(sys.argv[4]), int(sys.argv[5])
    # The sessions to lease as (one drawn per lease; "" leases from every pool).
    sessions = sys.argv[6].split(",") if len(sys.argv) > 6 else [""]
    rng = random.Random(seed)
    store = Store.open(home)
    while time.time() < start:
        time.sleep(0.001)
    # A quota of leases, not a time: a loaded machine slows the storm, never shrinks it
    # (the bound only stops a worker starved for minutes; the counts then fail).
    taken = 0
    with open(out, "w") as acks:
        while taken < quota and time.time() < start + 300:
            try:
                granted = sched.lease(store, rng.choice([1, 2]), rng.choice(sessions) or None)
            except NothingToDo:
                time.sleep(0.001)  # the ceiling is reached: give the lock to the holders
                continue
            taken += len(granted.leases)
            for lease in granted.leases:
                acks.write(json.dumps({"op": "lease", **to_payload(lease)}) + "\\n")
            acks.flush()
            time.sleep(rng.random() * 0.02)  # hold the leases a moment, as work would
            for lease in granted.leases:
                roll = rng.random()
                op = "complete" if roll < 0.4 else "release" if roll < 0.8 else "failed"
                try:
                    if op == "complete":
                        sched.complete(store, lease.id, lease.lease_id)
                    else:
                        sched.release(store, lease.id, lease.lease_id,
                                      failed=op == "failed")
                except UwfError as exc:
                    acks.write(json.dumps({"op": "refused", "error": exc.what}) + "\\n")
                    continue
                acks.write(json.dumps({"op": op, "id": lease.id,
                                       "leaseId": lease.lease_id}) + "\\n")
                acks.flush()
''')

def storm(cli: Cli, tmp_path: Path, *, processes: int, leases: int,
          sessions: str | None = None) -> list[dict[str, Any]]:
    """`processes` WORKER processes leasing at once until each holds `leases` leases (as
    `sessions`, a comma list, "" for every pool) on the store of `cli` (its UWF_HOME: a
    folder or a postgresql:// URL); every acknowledgement they wrote."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER, "utf-8")
    start = time.time() + 1.0
    workers = [subprocess.Popen(
        [sys.executable, str(script), cli.env["UWF_HOME"], str(tmp_path / f"acks{n}.jsonl"),
         str(start), str(leases), str(n), *([sessions] if sessions is not None else [])],
        env=cli.env, stderr=subprocess.PIPE, text=True) for n in range(processes)]
    for worker in workers:
        _, err = worker.communicate(timeout=400)
        assert worker.returncode == 0, err
    return [json.loads(line) for n in range(processes)
            for line in (tmp_path / f"acks{n}.jsonl").read_text("utf-8").splitlines()]


ENDS = {"queue.completed", "queue.released", "queue.reclaimed", "queue.cancelled",
        "queue.status_set", "queue.drained"}


@pytest.mark.parametrize("backend", ["folder", "postgres"])
def test_eight_processes_never_exceed_the_ceiling(cli: Cli, tmp_path: Path, backend: str,
                                                   request: pytest.FixtureRequest) -> None:
    """On a folder (one file lock) and on PostgreSQL (one advisory lock per section, each
    process its own connections): the ceiling holds, nothing is leased twice."""
    if backend == "postgres":
        cli = Cli(tmp_path / "unused", {**cli.env, "UWF_HOME": request.getfixturevalue("pg_url")})
    q = queue_on(cli)
    q.policy("--max-concurrent", "3", "--max-attempts", "1000", "--backoff-base-ms", "1",
             "--backoff-cap-ms", "1")
    lines = [{"workflow": "solve-issue", "prompt": f"task {n}"} for n in range(1500)]
    q.ok("queue", "add", "--batch", str(q.batch(tmp_path / "b.jsonl", lines)))
    acks = storm(cli, tmp_path, processes=8, leases=6)
    assert not [ack for ack in acks if ack["op"] == "refused"]
    leases_acked = [ack for ack in acks if ack["op"] == "lease"]
    assert len(leases_acked) > 30, "the workers leased too little to prove anything"

    # Replay the log: at every seq, the leases held (and not expired at that event's
    # time) are at most 3, and no entry is leased while it holds a lease.
    held: dict[str, tuple[str, int]] = {}
    seen: dict[str, set[tuple[str, str]]] = {}
    peak = 0
    for event in q.events():
        subject = event["subject"].removeprefix("queue/")
        data = event["data"]
        now = ms(event["ts"])
        if event["type"] == "queue.leased":
            current = held.get(subject)
            assert current is None or current[1] <= now, f"{subject} leased twice at once"
            held[subject] = (data["leaseId"], data["expiresAtMs"])
        elif event["type"] in ENDS:
            held.pop(subject, None)
        if event["type"].startswith("queue."):
            seen.setdefault(event["type"], set()).add((subject, data.get("leaseId", "")))
        active = sum(1 for _, expires in held.values() if expires > now)
        assert active <= 3, f"{active} active leases at seq {event['seq']}"
        peak = max(peak, active)
    assert peak == 3

    # Every acknowledged operation is in the log.
    kinds = {"lease": "queue.leased", "complete": "queue.completed",
             "release": "queue.released", "failed": "queue.released"}
    for ack in acks:
        assert (ack["id"], ack["leaseId"]) in seen[kinds[ack["op"]]], ack
    assert q.ok("log", "verify")["ok"] is True
    assert q.ok("registry", "verify")["ok"] is True


def test_processes_leasing_per_session_never_exceed_a_pool_or_the_cap(
        q: Queue, cli: Cli, tmp_path: Path) -> None:
    """Ceilings per session (a: 2, b: 1, the default pool: 2) under an overall cap of 4,
    six processes leasing as a, as b, or from every pool at once."""
    q.policy("--max-concurrent", "2", "--max-attempts", "1000", "--backoff-base-ms", "1",
             "--backoff-cap-ms", "1", "--max-total", "4")
    q.ok("sched", "policy", "set", "--session", "b", "--max-concurrent", "1")
    pools = ["a", "b", None]
    lines = [{"workflow": "solve-issue", "prompt": f"task {n}",
              **({"session": pools[n % 3]} if pools[n % 3] else {})} for n in range(900)]
    q.ok("queue", "add", "--batch", str(q.batch(tmp_path / "b.jsonl", lines)))
    acks = storm(cli, tmp_path, processes=6, leases=8, sessions="a,b,")
    assert not [ack for ack in acks if ack["op"] == "refused"]
    assert len([ack for ack in acks if ack["op"] == "lease"]) > 30

    ceilings = {"a": 2, "b": 1, None: 2}
    pool_of: dict[str, str | None] = {}
    held: dict[str, int] = {}
    peaks = dict.fromkeys(ceilings, 0)
    peak_total = 0
    for event in q.events():
        subject = event["subject"].removeprefix("queue/")
        now = ms(event["ts"])
        if event["type"] == "queue.added":
            pool_of[subject] = event["data"]["session"]
        elif event["type"] == "queue.leased":
            held[subject] = event["data"]["expiresAtMs"]
        elif event["type"] in ENDS:
            held.pop(subject, None)
        live = [subject for subject, expires in held.items() if expires > now]
        for pool, ceiling in ceilings.items():
            active = sum(1 for subject in live if pool_of[subject] == pool)
            assert active <= ceiling, f"{active} active in {pool} at seq {event['seq']}"
            peaks[pool] = max(peaks[pool], active)
        assert len(live) <= 4, f"{len(live)} active at seq {event['seq']}"
        peak_total = max(peak_total, len(live))
    # How far the processes overlapped depends on the machine's load (a loaded run saw
    # the default pool peak at 1): that each ceiling is reached, and no further, is shown
    # in one process (tests/unit/test_session_ceilings.py). Here: every pool was leased,
    # and none beyond its ceiling nor the cap at any instant (asserted above).
    assert all(peak >= 1 for peak in peaks.values()), peaks
    assert 1 <= peak_total <= 4
    assert q.ok("log", "verify")["ok"] is True
    assert q.ok("registry", "verify")["ok"] is True
