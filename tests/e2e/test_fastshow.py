"""`uwf workflow show NAME` read without msgspec (`uwf.cli.fastshow`, tried first by the
console script): what it prints is the ordinary path's, byte for byte; it imports no
msgspec; it declines every case it does not know (and the ordinary path then answers);
and what it knows that other modules own is pinned here against them."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE
from uwf.cas.builtins import builtin_hash
from uwf.cas.subset import DRAFT07_BOOTSTRAP
from uwf.cli import fastshow
from uwf.cli.main import main
from uwf.config import secrets
from uwf.workflows import discovery

# A description (YAML's double-quoted spelling) that JSON escapes or spells in several
# ways: the two paths must print it alike.
ODD = r'"é ✓ 𝄞 \"quoted\" back\\slash tab\t line\Lsep \u007f \u0001 </script>"'


def _env(home: Path) -> dict[str, str]:
    """This process's environment without uwf's settings or secrets, HOME at `home`."""
    kept = {key: value for key, value in os.environ.items()
            if not key.startswith("UWF_") and not key.upper().endswith(secrets.SECRET_SUFFIXES)
            and key not in ("XDG_CONFIG_HOME", "XDG_STATE_HOME")}
    return {**kept, "HOME": str(home)}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    home = tmp_path / "store"
    odd = tmp_path / "odd.yaml"
    odd.write_text(EXAMPLE.read_text().replace("name: solve-issue", "name: odd-one").replace(
        "description: End-to-end issue resolution", f"description: {ODD}"))
    for file in (EXAMPLE, odd):
        assert main(["--store", str(home), "workflow", "put", str(file)]) == 0
    assert main(["--store", str(home), "registry", "refresh"]) == 0
    return home


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A working folder outside any repo, with a HOME that has no config."""
    folder = tmp_path / "work"
    (folder / "home").mkdir(parents=True)
    return folder


def ordinary(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Exit code and stdout of `main(argv)`: the ordinary path, in-process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv, environ=env, cwd=cwd)
    return code, out.getvalue()


