"""The recipes of docs/audit.md, run as written: the hand-made chain check, and
checking a copy of a log against the original (with an anchor, and by the line
at the same seq)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, Cli
from tests.unit.test_tamper import build_store

GUIDE = (ROOT / "docs" / "audit.md").read_text("utf-8")


def chain_script() -> str:
    """The Python of the guide's 'check it yourself' block."""
    match = re.search(r"python3 - \"\$UWF_HOME\"/events/\*\.jsonl <<'EOF'\n(.*?)\nEOF\n",
                      GUIDE, re.S)
    assert match, "the guide's chain check is gone"
    return match[1]


def run_chain_script(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-", *map(str, sorted((home / "events").glob(
        "*.jsonl")))], input=chain_script(), capture_output=True, text=True, check=False)


def rechain_from(home: Path, index: int) -> None:
    """Rewrite line `index` (0-based) and redo the chain after it: a clean forgery."""
    (segment,) = sorted((home / "events").glob("*.jsonl"))
    events = [json.loads(raw) for raw in segment.read_bytes().splitlines()]
    events[index]["data"]["name"] = "forged"
    raws: list[bytes] = []
    for number, event in enumerate(events):
        if number > index:
            event["prev"] = hashlib.sha256(raws[-1]).hexdigest()[:32]
        raws.append(json.dumps(event, separators=(",", ":")).encode())
    segment.write_bytes(b"".join(raw + b"\n" for raw in raws))


def line_at(cli: Cli, seq: int) -> str:
    """`uwf log tail --since SEQ-1 | head -n 1`, as the guide says."""
    out = cli.run("log", "tail", "--since", str(seq - 1)).out
    return out.splitlines()[0]


def test_the_hand_made_chain_check(cli: Cli, tmp_path: Path) -> None:
    build_store(cli, tmp_path, ["alpha", "beta"])
    done = run_chain_script(cli.home)
    assert done.returncode == 0, done.stderr
    head = json.loads(cli.run("log", "tail", "-n", "1").out)
    assert done.stdout.startswith("chain ok; head digest ")
    (segment,) = sorted((cli.home / "events").glob("*.jsonl"))
    last = segment.read_bytes().splitlines()[-1]
    assert done.stdout.split()[-1] == hashlib.sha256(last).hexdigest()[:32]
    assert head["seq"] == 3
    (segment,) = sorted((cli.home / "events").glob("*.jsonl"))
    lines = segment.read_bytes().splitlines()
    segment.write_bytes(b"".join(raw + b"\n" for raw in [lines[0], lines[2]]))
    assert run_chain_script(cli.home).returncode != 0


def test_a_copy_is_checked_against_the_original(cli: Cli, tmp_path: Path) -> None:
    build_store(cli, tmp_path, ["alpha", "beta", "gamma"])
    key = tmp_path / "K.pem"
    assert cli.run("log", "anchor", "--new-key", "--key", str(key)).code == 0
    anchor = tmp_path / "head.json"
    assert cli.run("log", "anchor", "--key", str(key), "--out", str(anchor)).code == 0
    original_head = line_at(cli, 4)

    copy = tmp_path / "copy"
    shutil.copytree(cli.home, copy)
    as_copy = Cli(copy, dict(cli.env, UWF_HOME=str(copy)))
    (tmp_path / "more").mkdir()
    build_store(as_copy, tmp_path / "more", ["delta"])  # the copy went on past the anchor
    pub = str(key) + ".pub"
    # 1. With the anchor: the copy holds the original up to its seq.
    whole = as_copy.run("log", "verify", "--key", pub, "--anchor", str(anchor))
    assert whole.code == 0, whole.out
    assert json.loads(whole.out)["events"] == 5
    # 2. By the line at the same seq.
    assert line_at(as_copy, 4) == original_head

    rechain_from(copy, 1)  # the registration of alpha rewritten, the chain redone
    shutil.rmtree(copy / "views")
    assert json.loads(as_copy.run("log", "verify").out)["ok"], "the forgery chains"
    forged = as_copy.run("log", "verify", "--key", pub, "--anchor", str(anchor))
    assert forged.code == 1
    assert json.loads(forged.out)["contradicts"] == str(anchor)
    assert line_at(as_copy, 4) != original_head
