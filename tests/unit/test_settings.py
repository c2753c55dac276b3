"""Settings are resolved once at the edge and passed down (uwf/config/settings.py).

`Settings.from_env` resolves what the environment, the working folder and the
global options decide, with the errors opening a store always gave; the store
carries them to the services; and `main(argv)` run in several threads at once,
each with its own store, clock and environment, gives each its own answers.
"""

from __future__ import annotations

import io
import json
import re
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE
from uwf.cli import main as uwf_cli
from uwf.config.repo import find_repo
from uwf.config.settings import Settings, config_path, expand_user, store_root
from uwf.errors import UsageError
from uwf.invoker.context import Context
from uwf.store import Store

HOME = {"HOME": "/home/someone"}


# -- resolving --------------------------------------------------------------------------

@pytest.mark.parametrize(("explicit", "environ", "root"), [
    ("/s/explicit", {"UWF_HOME": "/s/home", "XDG_STATE_HOME": "/s/state"}, "/s/explicit"),
    (None, {"UWF_HOME": "/s/home", "XDG_STATE_HOME": "/s/state"}, "/s/home"),
    (None, {"XDG_STATE_HOME": "/s/state"}, "/s/state/uwf"),
    (None, {}, "/home/someone/.local/state/uwf"),
    ("", {"UWF_HOME": "/s/home"}, "/s/home"),  # an empty --store is no --store
    ("~/mine", {}, "/home/someone/mine"),
    (None, {"UWF_HOME": "~/uwf"}, "/home/someone/uwf"),
])
def test_the_store_root_by_precedence(explicit: str | None, environ: dict[str, str],
                                      root: str) -> None:
    """`--store` > UWF_HOME > $XDG_STATE_HOME/uwf > ~/.local/state/uwf, with `~` the
    given environment's HOME."""
    assert store_root(explicit, {**HOME, **environ}) == Path(root)
    settings = Settings.from_env({**HOME, **environ}, Path("/w"), store=explicit)
    assert settings.store_root == Path(root)


def test_the_config_path_by_precedence() -> None:
    both = {**HOME, "UWF_CONFIG": "~/c.yaml", "XDG_CONFIG_HOME": "/x"}
    assert config_path(both) == Path("/home/someone/c.yaml")
    assert config_path({**HOME, "XDG_CONFIG_HOME": "/x"}) == Path("/x/uwf/config.yaml")
    assert config_path(HOME) == Path("/home/someone/.config/uwf/config.yaml")
    assert Settings.from_env(HOME, None).env_file == Path("/home/someone/.config/uwf/.env")


def test_tilde_is_the_given_environments_home() -> None:
    assert expand_user("~", {"HOME": "/h/"}) == Path("/h")
    assert expand_user("~/a", {"HOME": ""}) == Path("/a")
    assert expand_user("plain/~", {"HOME": "/h"}) == Path("plain/~")


def test_the_numbers_durability_and_fixed_time() -> None:
    settings = Settings.from_env({**HOME, "UWF_DURABILITY": "none", "UWF_LOCK_TIMEOUT": "2.5",
                                  "UWF_SEGMENT_BYTES": "4096", "UWF_NOW": "1000"}, Path("/w"))
    assert (settings.durable, settings.lock_timeout, settings.segment_bytes) == (
        False, 2.5, 4096)
    assert (settings.now, settings.now_ms, settings.clock()) == ("1000", 1000, 1000)
    # --now wins over UWF_NOW; without either, the wall clock.
    given = Settings.from_env({**HOME, "UWF_NOW": "1000"}, None, now="2000")
    assert (given.now, given.clock()) == ("2000", 2000)
    default = Settings.from_env(HOME, None)
    assert (default.durable, default.lock_timeout, default.now, default.now_ms) == (
        True, 10.0, None, None)
    assert default.clock() > 1_700_000_000_000


