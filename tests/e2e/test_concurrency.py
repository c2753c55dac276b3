"""Many OS processes writing and reading one store at once, with the real CLI.

Eight driver processes each run `uwf workflow put` (uwf's `main`, called in the
driver's own process, one command after another) on their own workflow files
(plus contested names and one file they all share) while reader processes
list the workflows in a loop. Afterwards the log must be contiguous and verify,
no registration may be lost or doubled, each name's `previous` chain must be
unbroken, and views replayed from the log must equal the persisted ones.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.conftest import BIN, EXAMPLE, Cli

# Concurrency across processes: the racers (drivers, readers, the deleter, the `uwf`
# processes of the absent-views race) are real processes; the commands that check the
# store after a race (or set it up before) run in this process, the same code.

EXAMPLE_TEXT = EXAMPLE.read_text("utf-8")
PYTHON = sys.executable
WRITERS = 8
OWN = 3  # distinct workflows per writer (6 before: the same race, twice as many times)
RACES = 2  # names every writer registers with its own content

# Waits for the start signal, then runs `uwf workflow put` on each file in turn (uwf's
# main in this process: the process is one writer, its commands one after another),
# printing one JSON line per put: the file, the exit code, stdout and stderr.
UWF_IN_THIS_PROCESS = r'''
import contextlib, io, json, os, sys, time
from uwf.cli.main import main

def uwf(*args):
    out, err = (io.TextIOWrapper(io.BytesIO(), "utf-8", write_through=True) for _ in "12")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.buffer.getvalue().decode(), err.buffer.getvalue().decode()
'''
DRIVER = UWF_IN_THIS_PROCESS + r'''
go, ready, files = sys.argv[1], sys.argv[2], sys.argv[3:]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
for path in files:
    code, out, err = uwf("workflow", "put", path)
    print(json.dumps({"file": path, "code": code, "out": out, "err": err}), flush=True)
'''

def wait_exists(path: Path, seconds: float = 60.0) -> None:
    """Until `path` exists: a process's signal that it is ready."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)


# Lists the workflows in a loop until told to stop; one JSON line per read.
READER = UWF_IN_THIS_PROCESS + r'''
go, stop, ready = sys.argv[1], sys.argv[2], sys.argv[3]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
while not os.path.exists(stop):
    code, out, err = uwf("workflow", "list")
    names = [entry["name"] for entry in json.loads(out)] if code == 0 else []
    print(json.dumps({"code": code, "names": names, "err": err}), flush=True)
    time.sleep(0.05)  # a reader among the writers, not one that starves them
'''


def workflow_file(directory: Path, name: str, description: str, tag: str) -> Path:
    text = EXAMPLE_TEXT.replace("name: solve-issue", f"name: {name}", 1).replace(
        "description: End-to-end issue resolution", f"description: {description}", 1
    )
    assert f"name: {name}" in text
    assert f"description: {description}" in text
    path = directory / f"{name}--{tag}.yaml"
    path.write_text(text, "utf-8")
    return path


