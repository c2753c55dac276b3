"""`uwf thread list` never shows a thread whose head node is damaged as healthy
(docs/threads.md#uwf-thread-list): as `thread show` fails closed on such a thread, the
list shows its `status` as `missing` (the node is not in the CAS) or `corrupt` (it does
not hash to its name) with no `currentRole`, says so in one line on stderr and exits 1,
and still lists every other thread as it is."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli
from tests.threadkit import make_kit
from uwf.store import Store


def node_file(home: Path, hash_: str) -> Path:
    [path] = list((home / "cas").rglob(f"{hash_}.json"))
    return path


def test_a_damaged_head_is_listed_as_such_and_the_list_fails_closed(cli: Cli, tmp_path: Path
                                                                    ) -> None:
    kit = make_kit(cli, tmp_path)
    cli.env["UWF_NODES"] = "loose"  # the older layout: loose node files
    kit.put_workflow()
    missing, healthy, corrupt = (kit.start(prompt=p) for p in ("one", "two", "three"))
    head = kit.ok("thread", "step", missing)["head"]
    kit.ok("thread", "step", healthy)
    start = kit.show(corrupt)["head"]  # no step yet: the head is the StartNode
    ended = kit.start(prompt="four")
    ended_head = kit.ok("thread", "run", ended)["head"]
    before = {row["thread"]: row for row in kit.ok("thread", "list", "--all")}

    node_file(cli.home, head).unlink()
    damaged = node_file(cli.home, start)
    damaged.write_bytes(damaged.read_bytes().replace(b"three", b"THREE"))
    node_file(cli.home, ended_head).unlink()
    log = cli.log_bytes()

    result = kit.uwf("thread", "list")
    assert result.code == 1, result
    rows = json.loads(result.out)
    assert [(row["thread"], row["status"], row["currentRole"]) for row in rows] == [
        (missing, "missing", None), (healthy, "idle", before[healthy]["currentRole"]),
        (corrupt, "corrupt", None)]
    assert before[healthy]["currentRole"] == "developer"
    [line] = result.err.splitlines()
    assert line == (f"uwf: error: thread {missing}'s head {head} is missing from the CAS (and "
                    "1 more thread shown as missing or corrupt); restore that node from a "
                    "backup (`json-cas verify --all` lists what else is damaged), or kill the "
                    "thread")
    # thread show agrees on each.
    assert kit.uwf("thread", "show", missing).code == 1
    assert kit.uwf("thread", "show", corrupt).code == 1
    assert kit.uwf("thread", "show", healthy).code == 0

    # An ended thread's head is checked too (--all), and a page without damage is fine.
    everything = kit.uwf("thread", "list", "--all")
    assert everything.code == 1
    shown = {row["thread"]: row["status"] for row in json.loads(everything.out)}
    assert shown == {missing: "missing", healthy: "idle", corrupt: "corrupt",
                     ended: "missing"}
    assert "and 2 more threads" in everything.err
    page = kit.uwf("thread", "list", "--offset", "1", "--limit", "1")
    assert (page.code, page.err) == (0, "")
    assert [row["thread"] for row in json.loads(page.out)] == [healthy]
    assert cli.log_bytes() == log  # a list writes nothing

    # From Python: the same rows, and the same line.
    from uwf.threads.service import damage_line, list_threads

    store = Store.open(cli.home)
    try:
        listed = list_threads(store)
        assert [row.status for row in listed] == ["missing", "idle", "corrupt"]
        assert damage_line(listed) == line.removeprefix("uwf: error: ")
        assert damage_line(listed[1:2]) is None
    finally:
        store.close()
