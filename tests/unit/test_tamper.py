"""Tamper evidence and fail-closed reads, on real store files with the real CLI.

Every byte flip anywhere in the log is named by `uwf log verify`; an unknown
event type, unreadable views and a log cut behind the views' checkpoint all make
reads fail closed with one line on stderr and the next action.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE, Cli, refused

EXAMPLE_TEXT = EXAMPLE.read_text("utf-8")


# -- helpers -------------------------------------------------------------------

def workflow_file(directory: Path, name: str, description: str | None = None) -> Path:
    """The example workflow under another name (and optionally another description)."""
    text = EXAMPLE_TEXT.replace("name: solve-issue", f"name: {name}", 1)
    if description is not None:
        text = text.replace("description: End-to-end issue resolution",
                            f"description: {description}", 1)
    assert f"name: {name}" in text
    suffix = hashlib.sha256(description.encode()).hexdigest()[:8] if description else "v1"
    path = directory / f"{name}-{suffix}.yaml"
    path.write_text(text, "utf-8")
    return path


def put(cli: Cli, path: Path) -> dict[str, Any]:
    result = cli.run("workflow", "put", str(path))
    assert result.code == 0, result.err
    payload: dict[str, Any] = json.loads(result.out)
    return payload


def build_store(cli: Cli, directory: Path, names: list[str]) -> None:
    for name in names:
        put(cli, workflow_file(directory, name))


def segments(home: Path) -> list[Path]:
    return sorted((home / "events").glob("*.jsonl"))


def log_lines(home: Path) -> list[tuple[Path, int, bytes]]:
    """(segment, 1-based line number, bytes without newline) of every complete line."""
    found: list[tuple[Path, int, bytes]] = []
    for segment in segments(home):
        data = segment.read_bytes()
        for number, raw in enumerate(data.split(b"\n")[:-1], 1):
            found.append((segment, number, raw))
    return found


def verify(cli: Cli) -> tuple[int, dict[str, Any]]:
    result = cli.run("log", "verify")
    assert result.out, f"log verify printed nothing (exit {result.code}): {result.err}"
    payload: dict[str, Any] = json.loads(result.out)
    return result.code, payload


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:32]


def flip(raw: bytes, position: int, mask: int) -> bytes:
    value = raw[position] ^ mask
    if value in (0x0A, 0x0D):  # never turn a byte into a line break
        value = raw[position] ^ (mask << 1 | 1)
    assert value != raw[position]
    return raw[:position] + bytes([value]) + raw[position + 1:]


def positions(raw: bytes) -> dict[str, int]:
    """Where to flip a byte in a line: its edges, its middle, its prev and its data."""
    prev = raw.index(b'"prev":"') + len(b'"prev":"')
    data = raw.index(b'"data":{') + len(b'"data":{')
    return {
        "start": 0,
        "middle": len(raw) // 2,
        "end": len(raw) - 1,
        "prev": prev + 7,
        "data": data + 2,
    }


# -- 4. tamper -------------------------------------------------------------------

def test_every_flipped_byte_is_named_by_log_verify(cli: Cli, tmp_path: Path) -> None:
    # 2 (first put) + 6 more puts = 8 events; the views are kept so that the
    # checkpoint digest witnesses the last line.
    build_store(cli, tmp_path, ["solve-issue", *(f"wf-{i}" for i in range(6))])
    code, report = verify(cli)
    assert (code, report["ok"], report["events"]) == (0, True, 8), report
    pristine = tmp_path / "pristine"
    shutil.copytree(cli.home, pristine)

    lines = log_lines(cli.home)
    assert len(lines) == 8
    masks = (0x01, 0x20, 0x04, 0x40, 0x02)
    unnamed: list[str] = []
    for segment, number, raw in lines:
        seq = json.loads(raw)["seq"]
        original = segment.read_bytes()
        offset = sum(len(line) + 1 for line in original.split(b"\n")[: number - 1])
        for case, (where, position) in enumerate(positions(raw).items()):
            tampered = flip(raw, position, masks[case % len(masks)])
            segment.write_bytes(original[:offset] + tampered + original[offset + len(raw):])
            code, report = verify(cli)
            label = f"seq {seq} ({segment.name} line {number}), byte {position} ({where})"
            assert code == 1, f"{label}: verify exited {code}: {report}"
            assert report["ok"] is False, label
            named = any(
                (problem["segment"] == segment.name and problem["line"] == number)
                or (problem["seq"] == seq and problem["line"] in (number, 0))
                for problem in report["problems"]
            )
            if not named:
                unnamed.append(f"{label}: {report['problems']}")
            segment.write_bytes(original)
            code, report = verify(cli)
            assert (code, report["ok"]) == (0, True), f"after restoring {label}: {report}"
    assert not unnamed, "tampering not attributed to its line:\n" + "\n".join(unnamed)
    # The views were never touched by verify; the store equals its copy.
    for path in pristine.rglob("*"):
        if path.is_file() and "views" not in path.parts:
            assert path.read_bytes() == (cli.home / path.relative_to(pristine)).read_bytes()


# -- 5. unknown types, broken views, a log cut behind the checkpoint ------------------

def test_unknown_event_type_fails_reads_closed(cli: Cli, tmp_path: Path) -> None:
    build_store(cli, tmp_path, ["solve-issue", "wf-1"])
    listed = cli.run("workflow", "list")
    assert listed.code == 0
    segment, _, last = log_lines(cli.home)[-1]
    previous = json.loads(last)
    line = json.dumps(
        {
            "seq": previous["seq"] + 1,
            "id": "01M8AAEW6FF6Z3R3W24RKPTR0Z",
            "ts": previous["ts"],
            "type": "thread.teleported",
            "subject": "thread/01M8AAEW6FF6Z3R3W24RKPTR0Z",
            "batch": [1, 1],
            "data": {},
            "prev": digest(last),
        },
        separators=(",", ":"),
    ).encode()
    with segment.open("ab") as handle:
        handle.write(line + b"\n")
    before = cli.log_bytes()

    # Views current up to the previous line: the catch-up meets the unknown type.
    refused(cli.run("workflow", "list"), 1, "thread.teleported")
    # Views absent: the rebuild meets it too.
    shutil.rmtree(cli.home / "views")
    refused(cli.run("workflow", "list"), 1, "thread.teleported")
    refused(cli.run("workflow", "show", "wf-1"), 1, "thread.teleported")
    # A writer refuses as well, and writes nothing.
    refused(cli.run("workflow", "put", str(workflow_file(tmp_path, "wf-2"))), 1)
    assert cli.log_bytes() == before

    code, report = verify(cli)
    assert code == 1
    seq = previous["seq"] + 1
    assert any(problem["seq"] == seq and problem["segment"] == segment.name
               and problem["line"] == seq and "thread.teleported" in problem["problem"]
               for problem in report["problems"]), report


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "zeroed-header"],
)
def test_unreadable_views_ask_for_a_rebuild(cli: Cli, tmp_path: Path, damage: str) -> None:
    build_store(cli, tmp_path, ["solve-issue", "wf-1", "wf-2"])
    good = cli.run("workflow", "list")
    assert good.code == 0
    database = cli.home / "views" / "views.sqlite3"
    assert database.exists()
    for suffix in ("-wal", "-shm"):
        assert not Path(f"{database}{suffix}").exists(), "views left a WAL behind after exit"
    content = database.read_bytes()
    if damage == "garbage":
        database.write_bytes(b"this is not a database\n" * 200)
    elif damage == "truncated":
        database.write_bytes(content[:100])
    else:
        database.write_bytes(b"\0" * 100 + content[100:])

    broken = cli.run("workflow", "list")
    refused(broken, 1, "uwf registry rebuild")
    assert broken.code == 1

    rebuilt = cli.run("registry", "rebuild")
    assert rebuilt.code == 0, rebuilt.err
    again = cli.run("workflow", "list")
    assert (again.code, again.out) == (0, good.out)
    checked = cli.run("registry", "verify")
    assert checked.code == 0, checked.out


def test_log_cut_behind_the_checkpoint_fails_reads_closed(cli: Cli, tmp_path: Path) -> None:
    build_store(cli, tmp_path, ["solve-issue", *(f"wf-{i}" for i in range(6))])
    assert cli.run("workflow", "list").code == 0  # views at seq 8
    lines = log_lines(cli.home)
    segment = lines[0][0]
    keep = 5
    segment.write_bytes(b"".join(raw + b"\n" for _, _, raw in lines[:keep]))

    for args in (("workflow", "list"), ("workflow", "show", "wf-0")):
        result = cli.run(*args)
        refused(
            result, 1, "views do not match the log at seq 8; run `uwf registry rebuild`"
        )
        assert result.code == 1
    shown = cli.run("registry", "show")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["status"] == "mismatch"
    assert cli.run("registry", "verify").code == 1

    assert cli.run("registry", "rebuild").code == 0
    listed = cli.run("workflow", "list")
    assert listed.code == 0
    names = [entry["name"] for entry in json.loads(listed.out)]
    assert names == ["solve-issue", "wf-0", "wf-1", "wf-2"]
    code, report = verify(cli)
    assert code == 0, report


@pytest.mark.parametrize("cut", ["line-boundary", "mid-line", "mid-first-batch"])
def test_write_on_a_log_cut_behind_the_checkpoint_fails_closed(
    cli: Cli, tmp_path: Path, cut: str
) -> None:
    """A writer must not "repair" a tail the views prove was acknowledged.

    The views folded up to seq 8; the log lost its end. Whatever the cut, a
    write has to refuse before touching the log: the bytes it would truncate
    are evidence, and (for a cut batch) acknowledged events.
    """
    build_store(cli, tmp_path, ["solve-issue", *(f"wf-{i}" for i in range(6))])
    assert cli.run("workflow", "list").code == 0
    lines = log_lines(cli.home)
    segment = lines[0][0]
    if cut == "line-boundary":
        kept = b"".join(raw + b"\n" for _, _, raw in lines[:5])
    elif cut == "mid-line":
        kept = b"".join(raw + b"\n" for _, _, raw in lines[:5]) + lines[5][2][:40]
    else:  # only the first line of the store's first batch [1,2] is left
        kept = lines[0][2] + b"\n"
    segment.write_bytes(kept)

    result = cli.run("workflow", "put", str(workflow_file(tmp_path, "late")))
    refused(result, 1, "views do not match the log at seq 8")
    assert segment.exists(), "the writer deleted the log segment"
    assert segment.read_bytes() == kept, "a rejected write changed the log"


def test_a_renamed_first_segment_is_named_by_verify(cli: Cli, tmp_path: Path) -> None:
    """Each segment's name is its first line's seq, the first segment's too."""
    build_store(cli, tmp_path, ["a", "b"])
    (first,) = segments(cli.home)
    first.rename(first.with_name(f"{7:020d}.jsonl"))
    code, report = verify(cli)
    assert code == 1
    assert not report["ok"]
    assert [p["problem"] for p in report["problems"]] == [
        "segment name does not match its first seq 1"]
    assert report["problems"][0]["segment"] == f"{7:020d}.jsonl"