def events(home: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for segment in sorted((home / "events").glob("*.jsonl")):
        data = segment.read_bytes()
        assert data.endswith(b"\n"), f"{segment.name} ends with a torn line"
        found.extend(json.loads(raw) for raw in data.split(b"\n")[:-1])
    return found


def plan(directory: Path, rng: random.Random) -> tuple[list[list[Path]], Path]:
    """Each writer's files, in a shuffled order; and the file they all share."""
    shared = workflow_file(directory, "shared", "the same for everyone", "shared")
    plans: list[list[Path]] = []
    for writer in range(WRITERS):
        own = [workflow_file(directory, f"p{writer}-w{j}", f"by p{writer}", "v1")
               for j in range(OWN)]
        races = [workflow_file(directory, f"race-{r}", f"race entry of p{writer}", f"p{writer}")
                 for r in range(RACES)]
        files = [*own[1:], *races, shared]
        rng.shuffle(files)
        # p{writer}-w0 is registered, then re-registered with new content.
        second = workflow_file(directory, f"p{writer}-w0", f"by p{writer}, second", "v2")
        files = [own[0], *files[:4], second, *files[4:]]
        plans.append(files)
    return plans, shared


def test_eight_processes_register_at_once(cli: Cli, tmp_path: Path) -> None:
    files_dir = tmp_path / "files"
    files_dir.mkdir()
    plans, shared = plan(files_dir, random.Random(8))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, "utf-8")
    reader = tmp_path / "reader.py"
    reader.write_text(READER, "utf-8")
    go, stop = tmp_path / "go", tmp_path / "stop"

    writers = [
        subprocess.Popen([PYTHON, str(driver), str(go), str(tmp_path / f"ready-w{index}"),
                          *map(str, files)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env)
        for index, files in enumerate(plans)
    ]
    readers = [
        subprocess.Popen([PYTHON, str(reader), str(go), str(stop),
                          str(tmp_path / f"ready-r{index}")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env)
        for index in range(2)
    ]
    for index in range(len(plans)):  # every driver is up and polling for `go`
        wait_exists(tmp_path / f"ready-w{index}")
    for index in range(2):
        wait_exists(tmp_path / f"ready-r{index}")
    go.touch()
    results: list[dict[str, Any]] = []
    for proc in writers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        results.extend(json.loads(line) for line in out.decode().splitlines())
    stop.touch()
    reads: list[list[dict[str, Any]]] = []
    for proc in readers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        reads.append([json.loads(line) for line in out.decode().splitlines()])

    # Every put succeeded and named its workflow.
    failed = [result for result in results if result["code"] != 0]
    assert not failed, failed
    assert len(results) == sum(len(files) for files in plans)
    hash_of: dict[str, str] = {}
    for result in results:
        payload = json.loads(result["out"])
        hash_of[result["file"]] = payload["workflow"]
        assert Path(result["file"]).name.startswith(payload["name"] + "--")
    distinct = {(Path(file).name.split("--")[0], hash_) for file, hash_ in hash_of.items()}
    assert len({hash_of[str(shared)]}) == 1

    # The log: contiguous, verified, one event per distinct registration.
    log = events(cli.home)
    assert [event["seq"] for event in log] == list(range(1, len(log) + 1))
    assert log[0]["type"] == "store.created"
    assert sum(event["type"] == "store.created" for event in log) == 1
    registered = [event for event in log if event["type"] == "workflow.registered"]
    assert len(log) == len(registered) + 1
    assert len(registered) == len(distinct) == WRITERS * (OWN + 1 + RACES) + 1
    assert {(e["data"]["name"], e["data"]["hash"]) for e in registered} == distinct
    verified = cli.run("log", "verify")
    assert verified.code == 0, verified.out + verified.err
    report = json.loads(verified.out)
    assert report["ok"] is True
    assert report["events"] == len(log)

    # Each name's history is a chain: previous = the hash it pointed at before.
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in registered:
        by_name[event["data"]["name"]].append(event)
    for name, history in by_name.items():
        previous = None
        for event in history:
            assert event["data"]["previous"] == previous, (name, history)
            previous = event["data"]["hash"]

    # The views: every name, pointing at its last registration.
    listed = cli.run("workflow", "list")
    assert listed.code == 0, listed.err
    entries = {entry["name"]: entry for entry in json.loads(listed.out)}
    assert set(entries) == set(by_name)
    assert len(entries) == WRITERS * OWN + RACES + 1
    for name, history in by_name.items():
        assert entries[name]["workflow"] == history[-1]["data"]["hash"]
        assert entries[name]["versions"] == len(history)
    for writer in range(WRITERS):
        assert entries[f"p{writer}-w0"]["versions"] == 2
        second = files_dir / f"p{writer}-w0--v2.yaml"
        assert entries[f"p{writer}-w0"]["workflow"] == hash_of[str(second)]
    for race in range(RACES):
        assert entries[f"race-{race}"]["versions"] == WRITERS
    assert entries["shared"]["versions"] == 1

    # Concurrent readers always succeeded and never saw a name disappear.
    for stream in reads:
        assert stream, "a reader never got to read"
        assert all(read["code"] == 0 for read in stream), [r for r in stream if r["code"]]
        seen: set[str] = set()
        for read in stream:
            names = set(read["names"])
            assert seen <= names, f"a reader lost {sorted(seen - names)}"
            assert names <= set(entries)
            seen = names

    # Views replayed from the log equal the persisted ones.
    checked = cli.run("registry", "verify")
    assert checked.code == 0, checked.out + checked.err
    persisted = listed.out
    rebuilt = cli.run("registry", "rebuild")
    assert rebuilt.code == 0, rebuilt.err
    assert cli.run("workflow", "list").out == persisted
    shutil.rmtree(cli.home / "views")
    assert cli.run("workflow", "list").out == persisted
    assert cli.run("registry", "verify").code == 0


def test_concurrent_rebuilds_of_absent_views(cli: Cli, tmp_path: Path) -> None:
    """Views deleted, then writers and readers start at once: each of them may
    rebuild the views; all succeed and the result equals a replay."""
    files_dir = tmp_path / "files"
    files_dir.mkdir()
    for j in range(5):
        put = cli.run("workflow", "put", str(workflow_file(files_dir, f"seed-{j}", "seed", "v1")))
        assert put.code == 0, put.err
    uwf = str(BIN / "uwf")
    expected: set[str] = {f"seed-{j}" for j in range(5)}
    for round_ in range(3):  # 5 before: each round is the same race again
        shutil.rmtree(cli.home / "views", ignore_errors=True)
        commands = [
            [uwf, "workflow", "put",
             str(workflow_file(files_dir, f"r{round_}-{k}", f"round {round_}", "v1"))]
            for k in range(3)
        ] + [[uwf, "workflow", "list"] for _ in range(3)]
        procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=cli.env) for command in commands]
        for command, proc in zip(commands, procs, strict=True):
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, f"round {round_}: {command[1:]} -> {err.decode()}"
            if command[2] == "list":
                names = {entry["name"] for entry in json.loads(out)}
                assert expected <= names <= expected | {f"r{round_}-{k}" for k in range(3)}
        expected |= {f"r{round_}-{k}" for k in range(3)}
        listed = cli.run("workflow", "list")
        assert {entry["name"] for entry in json.loads(listed.out)} == expected
    verified = cli.run("log", "verify")
    assert verified.code == 0, verified.out
    checked = cli.run("registry", "verify")
    assert checked.code == 0, checked.out
    persisted = cli.run("workflow", "list").out
    assert cli.run("registry", "rebuild").code == 0
    assert cli.run("workflow", "list").out == persisted