@pytest.mark.parametrize(("environ", "now", "message"), [
    ({"UWF_DURABILITY": "sometimes"}, None,
     "UWF_DURABILITY must be fsync or none, not 'sometimes'"),
    ({"UWF_LOCK_TIMEOUT": "inf"}, None,
     "UWF_LOCK_TIMEOUT must be a finite number from 0 to 3,600, not inf"),
    ({"UWF_SEGMENT_BYTES": "0"}, None, "UWF_SEGMENT_BYTES must be positive, not 0"),
    ({"UWF_SEGMENT_BYTES": "many"}, None, "UWF_SEGMENT_BYTES must be an integer, not 'many'"),
    ({"UWF_NOW": "yesterday"}, None, "invalid time 'yesterday' for UWF_NOW"),
    ({}, "yesterday", "invalid time 'yesterday' for --now"),
    # The first problem, in the order opening a store always checked them.
    ({"UWF_DURABILITY": "x", "UWF_LOCK_TIMEOUT": "-1", "UWF_NOW": "bad"}, None,
     "invalid time 'bad' for UWF_NOW"),
    ({"UWF_DURABILITY": "x", "UWF_LOCK_TIMEOUT": "-1"}, None,
     "UWF_DURABILITY must be fsync or none, not 'x'"),
])
def test_a_bad_setting_is_a_usage_error_naming_it(environ: dict[str, str], now: str | None,
                                                   message: str) -> None:
    with pytest.raises(UsageError) as raised:
        Settings.from_env({**HOME, **environ}, None, now=now)
    assert raised.value.what == message


def test_the_environment_is_a_read_only_copy() -> None:
    source = {**HOME, "UWF_DURABILITY": "none"}
    settings = Settings.from_env(source, Path("/w"))
    source["UWF_DURABILITY"] = "fsync"
    assert settings.environ["UWF_DURABILITY"] == "none"
    with pytest.raises(TypeError):
        settings.environ["X"] = "y"  # type: ignore[index]
    deeper = settings.with_environ(UWF_SUBFLOW_DEPTH="2")
    assert deeper.environ["UWF_SUBFLOW_DEPTH"] == "2"
    assert "UWF_SUBFLOW_DEPTH" not in settings.environ


def test_the_repo_is_found_from_the_settings_working_folder(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    settings = Settings.from_env(HOME, tmp_path / "repo" / "src")
    assert find_repo(None, settings) == str(tmp_path / "repo")
    assert find_repo("..", settings) == str(tmp_path / "repo")  # relative to that folder
    assert find_repo(str(tmp_path), settings) == str(tmp_path)
    with pytest.raises(UsageError, match="cannot use the working folder as a repo: No such"):
        find_repo(None, Settings.from_env(HOME, None))


# -- carried by the store ----------------------------------------------------------------

def test_the_store_opens_with_its_settings(tmp_path: Path) -> None:
    environ = {**HOME, "UWF_DURABILITY": "none", "UWF_NOW": "2026-01-02T03:04:05Z",
               "XDG_CONFIG_HOME": str(tmp_path / "config")}
    settings = Settings.from_env(environ, tmp_path, store=tmp_path / "a")
    with closing(Store.open(settings=settings)) as store:
        assert (store.root, store.settings, store.durability) == (tmp_path / "a", settings,
                                                                   "none")
        assert (store.now, store.clock()) == ("2026-01-02T03:04:05Z", settings.now_ms)
    # A root given beside them overrides theirs; --now goes in the settings.
    with closing(Store.open(tmp_path / "b", settings=settings)) as store:
        assert (store.root, store.settings.lock_timeout) == (tmp_path / "b", 10.0)
    with pytest.raises(ValueError, match="in the settings"):
        Store.open(settings=settings, now="1")


def test_a_context_resolves_its_own_environment(tmp_path: Path) -> None:
    environ = {**HOME, "UWF_HOME": str(tmp_path / "mine"), "UWF_DURABILITY": "none",
               "UWF_NOW": "5000", "XDG_CONFIG_HOME": str(tmp_path / "config")}
    context = Context(environ=environ, cwd=tmp_path)
    try:
        assert context.settings.store_root == tmp_path / "mine"
        assert (context.store.root, context.store.clock()) == (tmp_path / "mine", 5000)
        assert context.store.settings.cwd == tmp_path
    finally:
        context.close()
    with pytest.raises(UsageError, match="for UWF_NOW"):
        Context(environ={"UWF_NOW": "soon"}, cwd=None)


# -- many commands at once --------------------------------------------------------------

class PerThread(io.TextIOBase):
    """A stream that keeps what each thread writes apart (for sys.stdout and stderr)."""

    def __init__(self) -> None:
        self.written: dict[int, list[str]] = {}
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.written.setdefault(threading.get_ident(), []).append(text)
        return len(text)

    def isatty(self) -> bool:
        return False

    def take(self) -> str:
        with self.lock:
            return "".join(self.written.pop(threading.get_ident(), []))


ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def comparable(value: Any) -> Any:
    """`value` without what differs from run to run: ids (random after their time, so
    rows of one instant come in any order) and fingerprints of the log's chain over them."""
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()
                if key != "sourceFingerprint"}
    if isinstance(value, list):
        return sorted((comparable(item) for item in value), key=json.dumps)
    return ULID.sub("<ULID>", value) if isinstance(value, str) else value


