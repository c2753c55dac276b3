"""`uwf store copy SRC DST` (docs/hosts.md#copying-a-store): a folder to PostgreSQL and
back gives the same log segments byte for byte, and every store answers the same; a
store with events is never copied into, a missing source is never made, a URL's
password is never printed."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import EXAMPLE, Cli, snapshot
from tests.e2e.test_pgstore import located
from tests.pgkit import Server
from uwf.engine.dburl import shown
from uwf.engine.events import Envelope, encode_line
from uwf.engine.log import LogLine, digest
from uwf.store import Store

pytest.importorskip("psycopg")  # the `postgres` extra; `dev` installs it, so CI never skips

NOW = "2026-03-02T09:00:00Z"
MOCK = f"uwf-mock {EXAMPLE.parent / 'mock-solve-issue.yaml'}"


def env_for(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    env.update(UWF_HOME=str(tmp_path / "unused"), UWF_NOW=NOW, UWF_DURABILITY="none",
               XDG_CONFIG_HOME=str(tmp_path / "config"), **more)
    return env


def run(cli: Cli, *args: str, store: str | Path, code: int = 0) -> Any:
    result = cli.run("--store", str(store), *args, "--json")
    assert result.code == code, result.err
    if not result.out.strip():
        return result.err
    try:
        return json.loads(result.out)
    except json.JSONDecodeError:  # a line per item (`thread log`)
        return [json.loads(line) for line in result.out.splitlines()]


def filled(cli: Cli, home: Path) -> str:
    """A store with a workflow, a thread stepped by uwf-mock to its end (StepNodes and
    their prev chain), another killed, queue entries, a lease and a completed one; the
    stepped thread's id."""
    run(cli, "workflow", "put", str(EXAMPLE), store=home)
    thread = run(cli, "thread", "start", "solve-issue", "-p", "Fix the login bug",
                 store=home)["thread"]
    run(cli, "thread", "run", thread, "--agent", MOCK, store=home)
    other = run(cli, "thread", "start", "solve-issue", "-p", "Other", store=home)["thread"]
    run(cli, "thread", "kill", other, "--reason", "not needed", store=home)
    for prompt in ("Queued one", "Queued two", "Queued three"):
        run(cli, "queue", "add", "--workflow", "solve-issue", "-p", prompt, "--session", "s",
            store=home)
    leases = run(cli, "sched", "lease", "--session", "s", "--limit", "2", store=home)["leases"]
    run(cli, "sched", "complete", leases[0]["id"], "--lease", leases[0]["leaseId"], store=home)
    return str(thread)


def segments(home: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((home / "events").glob("*.jsonl"))}


def test_a_folder_to_postgresql_and_back_is_the_same_store(pg_url: str, tmp_path: Path
                                                            ) -> None:
    # Small segments, so the copy back must start each new segment where the first did.
    cli = Cli(tmp_path / "unused", env_for(tmp_path, UWF_SEGMENT_BYTES="1024"))
    first, back = tmp_path / "first", tmp_path / "back"
    thread = filled(cli, first)
    there = run(cli, "store", "copy", str(first), pg_url, store=first)
    again = run(cli, "store", "copy", pg_url, str(back), store=first)
    events = run(cli, "log", "verify", store=first)["events"]
    assert there == {"from": str(first), "to": shown(pg_url), "events": events,
                     "nodes": there["nodes"], "verified": True}
    assert again == {**there, "from": shown(pg_url), "to": str(back)}
    assert len(segments(first)) > 2
    assert segments(back) == segments(first)
    # Every loose node the log reaches, byte for byte, and no other (what json-cas gc
    # keeps); the node records (a step's nodes) came with the log's lines.
    def unreachable(home: Path) -> list[str]:
        found = cli.run("--store", str(home), "gc", "--dry-run", "--grace", "0", "--json",
                        prog="json-cas")
        return list(json.loads(found.out)["unreachable"])

    def nodes(home: Path) -> dict[str, bytes]:
        return {path.stem: path.read_bytes() for path in (home / "cas").rglob("*.json")}

    def records(home: Path) -> set[str]:
        return {json.loads(line)["data"]["hash"]
                for segment in sorted((home / "events").glob("*.jsonl"))
                for line in segment.read_bytes().splitlines()
                if json.loads(line)["type"] == "cas.node"}

    assert records(first)
    assert records(back) == records(first)
    assert not records(first) & set(nodes(first))
    assert len(nodes(back)) + len(records(first)) == there["nodes"]
    assert nodes(back) == {name: data for name, data in nodes(first).items()
                           if name not in unreachable(first)}
    assert unreachable(back) == []
    assert (back / "cas" / "hash-rule").read_bytes() == (first / "cas" / "hash-rule").read_bytes()

    # Where each store is (its folder, or its log's: a run's statePath; its database).
    stores: list[tuple[str | Path, Any]] = [
        (first, located(str(first / "events"), "<STORE>", located(str(first), "<STORE>"))),
        (pg_url, located(shown(pg_url), "<STORE>")),
        (back, located(str(back / "events"), "<STORE>", located(str(back), "<STORE>")))]
    answers = []
    for home, where in stores:
        assert run(cli, "log", "verify", store=home)["ok"] is True
        assert run(cli, "registry", "verify", store=home)["ok"] is True
        answers.append([where(run(cli, *args, store=home)) for args in (
            ("thread", "show", thread), ("thread", "log", thread), ("run", "list"),
            ("queue", "list"), ("sched", "policy", "show"), ("workflow", "list"))])
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][1]  # the thread's steps: StepNodes, read through the copied CAS


