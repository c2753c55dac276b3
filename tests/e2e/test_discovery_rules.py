"""Where `thread start NAME` and `workflow show NAME` find a workflow's file, as
united-workforce HEAD does (issue 34): `.workflows/` (preferred) or `.workflow/`, in
the working folder or a parent up to the repo's top, as `NAME.yaml`, `NAME.yml` or
`NAME/index.yaml`; a file found wins over the store's registered version of the name,
and the result says which was used; a file whose `name` differs is refused. Each rule
through `uwf`'s main, run in a folder inside a repo
(docs/workflows.md#workflow-files-in-the-repo)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli, refused, snapshot
from tests.e2e.test_workflow_discovery import (
    make_repo,
    ok,
    registrations,
    tiny,
    uwf,
    write,
)


def shown(cli: Cli, cwd: Path, name: str = "tiny") -> dict[str, object]:
    result: dict[str, object] = ok(uwf(cli, "workflow", "show", name, cwd=cwd))
    return result


def description(cli: Cli, cwd: Path) -> object:
    definition = shown(cli, cwd)["definition"]
    assert isinstance(definition, dict)
    return definition["description"]


@pytest.mark.parametrize("layout", [".workflows/tiny.yaml", ".workflow/tiny.yaml",
                                    ".workflows/tiny.yml", ".workflow/tiny.yml",
                                    ".workflows/tiny/index.yaml", ".workflow/tiny/index.yml"])
def test_each_layout_is_found_and_named_in_the_result(cli: Cli, tmp_path: Path,
                                                      layout: str) -> None:
    repo = make_repo(tmp_path)
    file = write(repo / layout, tiny())
    result = shown(cli, repo / "src")
    assert result["source"] == str(file)
    assert "storeVersion" not in result
    started = ok(uwf(cli, "thread", "start", "tiny", "-p", "go", cwd=repo))
    assert started["workflow"] == result["workflow"]
    assert started["source"] == str(file)


def test_the_plural_folder_wins_over_the_singular(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / ".workflow" / "tiny.yaml", tiny(description="singular"))
    write(repo / ".workflows" / "tiny.yml", tiny(description="plural"))
    assert description(cli, repo) == "plural"


def test_yaml_wins_over_yml_and_a_file_over_the_folder_layout(cli: Cli,
                                                              tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / ".workflows" / "tiny" / "index.yaml", tiny(description="index"))
    assert description(cli, repo) == "index"
    write(repo / ".workflows" / "tiny.yml", tiny(description="yml"))
    assert description(cli, repo) == "yml"
    write(repo / ".workflows" / "tiny.yaml", tiny(description="yaml"))
    assert description(cli, repo) == "yaml"


def test_parent_folders_are_searched_nearest_first(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    deep = repo / "src" / "deep"
    write(repo / ".workflows" / "tiny.yaml", tiny(description="top"))
    assert description(cli, deep) == "top"
    write(repo / "src" / ".workflow" / "tiny.yaml", tiny(description="src"))
    assert description(cli, deep) == "src"  # a nearer folder, even a singular one
    assert description(cli, repo) == "top"  # never a folder below the working one


def test_the_search_stops_at_the_repo_top(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(tmp_path / ".workflows" / "tiny.yaml", tiny(description="above the repo"))
    refused(uwf(cli, "workflow", "show", "tiny", cwd=repo / "src"), 1,
            "no workflow named 'tiny'")
    # Outside a repo, only the working folder is looked in.
    loose = tmp_path / "loose" / "sub"
    loose.mkdir(parents=True)
    write(tmp_path / "loose" / ".workflows" / "tiny.yaml", tiny(description="parent"))
    refused(uwf(cli, "workflow", "show", "tiny", cwd=loose), 1, "no workflow named 'tiny'")
    assert description(cli, tmp_path / "loose") == "parent"


def test_the_repo_file_wins_over_the_store_and_says_so(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    put = ok(uwf(cli, "workflow", "put", str(write(tmp_path / "tiny.yaml", tiny()))))
    file = write(repo / ".workflows" / "tiny.yaml", tiny(description="the repo's"))
    log = cli.log_bytes()
    result = shown(cli, repo / "src")
    assert result["storeVersion"] == put["workflow"]
    assert result["source"] == str(file)
    assert result["workflow"] != put["workflow"]
    assert cli.log_bytes() == log  # the name is not moved: nothing appended
    started = ok(uwf(cli, "thread", "start", "tiny", "-p", "go", cwd=repo))
    assert (started["workflow"], started["source"], started["storeVersion"]) == (
        result["workflow"], str(file), put["workflow"])
    thread = ok(uwf(cli, "thread", "show", started["thread"]))
    assert thread["workflow"] == result["workflow"]
    # The store keeps its version under the name, used where no file holds it.
    assert len(registrations(cli)) == 1
    [listed] = ok(uwf(cli, "workflow", "list"))
    assert listed["workflow"] == put["workflow"]
    elsewhere = shown(cli, tmp_path)
    assert elsewhere["workflow"] == put["workflow"]
    assert "source" not in elsewhere
    assert "storeVersion" not in elsewhere
    # And the repo's version stays readable by its hash.
    assert ok(uwf(cli, "workflow", "show", str(result["workflow"])))["definition"][
        "description"] == "the repo's"


def test_a_new_name_is_registered_on_first_use(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / ".workflows" / "tiny" / "index.yaml", tiny())
    result = shown(cli, repo)
    [registered] = registrations(cli)
    assert registered["data"]["hash"] == result["workflow"]
    assert "storeVersion" not in result


@pytest.mark.parametrize(("layout", "fix"), [
    (".workflows/tiny.yaml", "rename the file to other.yaml, or its `name:` to tiny"),
    (".workflow/tiny.yml", "rename the file to other.yml, or its `name:` to tiny"),
    (".workflows/tiny/index.yaml", "rename its folder to other, or its `name:` to tiny"),
])
def test_a_file_whose_name_differs_is_refused(cli: Cli, tmp_path: Path, store_dir: Path,
                                              layout: str, fix: str) -> None:
    repo = make_repo(tmp_path)
    file = write(repo / layout, tiny("other"))
    before = snapshot(store_dir)
    for args in (("workflow", "show", "tiny"), ("thread", "start", "tiny", "-p", "go")):
        line = refused(uwf(cli, *args, cwd=repo / "src"), 1,
                       f"{file} holds the workflow 'other', not 'tiny'", fix)
        assert "Traceback" not in line
    assert snapshot(store_dir) == before


def test_the_mcp_tool_says_which_was_used(cli: Cli, tmp_path: Path) -> None:
    from uwf.cli.main import COMMANDS
    from uwf.cli.mcp import Tools
    from uwf.invoker.context import Context

    repo = make_repo(tmp_path)
    file = write(repo / ".workflows" / "tiny.yaml", tiny())
    context = Context(store_root=str(cli.home), json=True, environ=cli.env, cwd=repo / "src")
    try:
        outcome = Tools([COMMANDS], context).call("uwf_workflow_show", {"ref": "tiny"})
    finally:
        context.close()
    assert not outcome.is_error, outcome
    assert json.loads(outcome.text)["source"] == str(file)


def test_a_workflow_named_index_is_a_file_not_a_folder(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    file = write(repo / ".workflows" / "index.yaml", tiny("other"))
    refused(uwf(cli, "workflow", "show", "index", cwd=repo), 1,
            f"{file} holds the workflow 'other', not 'index'",
            "rename the file to other.yaml, or its `name:` to index")
    write(file, tiny("index"))
    assert shown(cli, repo, "index")["source"] == str(file)