@pytest.mark.parametrize("value", ["'{\"name\": \"a\"}'", "x'7b6e6f7420736f6e'"],
                         ids=["text-not-blob", "blob-not-json"])
def test_a_hand_edited_view_row_fails_closed(cli: Cli, tmp_path: Path, value: str) -> None:
    import sqlite3

    build_store(cli, tmp_path, ["a"])
    db = sqlite3.connect(cli.home / "views" / "views.sqlite3")
    db.execute(f"UPDATE v_workflows SET value = {value}")
    db.commit()
    db.close()
    result = cli.run("workflow", "show", "a")
    assert result.code == 1
    assert result.err.startswith("uwf: error: ")
    assert "unreadable" in result.err
    assert "run `uwf registry rebuild`" in result.err
    assert len(result.err.splitlines()) == 1
    assert cli.run("registry", "rebuild").code == 0
    assert cli.run("workflow", "show", "a").code == 0


def test_a_lock_that_is_a_symlink_is_refused(cli: Cli, tmp_path: Path) -> None:
    build_store(cli, tmp_path, ["a"])
    outside = tmp_path / "elsewhere"
    (cli.home / "lock").unlink()
    (cli.home / "lock").symlink_to(outside)
    before = cli.log_bytes()
    result = cli.run("workflow", "put", str(workflow_file(tmp_path, "b")))
    assert result.code == 1
    assert "is a symbolic link" in result.err
    assert len(result.err.splitlines()) == 1
    assert not outside.exists()
    assert cli.log_bytes() == before