def test_a_store_with_events_is_refused_and_nothing_is_written(pg_url: str, tmp_path: Path
                                                                ) -> None:
    cli = Cli(tmp_path / "unused", env_for(tmp_path))
    source, target = tmp_path / "source", tmp_path / "target"
    filled(cli, source)
    run(cli, "workflow", "put", str(EXAMPLE), store=target)
    before = snapshot(source), snapshot(target)
    refused = cli.run("store", "copy", str(source), str(target))
    assert refused.code == 1
    assert refused.err == (f"uwf: error: {target} already holds a store (2 events): a store "
                           "is copied into an empty one only, and nothing was written; give "
                           "a new folder, or the URL of an empty database\n")
    assert (snapshot(source), snapshot(target)) == before
    assert cli.run("store", "copy", str(source), str(source)).code == 1  # itself, too
    assert (snapshot(source), snapshot(target)) == before

    run(cli, "workflow", "put", str(EXAMPLE), store=pg_url)
    nodes = cli.run("--store", pg_url, "verify", "--all", "--json", prog="json-cas")
    assert cli.run("store", "copy", str(source), pg_url).code == 1
    assert run(cli, "log", "verify", store=pg_url)["events"] == 2
    assert cli.run("--store", pg_url, "verify", "--all", "--json",
                   prog="json-cas").out == nodes.out


def test_a_missing_source_is_refused_and_never_made(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "unused", env_for(tmp_path))
    missing, target = tmp_path / "missing", tmp_path / "target"
    refused = cli.run("store", "copy", str(missing), str(target))
    assert refused.code == 1
    assert refused.err == (f"uwf: error: no store to copy at {missing}: no such folder; give "
                           "the folder of a store, or its postgresql:// URL\n")
    assert not missing.exists()
    assert not target.exists()
    missing.mkdir()  # a folder with no events holds no store either
    refused = cli.run("store", "copy", str(missing), str(target))
    assert refused.code == 1
    assert "holds no store to copy" in refused.err
    assert list(missing.iterdir()) == []
    assert not target.exists()
    assert cli.run("store", "copy", "", str(target)).code == 2  # never UWF_HOME


def test_a_urls_password_is_never_printed(pg_server: Server, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "unused", env_for(tmp_path))
    source = tmp_path / "source"
    filled(cli, source)
    url = pg_server.create_database().replace("postgres@", "postgres:s3cret@")
    said = []
    for args in (("store", "copy", str(source), url),  # copied
                 ("store", "copy", str(source), url, "--json"),  # refused: it has events
                 ("store", "copy", url, str(tmp_path / "back")),  # and back
                 ("store", "copy", f"postgresql://postgres:s3cret@/uwf?host={tmp_path}/no",
                  str(tmp_path / "other"))):  # a server that cannot be reached
        result = cli.run(*args)
        said.append((result.code, result.out + result.err))
    assert [code for code, _ in said] == [0, 1, 0, 1]
    assert all("s3cret" not in text for _, text in said)
    assert shown(url) in said[0][1]
    assert shown(url) in said[1][1]
    assert not (tmp_path / "other").exists()


