"""`uwf demo`: the whole system in one command, run as a user would, piped (JSON)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import ROOT, Cli


def test_the_demo_runs_everything_and_catches_every_forgery(cli: Cli) -> None:
    result = cli.run("demo")
    assert result.code == 0, result.err
    assert result.err == ""
    report = json.loads(result.out)
    assert report["ok"] is True
    assert [step["step"] for step in report["steps"]] == [
        "register", "start", "run", "registry", "rebuild", "archive"]
    assert all(step["ok"] for step in report["steps"])
    run = report["steps"][2]
    assert run["roles"] == ["planner", "developer", "reviewer", "developer", "reviewer"]
    forgeries = {entry["forgery"]: entry for entry in report["forgeries"]}
    assert set(forgeries) == {"edit a field", "delete a line", "swap two lines", "cut the end"}
    assert report["caught"] == 4
    assert forgeries["edit a field"]["first"]["problem"] == (
        "prev does not match the digest of the line before")
    assert "where" in forgeries["delete a line"]["first"]["problem"]
    # The chain alone passes a cut end with the views gone; the anchor names it.
    assert forgeries["cut the end"]["plainOk"] is True
    assert "lines were removed from its end" in forgeries["cut the end"]["problem"]
    assert report["folder"] is None
    # Nothing of the user's store was touched.
    assert not cli.home.exists()


def test_keep_leaves_the_scratch_folder_to_look_at(cli: Cli) -> None:
    result = cli.run("demo", "--keep")
    assert result.code == 0, result.err
    folder = Path(json.loads(result.out)["folder"])
    try:
        assert (folder / "store" / "events").is_dir()
        (run,) = (folder / "archive" / "runs").iterdir()
        assert (run / "summary.json").is_file()
        assert sorted(path.name for path in (folder / "forged").iterdir()) == [
            "anchored-cut", "delete-a-line", "edit-a-field", "swap-two-lines"]
    finally:
        shutil.rmtree(folder)


def test_the_shipped_example_is_the_repository_example() -> None:
    shipped = ROOT / "uwf" / "agents" / "demo"
    for name in ("solve-issue.yaml", "mock-solve-issue.yaml"):
        assert (shipped / name).read_bytes() == (ROOT / "examples" / name).read_bytes(), name