def scenario(store: Path, repo: Path, count: int, now: str, *, via_env: bool,
             base: Mapping[str, str], out: PerThread, err: PerThread) -> list[Any]:
    """What `uwf` answers for one store: `count` threads and queue entries started
    at `now`, given by --now or (`via_env`) by the command's own UWF_NOW."""
    environ = {**base, "UWF_NOW": now} if via_env else dict(base)
    fixed = [] if via_env else ["--now", now]

    def uwf(*argv: str) -> Any:
        code = uwf_cli.main(["--store", str(store), *fixed, *argv, "--json"], environ=environ)
        assert (code, err.take()) == (0, "")
        text = out.take().replace(str(store), "<STORE>")
        if argv[0] != "log":
            return comparable(json.loads(text))
        return [comparable({key: event[key] for key in ("seq", "type", "ts", "subject")})
                for event in map(json.loads, text.splitlines())]

    answers = [uwf("workflow", "put", str(EXAMPLE))]
    for number in range(count):
        answers.append(uwf("thread", "start", "solve-issue", "-p", f"task {number} of {count}",
                           "--repo", str(repo)))
        answers.append(uwf("queue", "add", "--workflow", "solve-issue", "-p",
                           f"queued {number} of {count}", "--repo", str(repo)))
    answers += [uwf("thread", "list"), uwf("queue", "list"),
                uwf("log", "tail", "-n", "999"), uwf("run", "search", "--scope", "home")]
    return answers


def test_main_in_several_threads_at_once_gives_each_its_own_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = PerThread(), PerThread()
    # Set here, not in a fixture: pytest puts its own capture back before the test runs.
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    base = {**HOME, "PATH": "", "UWF_DURABILITY": "none",
            "XDG_CONFIG_HOME": str(tmp_path / "config")}
    jobs = []
    for number in range(4):
        repo = tmp_path / f"repo{number}"
        (repo / ".git").mkdir(parents=True)
        jobs.append((repo, number + 1, f"202{number}-0{number + 1}-02T03:04:05.000Z",
                     number % 2 == 1))

    def run(where: str, job: tuple[Path, int, str, bool]) -> list[Any]:
        repo, count, now, via_env = job
        return scenario(tmp_path / where / repo.name, repo, count, now, via_env=via_env,
                        base=base, out=out, err=err)

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        together = list(pool.map(lambda job: run("together", job), jobs))
    one_by_one = [run("one-by-one", job) for job in jobs]

    assert together == one_by_one
    for (repo, count, now, _), answers in zip(jobs, together, strict=True):
        threads, queue, log, runs = answers[-4:]
        assert len(threads) == count
        assert sorted(entry["prompt"] for entry in queue["entries"]) == [
            f"queued {n} of {count}" for n in range(count)]
        assert {entry["repo"] for entry in queue["entries"]} == {str(repo)}
        assert {run["repo"] for run in runs["runs"]} == {str(repo)}
        assert {event["ts"] for event in log} == {now}  # each store kept its own clock