def console(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, list[str]]:
    """Exit code, stdout and the msgspec modules loaded of the console script's run."""
    probe = ("import json, sys\nfrom uwf.cli import entry\n"
             f"sys.argv = ['uwf', *{argv!r}]\ncode = 0\n"
             "try:\n    entry.uwf()\nexcept SystemExit as done:\n    code = done.code\n"
             "sys.stdout.flush()\n"
             "sys.stderr.write(json.dumps([code, sorted(m for m in sys.modules "
             "if m.startswith('msgspec'))]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=60, check=False)
    code, loaded = json.loads(done.stderr.splitlines()[-1])
    return int(code or 0), done.stdout, list(loaded)


@pytest.mark.parametrize("name", ["solve-issue", "odd-one"])
def test_the_console_script_prints_the_ordinary_output_without_msgspec(
        store: Path, work: Path, name: str) -> None:
    env = _env(work / "home")
    for argv in (["--store", str(store), "workflow", "show", name],
                 [f"--store={store}", "workflow", "show", name]):
        assert fastshow.workflow_show(argv, env) is not None  # it answers this one
        code, out, loaded = console(argv, env, work)
        assert (code, out) == ordinary(argv, env, work)
        assert loaded == []
    # UWF_HOME names the store as --store does.
    code, out, loaded = console(["workflow", "show", name], {**env, "UWF_HOME": str(store)},
                                work)
    assert (code, out, loaded) == (0, ordinary(["--store", str(store), "workflow", "show",
                                                name], env, work)[1], [])


@contextlib.contextmanager
def _changed(path: Path, data: bytes) -> Iterator[None]:
    kept = path.read_bytes()
    path.write_bytes(data)
    try:
        yield
    finally:
        path.write_bytes(kept)


def _declines(argv: list[str], env: dict[str, str], cwd: Path,
              monkeypatch: pytest.MonkeyPatch) -> None:
    """In `cwd`, the fast path declines; the console script then prints the ordinary
    output (or error) and exit code, having loaded msgspec for it."""
    monkeypatch.chdir(cwd)
    assert fastshow.workflow_show(argv, env) is None
    code, out, loaded = console(argv, env, cwd)
    assert (code, out) == ordinary(argv, env, cwd)
    assert "msgspec" in loaded


def test_every_case_it_does_not_know_goes_the_ordinary_way(
        store: Path, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(work / "home")
    monkeypatch.chdir(work)
    show = ["--store", str(store), "workflow", "show"]
    it = [*show, "solve-issue"]
    _declines([*show, "no-such-workflow"], env, work, monkeypatch)  # the ordinary error, exit 4
    _declines(["--json", *it], env, work, monkeypatch)
    _declines([*it, "--format", "yaml"], env, work, monkeypatch)
    _declines(it, {**env, "UWF_NOW": "2026-01-01T00:00:00Z"}, work, monkeypatch)
    # A secret of the environment: masked in the output by the ordinary path, and
    # one JSON would escape; one the output does not hold changes nothing.
    _declines(it, {**env, "SOME_API_KEY": "issue resolution"}, work, monkeypatch)
    _declines(it, {**env, "SOME_TOKEN": 'not "there"'}, work, monkeypatch)
    away = {**env, "SOME_API_KEY": "not-in-the-output", "SHORT_KEY": "issue"}
    assert fastshow.workflow_show(it, away) is not None
    assert console(it, away, work)[:2] == ordinary(it, away, work)
    config = work / "home" / ".config" / "uwf"
    config.mkdir(parents=True)
    (config / ".env").write_text("X=an-env-secret\n")
    _declines(it, env, work, monkeypatch)
    (config / ".env").unlink()
    repo = work / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".workflows").mkdir()
    _declines(it, env, repo, monkeypatch)
    # The store: views behind the log, a torn tail, another hash rule, an altered node.
    segment = next((store / "events").iterdir())
    lines = segment.read_bytes()
    with _changed(segment, lines + b'{"seq": 99'):
        _declines(it, env, work, monkeypatch)
    rule = store / "cas" / "hash-rule"
    with _changed(rule, b"json-cas-legacy\n"):
        assert fastshow.workflow_show(it, env) is None
    views = sqlite3.connect(store / "views" / "views.sqlite3")
    (hash_,) = json.loads(views.execute("SELECT value FROM v_workflows WHERE key = ?",
                                        ("solve-issue",)).fetchone()[0])["hash"],
    node = store / "cas" / hash_[:2] / f"{hash_}.json"
    with _changed(node, node.read_bytes().replace(b"End-to-end", b"End-to-End")):
        _declines(it, env, work, monkeypatch)  # the ordinary path: Corrupt
    # Views behind the log (as they were before one more write): caught up by the
    # ordinary path, after which the fast path answers again.
    before = sqlite3.connect(work / "views-before.sqlite3")
    views.backup(before)
    assert main(["--store", str(store), "workflow", "put", str(EXAMPLE)]) == 0  # no change:
    odd = store.parent / "odd.yaml"
    odd.write_text(odd.read_text().replace("name: odd-one", "name: odd-two"))
    assert main(["--store", str(store), "workflow", "put", str(odd)]) == 0  # one more event
    before.backup(views)
    before.close()
    views.close()
    _declines(it, env, work, monkeypatch)
    assert fastshow.workflow_show(it, env) is not None


def test_what_it_knows_is_what_its_owners_say(store: Path) -> None:
    """The views' signatures as a store of this uwf writes them, the Workflow type, the
    old bootstrap node, the repo layouts and the secrets' names: the owners' values."""
    db = sqlite3.connect(store / "views" / "views.sqlite3")
    rows = dict(db.execute("SELECT name, signature FROM checkpoints").fetchall())
    db.close()
    assert rows == fastshow.SIGNATURES
    assert builtin_hash("Workflow") == fastshow.WORKFLOW_TYPE
    assert fastshow.DRAFT07_BOOTSTRAP == DRAFT07_BOOTSTRAP
    assert fastshow.REPO_FOLDERS == discovery.REPO_FOLDERS
    assert fastshow.REPO_LAYOUTS == discovery.REPO_LAYOUTS
    assert fastshow.FILE_SUFFIXES == discovery.WORKFLOW_FILE_SUFFIXES
    assert fastshow.SECRET_SUFFIXES == secrets.SECRET_SUFFIXES
    assert fastshow.MIN_SECRET == secrets.MIN_LENGTH
