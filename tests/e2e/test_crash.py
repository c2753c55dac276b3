"""Crash safety on real files: SIGKILLed writers, torn tails and their repair.

Writers are real OS processes (the venv's python running a small script that
uses the public Python API) killed with SIGKILL; torn writes are also made by
hand, byte for byte, as a writer dying inside write(2) would leave them. What
must hold afterwards: every acknowledged write is in the views, `uwf log verify`
passes once a writer has repaired the tail, every repair is recorded as
`log.repaired`, and views rebuilt from the log print byte-identical output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE, Cli, Result

# Crash safety is about processes: what is killed is a real one (run_writer's, and a
# `Cli(..., process=True)` where the killed call is uwf's own); the commands that set
# up, tear and read the log around a kill run in-process (the same code, no start-up).

EXAMPLE_TEXT = EXAMPLE.read_text("utf-8")
PYTHON = sys.executable

# A writer: registers workflows forever, printing each name once its write has
# returned (that is, once it is acknowledged and durable).
#   single PREFIX: one `put_workflow` per name
#   batch PREFIX SIZE: one real workflow, then batches of SIZE registrations,
#                      each one `journal.write` (one append of many lines)
#   once NAME [DIE_IN FUNC WHEN]: one `put_workflow`; with DIE_IN, the process
#                      SIGKILLs itself at the `WHEN` (call|return) of FUNC in
#                      the uwf module file DIE_IN: a crash at a precise point.
#   bigwrite PREFIX DELAY: one real workflow, then one batch of ~20 MB; when
#                      that batch's write(2) starts, a thread SIGKILLs the
#                      process DELAY seconds later, so the kernel stops the
#                      write part way: a torn tail made for real.
WRITER = r'''
import os, signal, sys, threading, time
from pathlib import Path

mode, workdir, example = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
args = sys.argv[4:]


def _kill_inside_write(delay):
    def hook(frame, event, arg):
        if (event == "c_call" and getattr(arg, "__name__", "") == "write"
                and getattr(arg, "__module__", "") == "posix"):
            sys.setprofile(None)

            def killer():
                time.sleep(delay)
                os.kill(os.getpid(), signal.SIGKILL)

            threading.Thread(target=killer, daemon=True).start()

    sys.setprofile(hook)

if mode == "once" and len(args) > 1:
    die_file, die_func, die_when = args[1], args[2], args[3]

    def _hook(frame, event, arg):
        code = frame.f_code
        if (event == die_when and code.co_name == die_func
                and code.co_filename.endswith(die_file)):
            os.kill(os.getpid(), signal.SIGKILL)

from uwf.store import Store
from uwf.workflows.service import put_workflow
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome
from uwf.workflows.events import WorkflowRegistered

if mode == "once" and len(args) > 1:
    # After the imports (no uwf function runs while they load): a profile hook makes
    # every call that follows cost several times its own.
    sys.setprofile(_hook)

text = example.read_text("utf-8")
store = Store.open()


def register(name):
    path = workdir / f"{name}.yaml"
    path.write_text(text.replace("name: solve-issue", f"name: {name}", 1), "utf-8")
    result = put_workflow(store, path)
    sys.stdout.write(name + "\n")
    sys.stdout.flush()
    return result.workflow


if mode == "once":
    register(args[0])
elif mode == "single":
    for index in range(10**9):
        register(f"{args[0]}-{index}")
elif mode == "bigwrite":
    prefix, delay = args[0], float(args[1])
    hash_ = register(f"{prefix}-base")
    names = [f"{prefix}-{index}-" + "x" * 5000 for index in range(2000)]
    _kill_inside_write(delay)
    store.journal.write(lambda views: Outcome([
        NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_, None)) for name in names
    ]))
    sys.setprofile(None)
    sys.stdout.write("".join(name + "\n" for name in names))
    sys.stdout.flush()
    while True:
        time.sleep(1)
elif mode == "batch":
    prefix, size = args[0], int(args[1])
    hash_ = register(f"{prefix}-base")
    for round_ in range(10**9):
        names = [f"{prefix}-r{round_}-{index}" for index in range(size)]
        store.journal.write(lambda views: Outcome([
            NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_, None))
            for name in names
        ]))
        sys.stdout.write("".join(name + "\n" for name in names))
        sys.stdout.flush()
'''


# -- helpers -------------------------------------------------------------------

def workflow_file(directory: Path, name: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(EXAMPLE_TEXT.replace("name: solve-issue", f"name: {name}", 1), "utf-8")
    return path


def put(cli: Cli, directory: Path, name: str) -> dict[str, Any]:
    result = cli.run("workflow", "put", str(workflow_file(directory, name)))
    assert result.code == 0, result.err
    payload: dict[str, Any] = json.loads(result.out)
    return payload


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def segments(home: Path) -> list[Path]:
    return sorted((home / "events").glob("*.jsonl"))


def events(home: Path) -> list[dict[str, Any]]:
    """Every complete line of every segment, parsed."""
    found: list[dict[str, Any]] = []
    for segment in segments(home):
        for raw in segment.read_bytes().split(b"\n")[:-1]:
            found.append(json.loads(raw))
    return found


def listed(cli: Cli) -> Result:
    result = cli.run("workflow", "list")
    assert result.code == 0, result.err
    return result


def listed_names(cli: Cli) -> set[str]:
    return {entry["name"] for entry in json.loads(listed(cli).out)}


def assert_verify_ok(cli: Cli) -> dict[str, Any]:
    result = cli.run("log", "verify")
    report: dict[str, Any] = json.loads(result.out) if result.out else {}
    assert result.code == 0, result.out + result.err
    assert report.get("ok") is True, result.out
    return report


def assert_registry_ok(cli: Cli) -> None:
    result = cli.run("registry", "verify")
    assert result.code == 0, result.out + result.err
    assert json.loads(result.out)["ok"] is True


def assert_rebuild_identical(cli: Cli) -> None:
    """Views deleted and replayed print what the persisted ones printed."""
    before = listed(cli).out
    shutil.rmtree(cli.home / "views")
    assert listed(cli).out == before
    rebuilt = cli.run("registry", "rebuild")
    assert rebuilt.code == 0, rebuilt.err
    assert listed(cli).out == before


@dataclass(frozen=True)
class Tail:
    """What a writer must drop: bytes after the last complete batch of the log."""

    segment: str
    offset: int
    dropped: bytes


def unacknowledged_tail(home: Path) -> Tail | None:
    """The tail the protocol says was never acknowledged (computed independently).

    A last line without a newline, or a trailing batch [k, n] with k < n,
    going back to the start of that batch.
    """
    names = segments(home)
    if not names:
        return None
    last = names[-1]
    data = last.read_bytes()
    cut = data.rfind(b"\n") + 1
    lines = data[:cut].split(b"\n")[:-1]
    if lines:
        k, n = json.loads(lines[-1])["batch"]
        if k < n:
            cut -= sum(len(line) + 1 for line in lines[-k:])
    if cut == len(data):
        return None
    return Tail(last.name, cut, data[cut:])


def repairs(home: Path) -> list[dict[str, Any]]:
    return [event for event in events(home) if event["type"] == "log.repaired"]


def matches(repair: dict[str, Any], tail: Tail) -> bool:
    data = repair["data"]
    return (data["segment"], data["offset"], data["droppedBytes"], data["digest"]) == (
        tail.segment, tail.offset, len(tail.dropped), sha(tail.dropped)
    )


def batch_lines(
    home: Path, count: int, hash_: str, label: str
) -> tuple[str, list[bytes]]:
    """The lines a writer would append next: `count` registrations as one batch.

    Returns the segment holding the head (the caller moves to a new segment
    when that one is full) and the lines, each ending with a newline, chained.
    """
    all_events = events(home)
    # The last segment may be empty: a writer killed between creating it and
    # writing to it. The head is the last line of the last segment with lines.
    last_segment = [segment for segment in segments(home) if segment.stat().st_size][-1]
    last_raw = last_segment.read_bytes().split(b"\n")[-2]
    seq = all_events[-1]["seq"]
    prev = sha(last_raw)
    ts = all_events[-1]["ts"]
    lines: list[bytes] = []
    for index in range(count):
        name = f"{label}-{index}"
        line = json.dumps(
            {
                "seq": seq + index + 1,
                "id": "01M8AAEW6FF6Z3R3W24RKP" + f"{index:04d}",
                "ts": ts,
                "type": "workflow.registered",
                "subject": f"workflow/{name}",
                "batch": [index + 1, count],
                "data": {"name": name, "hash": hash_, "previous": None},
                "prev": prev,
            },
            separators=(",", ":"),
        ).encode()
        prev = sha(line)
        lines.append(line + b"\n")
    return last_segment.name, lines


def tear(home: Path, rng: random.Random, hash_: str, label: str, segment_bytes: int) -> int:
    """Append what a writer killed inside write(2) leaves: a prefix of its batch.

    Returns the number of bytes appended. The target segment is the one the
    writer would have used (a new one when the last is full).
    """
    count = rng.randint(1, 4)
    segment, lines = batch_lines(home, count, hash_, label)
    whole = b"".join(lines)
    if count > 1 and rng.random() < 0.5:
        keep = rng.randint(1, count - 1)  # whole lines, but an incomplete batch
        cut = sum(len(line) for line in lines[:keep])
    else:
        cut = rng.randint(1, len(whole) - 1)
        if whole[cut - 1:cut] == b"\n":
            cut -= 1  # a torn line, not a boundary
    path = home / "events" / segment
    if path.stat().st_size >= segment_bytes:
        seq = json.loads(lines[0])["seq"]
        path = home / "events" / f"{seq:020d}.jsonl"
    with path.open("ab") as handle:
        handle.write(whole[:cut])
    return cut


def write_script(tmp_path: Path) -> Path:
    script = tmp_path / "writer.py"
    script.write_text(WRITER, "utf-8")
    (tmp_path / "work").mkdir(exist_ok=True)
    return script


def run_writer(cli: Cli, tmp_path: Path, *args: str, env: dict[str, str] | None = None,
               ) -> subprocess.Popen[bytes]:
    script = tmp_path / "writer.py"
    return subprocess.Popen(
        [PYTHON, str(script), args[0], str(tmp_path / "work"), str(EXAMPLE), *args[1:]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or cli.env,
    )


def acknowledged(out: bytes) -> list[str]:
    """Names on complete stdout lines (a line is printed after its write returned)."""
    complete = out[: out.rfind(b"\n") + 1].decode("utf-8")
    return complete.splitlines()


# -- 2. SIGKILL at random points, 30 times -------------------------------------------

def test_sigkilled_writers_lose_no_acknowledged_write(cli: Cli, tmp_path: Path) -> None:
    started = time.monotonic()
    rng = random.Random(0x5EED_CAFE)
    segment_bytes = 96 * 1024  # small segments, so crashes also meet rotation
    env = dict(cli.env, UWF_SEGMENT_BYTES=str(segment_bytes), UWF_DURABILITY="fsync")
    cli = Cli(cli.home, env)  # the reads around the kills; the killed writers are processes
    write_script(tmp_path)
    base = put(cli, tmp_path, "base")["workflow"]

    acked: set[str] = set()
    # One acknowledged batch larger than a segment, before any kill: every later write
    # starts a new segment, so rotation is met however the kills happen to fall.
    filler_writer = tmp_path / "filler.py"
    filler_writer.write_text(BATCH_WRITER, "utf-8")
    filler = [f"fill-{index}" for index in range(800)]
    done = subprocess.run([PYTHON, str(filler_writer), base, *filler], env=env,
                          capture_output=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    acked.update(filler)
    torn_names: set[str] = set()
    observed: list[Tail] = []
    tears = natural_tears = 0
    # 30 rounds (50 before: the same three writers, killed at random moments, again):
    # each kind is still killed 3 times or more, and a tear is made every third round.
    for round_ in range(30):
        tail = unacknowledged_tail(cli.home)
        if tail is not None and tail not in observed:
            observed.append(tail)
        if round_ % 10 == 5:  # killed inside a 20 MB write(2)
            proc = run_writer(cli, tmp_path, "bigwrite", f"k{round_}",
                              f"{rng.uniform(0.0005, 0.004):.4f}", env=env)
            # It kills itself inside the write: wait for that, however slow the
            # machine (a kill from here after a fixed delay may come before the write).
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
            delay = 0.0
        elif round_ % 5 == 2:
            proc = run_writer(cli, tmp_path, "batch", f"k{round_}", "2500", env=env)
            delay = rng.uniform(0.05, 0.7)
        else:
            proc = run_writer(cli, tmp_path, "single", f"k{round_}", env=env)
            delay = rng.uniform(0.0, 0.35)
        time.sleep(delay)
        exited = proc.poll()
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert exited in (None, -signal.SIGKILL), (
            f"round {round_}: the writer died by itself (exit {exited}): {err.decode()}"
        )
        assert proc.returncode == -signal.SIGKILL
        acked.update(acknowledged(out))

        after = unacknowledged_tail(cli.home)
        if after is not None and after not in observed:
            natural_tears += 1  # a kill landed inside write(2)
            observed.append(after)
        elif round_ % 3 == 1:
            if after is not None:
                # A tail no writer got to repair: on a loaded machine the kills land
                # before the lock is taken, round after round. Repair it now (a writer
                # let run to its end), so a tear is made every third round whatever
                # the load, and the count below never depends on timing.
                fixer = run_writer(cli, tmp_path, "once", f"fix{round_}", env=env)
                fixed_out, fixed_err = fixer.communicate(timeout=60)
                assert fixer.returncode == 0, fixed_err.decode()
                acked.update(acknowledged(fixed_out))
                assert unacknowledged_tail(cli.home) is None
            label = f"torn{round_}"
            tear(cli.home, rng, base, label, segment_bytes)
            tears += 1
            torn_names.update(f"{label}-{index}" for index in range(4))
            tail = unacknowledged_tail(cli.home)
            assert tail is not None
            observed.append(tail)
        if round_ % 10 == 9:
            missing = acked - listed_names(cli)
            assert not missing, f"round {round_}: acknowledged but not listed: {sorted(missing)}"

    # A last writer repairs whatever tail the last kill or tear left.
    tail = unacknowledged_tail(cli.home)
    if tail is not None and tail not in observed:
        observed.append(tail)
    final = run_writer(cli, tmp_path, "once", "final", env=env)
    out, err = final.communicate(timeout=30)
    assert final.returncode == 0, err.decode()
    acked.update(acknowledged(out))
    assert unacknowledged_tail(cli.home) is None

    report = assert_verify_ok(cli)
    all_events = events(cli.home)
    assert [event["seq"] for event in all_events] == list(range(1, len(all_events) + 1))
    assert report["events"] == len(all_events)
    assert report["segments"] == len(segments(cli.home)) > 1, "rotation was not exercised"
    for segment in segments(cli.home):
        first = json.loads(segment.read_bytes().split(b"\n", 1)[0])
        assert segment.name == f"{first['seq']:020d}.jsonl"

    names = listed_names(cli)
    assert not acked - names, f"acknowledged but lost: {sorted(acked - names)}"
    assert not torn_names & names, f"torn, never acknowledged: {sorted(torn_names & names)}"
    assert_registry_ok(cli)

    # Every repair dropped exactly a tail that was there, and says so.
    recorded = repairs(cli.home)
    # Simulated tears fill the rounds whose kill left no tail: how many depends on how
    # many kills landed inside write(2), so the two are counted together.
    assert tears + natural_tears >= 10, (tears, natural_tears)
    assert recorded, "no log.repaired event after torn tails"
    for repair in recorded:
        assert any(matches(repair, tail) for tail in observed), repair
    assert natural_tears >= 1, "no kill landed inside write(2)"
    # ... and every tail that was there is recorded exactly once, even when its
    # writer was killed between cutting it and recording it.
    for tail in observed:
        found = [repair for repair in recorded if matches(repair, tail)]
        assert len(found) == 1, (tail.segment, tail.offset, len(tail.dropped), found)
    assert len(recorded) == len(observed)
    assert_rebuild_identical(cli)
    elapsed = time.monotonic() - started
    print(f"\ncrash test: {len(acked)} acknowledged, {len(all_events)} events, "
          f"{len(segments(cli.home))} segments, {tears} simulated tears, {natural_tears} "
          f"torn by SIGKILL, {len(recorded)} repairs, {elapsed:.1f}s")


# -- 3. torn tails, explicitly ---------------------------------------------------------

BATCH_WRITER = r'''
import sys
from uwf.store import Store
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome
from uwf.workflows.events import WorkflowRegistered

hash_, names = sys.argv[1], sys.argv[2:]
Store.open().journal.write(lambda views: Outcome([
    NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_, None)) for name in names
]))
'''


def snapshot_views(home: Path, into: Path) -> None:
    if (home / "views").exists():
        shutil.copytree(home / "views", into)


def restore_views(home: Path, saved: Path) -> None:
    """Put back the views as they were before a write: as if the writer died
    after its append and before its views transaction."""
    shutil.rmtree(home / "views", ignore_errors=True)
    if saved.exists():
        shutil.copytree(saved, home / "views")


@pytest.mark.parametrize(
    ("where", "keep", "torn"),
    [
        # the first batch of a store: store.created + workflow.registered, [1,2] [2,2]
        ("first", 1, True),    # line 1 whole, line 2 half written, no newline
        ("first", 1, False),   # line 1 only: the batch has 1 of 2 lines
        ("first", 0, True),    # half of line 1
        # a later batch of 3 registrations
        ("later", 2, True),    # lines 1-2 whole, line 3 torn
        ("later", 2, False),   # lines 1-2 only: the batch has 2 of 3 lines
        ("later", 1, False),   # line 1 only
        ("later", 0, True),    # half of line 1
        # a later single-event batch
        ("single", 0, True),   # half of its only line
    ],
    ids=["first-batch-torn-line-2", "first-batch-1-of-2", "first-batch-torn-line-1",
         "later-batch-torn-line-3", "later-batch-2-of-3", "later-batch-1-of-3",
         "later-batch-torn-line-1", "single-torn-line"],
)
def test_torn_tail_is_ignored_reported_and_repaired(
    cli: Cli, tmp_path: Path, where: str, keep: int, torn: bool
) -> None:
    writer = tmp_path / "batch_writer.py"
    writer.write_text(BATCH_WRITER, "utf-8")
    if where != "first":
        hash_ = put(cli, tmp_path, "solve-issue")["workflow"]
        put(cli, tmp_path, "wf-1")
    before_list = listed(cli).out
    before_log = cli.log_bytes()
    saved = tmp_path / "views-before"
    snapshot_views(cli.home, saved)

    # The write that will be torn, made for real.
    if where == "first":
        put(cli, tmp_path, "solve-issue")
        lost = ["solve-issue"]
    elif where == "single":
        put(cli, tmp_path, "wf-2")
        lost = ["wf-2"]
    else:
        lost = ["b-0", "b-1", "b-2"]
        done = subprocess.run([PYTHON, str(writer), hash_, *lost], env=cli.env,
                              capture_output=True, check=False, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
    segment = segments(cli.home)[-1]
    full = segment.read_bytes()
    assert full.startswith(before_log)
    new = full[len(before_log):]
    new_lines = new.split(b"\n")[:-1]
    assert len(new_lines) == {"first": 2, "later": 3, "single": 1}[where]
    kept = b"".join(line + b"\n" for line in new_lines[:keep])
    if torn:
        kept += new_lines[keep][: len(new_lines[keep]) // 2]
    torn_bytes = kept  # what is left of the write after the old log: never acknowledged
    segment.write_bytes(before_log + torn_bytes)
    restore_views(cli.home, saved)

    # Readers ignore the torn tail: the state before the write.
    assert listed(cli).out == before_list
    for name in lost:
        assert cli.run("workflow", "show", name).code == 1

    # verify reports it and exits 1.
    result = cli.run("log", "verify")
    assert result.code == 1, result.out
    problems = json.loads(result.out)["problems"]
    texts = [problem["problem"] for problem in problems]
    if torn:
        assert any(text.startswith("torn tail:") and f"{len(new_lines[keep]) // 2} bytes" in text
                   for text in texts), problems
    if keep:
        n = len(new_lines)
        assert f"the last batch has {keep} of {n} lines" in texts, problems
    assert all(problem["seq"] is None or problem["seq"] > (0 if where == "first" else 3)
               for problem in problems), problems

    # The next write truncates it and records what it dropped.
    put(cli, tmp_path, "next")
    after = events(cli.home)
    recorded = [event for event in after if event["type"] == "log.repaired"]
    assert len(recorded) == 1, after
    repaired = recorded[0]
    assert repaired["data"]["segment"] == segment.name
    assert repaired["data"]["offset"] == len(before_log)
    assert repaired["data"]["droppedBytes"] == len(torn_bytes)
    assert repaired["data"]["droppedLines"] == keep + (1 if torn else 0)
    assert repaired["data"]["digest"] == sha(torn_bytes)
    assert after[-1]["type"] == "workflow.registered"
    assert after[-1]["data"]["name"] == "next"
    assert cli.log_bytes().startswith(before_log)
    assert after[0]["type"] == "store.created", (
        "a repaired store lost its store.created event: " + json.dumps(after[0])
    )

    assert_verify_ok(cli)
    assert_registry_ok(cli)
    names = listed_names(cli)
    assert "next" in names
    assert not set(lost) & names
    assert_rebuild_identical(cli)


# -- crashes at precise points -----------------------------------------------------

@pytest.mark.parametrize(
    "point",
    [
        # after the CAS nodes, before the lock: nothing in the log
        ("uwf/engine/segments.py", "take", "call", False, False),
        # a new segment created (and its folder synced), nothing written to it yet
        ("uwf/engine/segments.py", "_open", "return", False, True),
        # after the append's write, before the views transaction (and the fsync)
        ("uwf/engine/segments.py", "append", "return", True, False),
        # inside the views transaction, before COMMIT
        ("uwf/engine/viewrows.py", "write_rows", "return", True, False),
        # the lock let go, the append not yet fsynced (the next writer's fsync covers it)
        ("uwf/engine/filelog.py", "settle", "call", True, False),
    ],
    ids=["before-lock", "empty-new-segment", "after-append", "inside-views-transaction",
         "after-release-before-fsync"],
)
def test_kill_at_a_precise_point(
    cli: Cli, tmp_path: Path, point: tuple[str, str, str, bool, bool]
) -> None:
    """A writer SIGKILLed at a chosen point: nothing acknowledged, nothing torn,
    and the store reads, verifies and takes the next write."""
    die_file, die_func, die_when, durable, rotate = point
    if rotate:  # every segment is full: each write starts a new one
        cli = Cli(cli.home, dict(cli.env, UWF_SEGMENT_BYTES="1"))
    write_script(tmp_path)
    put(cli, tmp_path, "solve-issue")
    before = listed(cli).out
    count = len(segments(cli.home))
    proc = run_writer(cli, tmp_path, "once", "victim", die_file, die_func, die_when,
                      env=cli.env)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    assert acknowledged(out) == []
    assert unacknowledged_tail(cli.home) is None
    if rotate:
        assert len(segments(cli.home)) == count + 1
        assert segments(cli.home)[-1].stat().st_size == 0

    names = listed_names(cli)
    assert ("victim" in names) is durable  # durable but unacknowledged may show
    if not durable:
        assert listed(cli).out == before
    assert_verify_ok(cli)
    assert_registry_ok(cli)
    put(cli, tmp_path, "after")
    assert_verify_ok(cli)
    assert_registry_ok(cli)
    assert_rebuild_identical(cli)


@pytest.mark.parametrize(
    "point",
    [
        # truncated (the tail ends inside a segment), then killed before the record
        ("truncate", "return", False),
        # removed (the tail is a new segment of its own), then killed before the record
        ("remove", "return", True),
        # the record appended (the first append), then killed before anything else
        ("append", "return", False),
    ],
    ids=["after-truncate", "after-remove", "after-record"],
)
def test_kill_during_repair_records_it_exactly_once(
    cli: Cli, tmp_path: Path, point: tuple[str, str, bool]
) -> None:
    """Every truncation of the log is recorded once, even if its writer dies mid-repair.

    A writer that truncated a torn tail and was killed before appending its
    `log.repaired` must not leave the drop unrecorded; one killed right after
    appending it must not get it recorded twice.
    """
    die_func, die_when, new_segment = point
    env = dict(cli.env, UWF_SEGMENT_BYTES="1") if new_segment else cli.env
    cli = Cli(cli.home, env)
    write_script(tmp_path)
    base = put(cli, tmp_path, "solve-issue")["workflow"]
    put(cli, tmp_path, "wf-1")
    segment, lines = batch_lines(cli.home, 3, base, "torn")
    torn = lines[0] + lines[1][:30]
    if new_segment:  # every segment is full: the torn batch started a new one
        segment = f"{json.loads(lines[0])['seq']:020d}.jsonl"
    with (cli.home / "events" / segment).open("ab") as handle:
        handle.write(torn)
    tail = unacknowledged_tail(cli.home)
    assert tail is not None
    assert tail.dropped == torn
    assert (tail.offset == 0) is new_segment

    proc = run_writer(cli, tmp_path, "once", "victim", "uwf/engine/segments.py", die_func,
                      die_when, env=env)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    assert acknowledged(out) == []
    assert unacknowledged_tail(cli.home) is None  # the truncation itself happened

    put(cli, tmp_path, "after")
    put(cli, tmp_path, "after-2")
    assert_verify_ok(cli)
    assert_registry_ok(cli)
    recorded = [repair for repair in repairs(cli.home) if matches(repair, tail)]
    assert recorded, (
        f"the {len(torn)} bytes dropped at offset {tail.offset} of {tail.segment} "
        f"are not recorded by any log.repaired event: {repairs(cli.home)}"
    )
    assert len(recorded) == 1, f"one drop recorded {len(recorded)} times: {recorded}"
    assert len(repairs(cli.home)) == 1
    names = listed_names(cli)
    assert {"after", "after-2"} <= names
    assert "victim" not in names
    assert not {name for name in names if name.startswith("torn")}


def test_lock_is_released_when_its_holder_is_killed(cli: Cli, tmp_path: Path) -> None:
    """A writer SIGKILLed while holding the lock does not block the next one."""
    write_script(tmp_path)
    put(cli, tmp_path, "solve-issue")
    env = dict(cli.env, UWF_LOCK_TIMEOUT="2")
    proc = run_writer(cli, tmp_path, "once", "victim", "uwf/engine/filelog.py", "recover",
                      "call", env=env)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # With UWF_LOCK_TIMEOUT=2, a lock still held would make this put fail as busy.
    result = Cli(cli.home, env).run("workflow", "put", str(workflow_file(tmp_path, "next")))
    assert result.code == 0, result.err
    assert os.path.exists(cli.home / "lock")
    assert_verify_ok(cli)


def test_sigkill_inside_write_leaves_a_real_torn_tail(cli: Cli, tmp_path: Path) -> None:
    """The kernel stops a 20 MB write(2) part way when SIGKILL arrives: a real
    torn tail, which readers ignore, verify reports and the next writer drops."""
    write_script(tmp_path)
    put(cli, tmp_path, "solve-issue")
    tail: Tail | None = None
    for attempt, delay in enumerate(("0.002", "0.001", "0.0005", "0.0002", "0")):
        before = listed_names(cli)
        proc = run_writer(cli, tmp_path, "bigwrite", f"big{attempt}", delay)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, err.decode()
        tail = unacknowledged_tail(cli.home)
        if tail is not None:
            assert acknowledged(out) == [f"big{attempt}-base"]
            break  # else the write completed before the kill: try a shorter delay
    assert tail is not None, "no kill landed inside write(2)"
    assert len(tail.dropped) > 4096
    assert listed_names(cli) == before | {f"big{attempt}-base"}

    result = cli.run("log", "verify")
    assert result.code == 1
    texts = [problem["problem"] for problem in json.loads(result.out)["problems"]]
    assert any(text.startswith(("torn tail:", "the last batch has")) for text in texts), texts

    put(cli, tmp_path, "next")
    recorded = repairs(cli.home)
    assert len(recorded) == 1
    assert matches(recorded[0], tail), (recorded[0], tail.segment, tail.offset)
    assert_verify_ok(cli)
    assert_registry_ok(cli)
    assert_rebuild_identical(cli)
