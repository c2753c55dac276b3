"""A step's nodes kept in the log (issue 30, SPEC §4 "Where nodes live"), beside the
loose files of older stores: what reads them, what audits them, what copies them.

Stores of the older layout are made with `UWF_NODES=loose` (a step's nodes written as
loose files, as an older uwf wrote them), then used by this uwf's default.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.threadkit import Kit, make_kit


def records(cli: Cli) -> dict[str, dict[str, Any]]:
    """Every node record of the store's log, by hash."""
    lines = [json.loads(line) for line in cli.log_bytes().splitlines()]
    return {line["data"]["hash"]: line for line in lines if line["type"] == "cas.node"}


def loose(home: Path) -> set[str]:
    return {path.stem for path in (home / "cas").rglob("*.json")}


def stepped(kit: Kit, steps: int) -> str:
    kit.put_workflow()
    thread = kit.start()
    for _ in range(steps):
        assert kit.step(thread).code == 0
    return thread


def verified(kit: Kit) -> None:
    assert kit.ok("log", "verify")["ok"] is True
    done = kit.cli.run("verify", "--all", "--json", prog="json-cas")
    assert done.code == 0, done.out + done.err


def test_a_steps_nodes_are_records_read_wherever_they_are(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    thread = stepped(kit, 2)
    heads = [entry["hash"] for entry in kit.log(thread)]
    found = records(cli)
    for head in heads:
        step = kit.node(head)["payload"]
        for hash_ in (head, step["output"], step["detail"]):
            assert hash_ in found
            assert hash_ not in loose(cli.home)  # one place: the log
            assert found[hash_]["subject"] == f"cas/{hash_}"
            assert found[hash_]["data"]["node"] == kit.node(hash_)  # json-cas get
            assert cli.run("has", hash_, prog="json-cas").code == 0
    walked = kit.cli.run("walk", heads[-1], "--json", prog="json-cas")
    assert walked.code == 0, walked.err
    assert {entry["hash"] for entry in json.loads(walked.out)} >= set(heads)
    verified(kit)
    # `log tail` shows events; records only when asked for.
    assert all(event["type"] != "cas.node" for event in kit.events())
    assert {event["data"]["hash"] for event in kit.events("cas.node")} == set(found)
    # The nodes view is a view: deleted, it is rebuilt, and the nodes read the same.
    shown = kit.uwf("thread", "log", thread).out
    shutil.rmtree(cli.home / "views")
    assert kit.uwf("thread", "log", thread).out == shown
    assert kit.ok("registry", "verify")["ok"] is True


def test_an_edited_record_fails_closed_and_is_named(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    thread = stepped(kit, 1)
    step = kit.node(kit.show(thread)["head"])["payload"]
    output = step["output"]
    segment = next((cli.home / "events").glob("*.jsonl"))
    data = segment.read_bytes()
    line = next(raw for raw in data.splitlines()
                if b'"type":"cas.node"' in raw and f'"hash":"{output}"'.encode() in raw)
    record = json.loads(line)
    record["data"]["node"]["payload"]["plan"] = "something else"
    forged = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
    segment.write_bytes(data.replace(line, forged))
    # Reads of the node fail closed: its content no longer hashes to its name.
    got = cli.run("get", output, prog="json-cas")
    assert got.code != 0
    assert "does not hash to its name" in got.err
    assert cli.run("thread", "log", thread).code != 0
    # The audit names the record, and the chain break after it.
    checked = cli.run("log", "verify", "--json")
    assert checked.code == 1
    problems = [problem["problem"] for problem in json.loads(checked.out)["problems"]]
    assert any(f"node record {output} holds content that hashes to" in p for p in problems)
    assert any("prev does not match" in p for p in problems)
    nodes = json.loads(cli.run("verify", "--all", "--json", prog="json-cas").out)
    assert [problem["hash"] for problem in nodes["problems"]] == [output]


def test_a_store_of_the_older_layout_reads_steps_verifies_copies_archives(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from uwf.engine import journal

    assert not cli.process  # the store is made in this process, as an older uwf made it:
    monkeypatch.setattr(journal, "FORMAT_VERSION", 1)  # format 1, and loose node files
    kit = make_kit(cli, tmp_path)
    cli.env["UWF_NODES"] = "loose"
    thread = stepped(kit, 2)
    monkeypatch.undo()
    assert json.loads(cli.log_bytes().splitlines()[0])["data"] == {"format": 1}
    assert records(cli) == {}  # the older layout: nothing but loose files
    old_heads = [entry["hash"] for entry in kit.log(thread)]
    assert set(old_heads) <= loose(cli.home)
    del cli.env["UWF_NODES"]
    shown = kit.uwf("thread", "log", thread).out
    assert kit.step(thread).code == 0  # this uwf: the next step's nodes are records
    head = kit.show(thread)["head"]
    assert head in records(cli)
    assert head not in loose(cli.home)
    assert kit.uwf("thread", "log", thread).out.startswith(shown)
    verified(kit)
    # gc keeps what the log reaches, of both kinds; an unreached loose node goes.
    stray = cli.run("put", "--type", "Text", "-", stdin='"stray"', prog="json-cas")
    assert stray.code == 0
    collected = json.loads(cli.run("gc", "--dry-run", "--grace", "0", "--json",
                                   prog="json-cas").out)
    assert collected["unreachable"] == [stray.out.strip()]
    assert cli.run("gc", "--yes", "--grace", "0", prog="json-cas").code == 0
    verified(kit)
    # A copy holds both kinds, and reads the same.
    copy = tmp_path / "copy"
    copied = kit.ok("store", "copy", str(cli.home), str(copy))
    assert copied["verified"] is True
    assert set(records(Cli(copy, cli.env))) == set(records(cli))
    assert set(old_heads) <= loose(copy)
    assert head not in loose(copy)
    assert kit.uwf("--store", str(copy), "thread", "log", thread).out == kit.uwf(
        "thread", "log", thread).out
    # The archive's runs hold events, never records.
    archive = tmp_path / "archive"
    kit.ok("archive", "sync", str(archive))
    assert kit.ok("archive", "verify", str(archive))["ok"] is True
    transitions = (archive / "runs" / thread / "transitions.jsonl").read_bytes()
    assert b"cas.node" not in transitions
    assert all(hash_.encode() in transitions for hash_ in [*old_heads, head])


def test_a_bad_uwf_nodes_is_one_line_and_exit_2(cli: Cli) -> None:
    cli.env["UWF_NODES"] = "files"
    before = cli.log_bytes()
    result = cli.run("workflow", "list")
    assert result.code == 2
    assert result.err == ("uwf: error: UWF_NODES must be log or loose, not 'files'; "
                          "fix or unset it\n")
    assert cli.log_bytes() == before