def test_an_unfinished_last_batch_is_left_out_and_progress_is_told(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "unused", env_for(tmp_path))
    source = tmp_path / "source"
    filled(cli, source)
    # A writer killed mid-batch: line 1 of 2 is there, the tail the next writer cuts.
    last_name, last = sorted(segments(source).items())[-1]
    raw = last.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    before = msgspec.json.decode(raw, type=Envelope)
    torn = msgspec.structs.replace(before, seq=before.seq + 1, batch=(1, 2), prev=digest(raw))
    with (source / "events" / last_name).open("ab") as segment:
        segment.write(encode_line(torn) + b"\n")
    told: list[tuple[int, int]] = []
    from uwf.storecopy import service

    src = Store.open(source)
    dst = Store.open(tmp_path / "copy")
    dst.progress = lambda done, total: told.append((done, total))
    try:
        copied = service.copy(src, dst)
    finally:
        src.close()
        dst.close()
    assert copied.events == before.seq
    assert told[0] == (before.seq, before.seq)  # the events copied, then the views rebuilt
    assert told[-1][0] == told[-1][1] > 0
    assert b"".join(segments(tmp_path / "copy").values()) == b"".join(
        segments(source).values())[:-len(encode_line(torn)) - 1]


def test_a_source_that_breaks_late_leaves_postgresql_empty(pg_url: str, tmp_path: Path
                                                           ) -> None:
    """Into PostgreSQL the lines go as the scan checks them, chunk by chunk (a chunk a
    segment here: 1 KiB): a chain broken near the end refuses the copy, and the chunks
    already appended go with its one transaction."""
    cli = Cli(tmp_path / "unused", env_for(tmp_path, UWF_SEGMENT_BYTES="1024"))
    source = tmp_path / "source"
    filled(cli, source)
    name, last = sorted(segments(source).items())[-1]
    lines = last.rstrip(b"\n").split(b"\n")
    broken = msgspec.json.decode(lines[-1], type=Envelope)
    lines[-1] = encode_line(msgspec.structs.replace(broken, prev="0" * 32))
    (source / "events" / name).write_bytes(b"\n".join(lines) + b"\n")
    refused = cli.run("store", "copy", str(source), pg_url)
    assert refused.code != 0
    assert "the chain is broken" in refused.err
    assert len(segments(source)) > 2  # so chunks were appended before the break
    store = Store.open(pg_url)
    try:
        assert store.log.head().seq == 0
    finally:
        store.close()


def test_a_source_that_fails_log_verify_leaves_postgresql_empty(pg_url: str, tmp_path: Path
                                                                ) -> None:
    """A source whose seq, chain and batches hold but whose `log verify` does not (an
    event names a node the source has lost): into PostgreSQL the copy's findings are
    made inside its one transaction, so the refusal leaves no event, view or node."""
    cli = Cli(tmp_path / "unused", env_for(tmp_path))
    source = tmp_path / "source"
    filled(cli, source)
    named = next(json.loads(line)["data"]["hash"]
                 for segment in sorted((source / "events").glob("*.jsonl"))
                 for line in segment.read_bytes().splitlines()
                 if json.loads(line)["type"] == "workflow.registered")
    (lost,) = (source / "cas").rglob(f"{named}.json")
    lost.unlink()
    refused = cli.run("store", "copy", str(source), pg_url)
    assert refused.code == 1, refused.err
    assert refused.err.startswith(f"uwf: error: the copy in {shown(pg_url)} does not verify: "
                                  "log verify: seq "), refused.err
    assert f"refers to CAS node {named} which is missing" in refused.err
    store = Store.open(pg_url)
    try:
        assert store.log.head().seq == 0
        assert next(store.cas.blobs.hashes(), None) is None
        assert store.views.checkpoints() == {}
    finally:
        store.close()


def test_into_postgresql_each_line_is_read_once(pg_url: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy checks, folds and verifies the lines as it writes them: the source's log
    is read once, and the copy's is never read back, nor its views replayed."""
    from uwf.engine.journal import Journal
    from uwf.engine.pglog import PgLog
    from uwf.storecopy import service

    cli = Cli(tmp_path / "unused", env_for(tmp_path))
    source = tmp_path / "source"
    filled(cli, source)

    def never(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("read again")

    monkeypatch.setattr(PgLog, "read", never)
    monkeypatch.setattr(Journal, "replay", never)
    src = Store.open(source)
    reads: list[int] = []
    read = src.log.read

    def counted(after: int = 0) -> Iterator[LogLine]:
        reads.append(after)
        return read(after)

    monkeypatch.setattr(src.log, "read", counted)
    dst = Store.open(pg_url)
    try:
        head = src.log.head().seq
        copied = service.copy(src, dst)
    finally:
        src.close()
        dst.close()
    assert copied.verified
    assert copied.events == head
    assert reads == [0]
    monkeypatch.undo()
    assert run(cli, "log", "verify", store=pg_url)["ok"] is True
    assert run(cli, "registry", "verify", store=pg_url)["ok"] is True
