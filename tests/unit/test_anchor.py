"""Signed anchors (`uwf log anchor`, `uwf log verify --anchor`) on real stores.

The chain alone cannot tell a log whose end was cut, or whose last line was
edited, once the views are gone; nor a log rewritten and re-chained from some
line on. An anchor kept outside the store catches each, and names itself; a
forged anchor, or one checked with the wrong key, is refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, refused, snapshot
from tests.unit.test_tamper import build_store, segments


def run_json(cli: Cli, *args: str, code: int = 0) -> dict[str, Any]:
    result = cli.run(*args)
    assert result.code == code, (result.out, result.err)
    payload: dict[str, Any] = json.loads(result.out)
    return payload


@pytest.fixture
def anchored(cli: Cli, tmp_path: Path) -> tuple[Cli, Path, Path]:
    """A store of three workflows, a key outside it and an anchor of its head."""
    build_store(cli, tmp_path, ["alpha", "beta", "gamma"])
    key = tmp_path / "keys" / "anchor.pem"
    made = run_json(cli, "log", "anchor", "--new-key", "--key", str(key))
    assert made["key"] == str(key)
    anchor = tmp_path / "anchors" / "head.json"
    anchor.parent.mkdir()
    written = run_json(cli, "log", "anchor", "--key", str(key), "--out", str(anchor))
    assert written["seq"] == 4  # store.created + three registrations
    return cli, key, anchor


def verify(cli: Cli, key: Path, *anchors: Path) -> tuple[int, dict[str, Any]]:
    args = ["log", "verify", "--key", str(key)]
    for anchor in anchors:
        args += ["--anchor", str(anchor)]
    result = cli.run(*args)
    assert "Traceback" not in result.err
    return result.code, json.loads(result.out)


def lines(home: Path) -> list[bytes]:
    (segment,) = segments(home)
    return segment.read_bytes().splitlines()


def write_lines(home: Path, raws: list[bytes]) -> None:
    (segment,) = segments(home)
    segment.write_bytes(b"".join(raw + b"\n" for raw in raws))


def drop_views(home: Path) -> None:
    shutil.rmtree(home / "views", ignore_errors=True)


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:32]


def test_a_new_key_is_private_and_never_overwritten(cli: Cli, tmp_path: Path) -> None:
    key = tmp_path / "k" / "anchor.pem"
    made = run_json(cli, "log", "anchor", "--new-key", "--key", str(key))
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert Path(made["publicKey"]).read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert len(made["fingerprint"]) == 64
    before = key.read_bytes()
    again = cli.run("log", "anchor", "--new-key", "--key", str(key))
    refused(again, 1, "already exists")
    assert again.code == 1
    assert key.read_bytes() == before


def test_the_default_key_lives_beside_the_config_not_in_the_store(cli: Cli,
                                                                   tmp_path: Path) -> None:
    build_store(cli, tmp_path, ["alpha"])
    made = run_json(cli, "log", "anchor", "--new-key")
    assert made["key"] == str(tmp_path / "config" / "uwf" / "anchor-key.pem")
    anchor = run_json(cli, "log", "anchor")  # printed: the anchor itself
    assert anchor["seq"] == 2
    assert set(anchor) == {"anchor", "seq", "digest", "first", "ts", "publicKey", "signature"}
    path = tmp_path / "a.json"
    path.write_text(json.dumps(anchor))
    code, payload = verify(cli, Path(made["key"]), path)
    assert code == 0
    assert payload["ok"]


def test_an_intact_log_holds_its_anchors(anchored: tuple[Cli, Path, Path],
                                         tmp_path: Path) -> None:
    cli, key, first = anchored
    build_store(cli, tmp_path, ["delta"])
    second = tmp_path / "anchors" / "later.json"
    run_json(cli, "log", "anchor", "--key", str(key), "--out", str(second))
    code, payload = verify(cli, key.with_name(key.name + ".pub"), second, first)
    assert code == 0
    assert payload["ok"]
    assert [entry["seq"] for entry in payload["anchors"]] == [4, 5]  # earliest first
    assert all(entry["ok"] for entry in payload["anchors"])
    assert payload["contradicts"] is None


def test_a_truncated_log_is_caught_by_its_anchor(anchored: tuple[Cli, Path, Path]) -> None:
    cli, key, anchor = anchored
    write_lines(cli.home, lines(cli.home)[:-1])
    drop_views(cli.home)  # the views were the last witness of the end
    plain = json.loads(cli.run("log", "verify").out)
    assert plain["ok"], "without an anchor, a cut at a batch boundary verifies clean"
    code, payload = verify(cli, key, anchor)
    assert code == 1
    assert payload["contradicts"] == str(anchor)
    (problem,) = payload["problems"]
    assert problem["seq"] == 4
    assert str(anchor) in problem["problem"]
    assert "ends at seq 3" in problem["problem"]


def test_an_edited_last_line_is_caught_by_its_anchor(anchored: tuple[Cli, Path, Path]
                                                     ) -> None:
    cli, key, anchor = anchored
    raws = lines(cli.home)
    raws[-1] = raws[-1].replace(b'"name":"gamma"', b'"name":"gamma2"')
    write_lines(cli.home, raws)
    drop_views(cli.home)
    assert json.loads(cli.run("log", "verify").out)["ok"]
    code, payload = verify(cli, key, anchor)
    assert code == 1
    assert payload["contradicts"] == str(anchor)
    assert "line 4 differs from the anchored one" in payload["problems"][0]["problem"]


def test_a_rechained_forgery_is_caught_by_its_anchor(anchored: tuple[Cli, Path, Path]) -> None:
    cli, key, anchor = anchored
    events = [json.loads(raw) for raw in lines(cli.home)]
    events[2]["data"]["name"] = "forged"  # rewrite seq 3, then re-chain every line after
    prev = events[1]["prev"]
    raws: list[bytes] = []
    for index, event in enumerate(events):
        if index >= 1:
            event["prev"] = digest(raws[-1]) if raws else prev
        raws.append(json.dumps(event, separators=(",", ":")).encode())
    write_lines(cli.home, raws)
    drop_views(cli.home)
    assert json.loads(cli.run("log", "verify").out)["ok"], "the forgery chains cleanly"
    code, payload = verify(cli, key, anchor)
    assert code == 1
    assert payload["contradicts"] == str(anchor)
    assert "differs from the anchored one" in payload["problems"][0]["problem"]


def test_an_anchor_of_another_store_says_so(anchored: tuple[Cli, Path, Path],
                                            tmp_path: Path) -> None:
    cli, key, anchor = anchored
    other = Cli(tmp_path / "other", dict(cli.env, UWF_HOME=str(tmp_path / "other")))
    build_store(other, tmp_path, ["alpha", "beta", "gamma"])
    code, payload = verify(other, key, anchor)
    assert code == 1
    assert "another log" in payload["problems"][0]["problem"]


def test_a_wrong_key_or_an_edited_anchor_is_refused(anchored: tuple[Cli, Path, Path],
                                                    tmp_path: Path) -> None:
    cli, key, anchor = anchored
    before = snapshot(cli.home)
    other = tmp_path / "other.pem"
    run_json(cli, "log", "anchor", "--new-key", "--key", str(other))
    refused(cli.run("log", "verify", "--key", str(other), "--anchor",
                                  str(anchor)), 1, "signed with another key")
    document = json.loads(anchor.read_text())
    for field, value in (("seq", 3), ("digest", "0" * 32), ("ts", "2020-01-01T00:00:00.000Z")):
        edited = tmp_path / f"edited-{field}.json"
        edited.write_text(json.dumps({**document, field: value}))
        result = cli.run("log", "verify", "--key", str(key), "--anchor", str(edited))
        refused(result, 1, "edited after it was signed")
        assert result.code == 1
    for name, content in (("garbage.json", "not json"), ("empty.json", ""),
                          ("extra.json", json.dumps({**document, "x": 1}))):
        bad = tmp_path / name
        bad.write_text(content)
        result = cli.run("log", "verify", "--key", str(key), "--anchor", str(bad))
        refused(result, 1, "is not an anchor")
    refused(cli.run("log", "verify", "--key", str(key), "--anchor",
                                  str(tmp_path / "missing.json")), 1, "no anchor file")
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("hello")
    refused(cli.run("log", "verify", "--key", str(not_a_key), "--anchor",
                                  str(anchor)), 1, "is not a PEM key")
    assert snapshot(cli.home) == before


def test_anchor_refusals_change_nothing(cli: Cli, tmp_path: Path) -> None:
    key = tmp_path / "anchor.pem"
    empty = cli.run("log", "anchor", "--key", str(key))
    refused(empty, 1, "no anchor key")
    run_json(cli, "log", "anchor", "--new-key", "--key", str(key))
    refused(cli.run("log", "anchor", "--key", str(key)), 1, "log is empty")
    build_store(cli, tmp_path, ["alpha"])
    before = snapshot(cli.home)
    out = tmp_path / "a.json"
    run_json(cli, "log", "anchor", "--key", str(key), "--out", str(out))
    kept = out.read_bytes()
    refused(cli.run("log", "anchor", "--key", str(key), "--out", str(out)), 1,
                          "already exists")
    assert out.read_bytes() == kept
    usage = cli.run("log", "verify", "--key", str(key))
    refused(usage, 2, "--key is only used with --anchor")
    assert usage.code == 2
    assert snapshot(cli.home) == before


# -- typed results ---------------------------------------------------------------------

def test_log_verify_returns_a_typed_result_printed_as_the_cli_prints_it(
        anchored: tuple[Cli, Path, Path]) -> None:
    from contextlib import closing

    from uwf.audit import commands as log
    from uwf.audit.commands import LogVerify
    from uwf.audit.results import LogVerified
    from uwf.config.settings import Settings
    from uwf.payload import to_payload
    from uwf.store import Store

    cli, key, anchor = anchored
    with closing(Store.open(settings=Settings.from_env(cli.env, None))) as store:
        result = log.verify(LogVerify(anchor=[str(anchor)], key=str(key)), store)
    assert isinstance(result, LogVerified)
    assert to_payload(result) == verify(cli, key, anchor)[1]