# Deletes the store's views folder again and again until told to stop (the file `stop`
# appears) or after `rounds` deletions: a person clearing the cache while commands run.
DELETER = r'''
import os, shutil, sys
views, ready, stop, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
open(ready, "w").close()
done = 0
while done < rounds and not os.path.exists(stop):
    shutil.rmtree(views, ignore_errors=True)
    done += 1
print(done)
'''


def test_writers_rebuild_views_deleted_under_them(cli: Cli, tmp_path: Path) -> None:
    """Issue 32: while another process deletes `views/` in a loop, 8 of 77 `thread
    start` failed "disk I/O error; check the disk and permissions" (nothing written).
    The views are a cache: a file deleted while a command opens it is opened again,
    new, and folded from the log. Every start succeeds, and the log and views agree."""
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    deleter = subprocess.Popen([PYTHON, "-c", DELETER, str(cli.home / "views"), str(ready),
                                str(stop), "1000000"], stdout=subprocess.PIPE, text=True)
    starter = Cli(cli.home, cli.env)  # in this process: the deleter is the other one
    try:
        while not ready.exists() and deleter.poll() is None:
            time.sleep(0.01)
        results = [starter.run("thread", "start", "solve-issue", "-p", f"task {i}")
                   for i in range(24)]
    finally:
        stop.touch()
        out, _ = deleter.communicate(timeout=60)
    assert int(out) > 0  # it deleted while the starts ran
    failed = [result for result in results if result.code != 0]
    assert failed == [], failed
    threads = {json.loads(result.out)["thread"] for result in results}
    assert len(threads) == 24
    assert cli.run("log", "verify").code == 0
    verified = cli.run("registry", "verify")
    assert verified.code == 0, verified
    listed = json.loads(cli.run("thread", "list", "--json").out)
    assert len(listed) == 24
