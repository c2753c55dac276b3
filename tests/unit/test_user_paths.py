"""User-given paths are the command's: `~` is its environment's HOME and a relative
path is of its working folder (`main(argv, environ=..., cwd=...)`), resolved at the
edge by `Settings.path`; never the process's HOME or working folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from uwf.cli.main import main
from uwf.config.settings import Settings

WORKFLOW = {"roles": {"worker": {"goal": "Do the task."}},
            "graph": {"$START": {"_": "worker"}, "worker": {"_": "$END"}}}


def _side(root: Path, name: str) -> tuple[dict[str, str], Path]:
    """A command's own HOME and working folder, with a workflow file in the latter."""
    home, work = root / name / "home", root / name / "work"
    home.mkdir(parents=True)
    (work / "flows").mkdir(parents=True)
    (work / "flows" / "w.yaml").write_text(yaml.safe_dump({"name": f"wf-{name}", **WORKFLOW}))
    environ = {"HOME": str(home), "UWF_DURABILITY": "none", "PATH": os.environ["PATH"]}
    return environ, work


def _uwf(capsys: pytest.CaptureFixture[str], environ: dict[str, str], cwd: Path,
         *argv: str) -> str:
    capsys.readouterr()
    code = main(list(argv), environ=environ, cwd=cwd)
    out, err = capsys.readouterr()
    assert code == 0, (argv, err)
    return out


def test_relative_and_home_paths_are_the_commands_not_the_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The process's own HOME and working folder: nothing may land in either.
    process_home, process_cwd = tmp_path / "process-home", tmp_path / "process-cwd"
    process_home.mkdir()
    process_cwd.mkdir()
    monkeypatch.setenv("HOME", str(process_home))
    monkeypatch.chdir(process_cwd)
    for name in ("a", "b"):  # twice in one process, each with its own HOME and folder
        environ, work = _side(tmp_path, name)
        home = Path(environ["HOME"])
        store = ("--store", "~/store")
        put = json.loads(_uwf(capsys, environ, work, *store, "workflow", "put",
                              "flows/w.yaml", "--json"))
        assert put["name"] == f"wf-{name}"
        assert (home / "store").is_dir()
        # A relative store, the archive folder, a key under ~ and an anchor's file.
        listed = json.loads(_uwf(capsys, environ, work, "--store", "rel-store",
                                 "workflow", "put", "flows/w.yaml", "--json"))
        assert listed["name"] == f"wf-{name}"
        assert (work / "rel-store").is_dir()
        _uwf(capsys, environ, work, *store, "archive", "sync", "arch", "--json")
        assert (work / "arch").is_dir()
        _uwf(capsys, environ, work, *store, "log", "anchor", "--new-key", "--key",
             "~/anchor.key", "--json")
        assert (home / "anchor.key").is_file()
        written = json.loads(_uwf(capsys, environ, work, *store, "log", "anchor", "--key",
                                  "~/anchor.key", "--out", "a.json", "--json"))
        assert written["anchor"] == str(work / "a.json")
        assert (work / "a.json").is_file()
        # A workflow named by its file (`workflow show FILE`), from the command's folder.
        started = json.loads(_uwf(capsys, environ, work, *store, "workflow", "show",
                                  "flows/w.yaml", "--json"))
        assert started["name"] == f"wf-{name}"
    assert list(process_home.iterdir()) == []
    assert list(process_cwd.iterdir()) == []


def test_settings_resolve_user_paths_with_their_home_and_folder(tmp_path: Path) -> None:
    one = Settings.from_env({"HOME": "/home/one"}, tmp_path / "one", store="s")
    two = Settings.from_env({"HOME": "/home/two/"}, tmp_path / "two", store="~/s")
    assert one.path("x/y.json") == tmp_path / "one" / "x" / "y.json"
    assert one.path("~/k") == Path("/home/one/k")
    assert two.path("~") == Path("/home/two")
    assert one.path("/abs/p") == Path("/abs/p")
    assert one.store_root == tmp_path / "one" / "s"
    assert two.store_root == Path("/home/two/s")
    assert one.config_path == Path("/home/one/.config/uwf/config.yaml")
    relative = Settings.from_env({"HOME": "/h", "UWF_CONFIG": "c.yaml"}, tmp_path)
    assert relative.config_path == tmp_path / "c.yaml"
    # No working folder (it was removed): a relative path stays relative.
    assert Settings.from_env({"HOME": "/h"}, None).path("r") == Path("r")


def test_uwf_debug_is_read_from_the_commands_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused command raises with UWF_DEBUG=1 in its environment, and only then:
    the process's UWF_DEBUG is not the command's."""
    from uwf.errors import UwfError

    argv = ["--store", str(tmp_path / "store"), "workflow", "show", "nothing-of-that-name"]
    base = {"HOME": str(tmp_path), "UWF_DURABILITY": "none"}
    monkeypatch.setenv("UWF_DEBUG", "1")
    assert main(argv, environ=base, cwd=tmp_path) != 0
    monkeypatch.delenv("UWF_DEBUG")
    with pytest.raises(UwfError):
        main(argv, environ={**base, "UWF_DEBUG": "1"}, cwd=tmp_path)
