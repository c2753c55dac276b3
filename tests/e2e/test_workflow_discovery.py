"""Workflow files found in the repo (`.workflows/NAME.yaml` and its other layouts, here
or in a parent folder; tests/e2e/test_discovery_rules.py has each rule) and `!include` in
workflow YAML, through `uwf`'s main, run in the folder a test names
(docs/workflows.md#workflow-files-in-the-repo, docs/workflows.md#include)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cli, Result, refused, snapshot


def uwf(cli: Cli, *args: str, cwd: Path | None = None) -> Result:
    """`uwf ARGS` run in `cwd` (the repo it finds is the git top level of `cwd`)."""
    return cli.call("uwf", args, b"", cwd=cwd)


def ok(result: Result) -> Any:
    assert result.code == 0, result
    return json.loads(result.out)


def tiny(name: str = "tiny", description: str = "") -> dict[str, Any]:
    return {"name": name, "description": description,
            "roles": {"worker": {"goal": "Do the task."}},
            "graph": {"$START": {"_": "worker"}, "worker": {"_": "$END"}}}


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return path


def make_repo(tmp_path: Path) -> Path:
    """A git repo as uwf sees one: a folder holding `.git`."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    return repo


def registrations(cli: Cli) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in cli.log_bytes().splitlines()]
    return [event for event in events if event["type"] == "workflow.registered"]


# -- discovery -------------------------------------------------------------------------


def test_thread_start_finds_the_name_in_dot_workflow_from_a_subfolder(
        cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / ".workflow" / "tiny.yaml", tiny())
    started = ok(uwf(cli, "thread", "start", "tiny", "-p", "go", cwd=repo / "src" / "deep"))
    [registered] = registrations(cli)
    assert registered["data"] == {"name": "tiny", "hash": started["workflow"],
                                  "previous": None}
    assert ok(uwf(cli, "workflow", "show", "tiny"))["workflow"] == started["workflow"]


def test_first_use_is_recorded_once(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / ".workflow" / "tiny.yaml", tiny())
    first = ok(uwf(cli, "thread", "start", "tiny", "-p", "one", cwd=repo))
    log = cli.log_bytes()
    second = ok(uwf(cli, "thread", "start", "tiny", "-p", "two", cwd=repo / "src"))
    assert second["workflow"] == first["workflow"]
    assert len(registrations(cli)) == 1
    shown = ok(uwf(cli, "workflow", "show", "tiny", cwd=repo / "src" / "deep"))
    assert shown["workflow"] == first["workflow"]
    # Only the second thread.started was appended: show and start found it registered.
    new = cli.log_bytes()[len(log):].splitlines()
    assert [json.loads(line)["type"] for line in new] == ["thread.started"]


def test_same_content_already_registered_records_nothing_new(
        cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    # Same content, other spelling (key order, a comment): the same Workflow node.
    put = ok(uwf(cli, "workflow", "put", str(write(tmp_path / "elsewhere.yaml", tiny()))))
    write(repo / ".workflow" / "tiny.yaml",
          "# the repo's copy\n" + yaml.safe_dump(tiny(), sort_keys=False))
    log = cli.log_bytes()
    assert ok(uwf(cli, "workflow", "show", "tiny", cwd=repo))["workflow"] == put["workflow"]
    assert cli.log_bytes() == log
    assert ok(uwf(cli, "thread", "start", "tiny", "-p", "go", cwd=repo))["workflow"] == \
        put["workflow"]
    assert len(registrations(cli)) == 1


def test_dot_workflows_and_yml_are_found_too(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / ".workflows" / "plural.yml", tiny("plural"))
    shown = ok(uwf(cli, "workflow", "show", "plural", cwd=repo / "src"))
    assert shown["name"] == "plural"
    assert [event["data"]["name"] for event in registrations(cli)] == ["plural"]


def test_repo_option_names_the_repo_to_search(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / ".workflow" / "tiny.yaml", tiny())
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    refused(uwf(cli, "thread", "start", "tiny", "-p", "go", cwd=outside), 1,
            "no workflow named 'tiny'")
    started = ok(uwf(cli, "thread", "start", "tiny", "-p", "go", "--repo",
                     str(repo / "src"), cwd=outside))
    assert registrations(cli)[0]["data"]["hash"] == started["workflow"]


def test_a_file_whose_name_differs_is_refused(cli: Cli, tmp_path: Path,
                                              store_dir: Path) -> None:
    repo = make_repo(tmp_path)
    file = write(repo / ".workflow" / "tiny.yaml", tiny("other"))
    refused(uwf(cli, "workflow", "show", "tiny", cwd=repo), 1, str(file), "'other'")
    assert registrations(cli) == []


def test_a_path_is_registered_on_first_use(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / "flows" / "tiny.yaml", tiny())
    shown = ok(uwf(cli, "workflow", "show", "flows/tiny.yaml", cwd=repo))
    assert shown["name"] == "tiny"
    log = cli.log_bytes()
    assert ok(uwf(cli, "workflow", "show", "./flows/tiny.yaml", cwd=repo)) == shown
    assert cli.log_bytes() == log
    started = ok(uwf(cli, "thread", "start", "flows/tiny.yaml", "-p", "go", cwd=repo))
    assert started["workflow"] == shown["workflow"]
    assert len(registrations(cli)) == 1
    refused(uwf(cli, "workflow", "show", "flows/nope.yaml", cwd=repo), 1,
            "no workflow file flows/nope.yaml")


# -- !include ----------------------------------------------------------------------------

SCHEMA = {"type": "object", "required": ["status"],
          "properties": {"status": {"enum": ["done", "stuck"]}}}


def included_repo(tmp_path: Path) -> Path:
    """A repo whose `.workflow/team.yaml` takes a role, a prompt and a schema from files."""
    repo = make_repo(tmp_path)
    write(repo / ".workflow" / "team.yaml", (
        "name: team\n"
        "roles:\n"
        "  planner: !include roles/planner.yaml\n"
        "  worker:\n"
        "    goal: !include ../prompts/worker.md\n"
        "    meta: !include ../schemas/worker.json\n"
        "graph:\n"
        "  $START: {_: planner}\n"
        "  planner: {_: worker}\n"
        "  worker: {done: $END, stuck: planner}\n"))
    write(repo / ".workflow" / "roles" / "planner.yaml", (
        "description: Plans\n"
        "goal: !include ../../prompts/plan.txt\n"))
    write(repo / "prompts" / "worker.md", "# Work\n\nDo the plan.\n")
    write(repo / "prompts" / "plan.txt", "Make a plan.")
    write(repo / "schemas" / "worker.json", json.dumps(SCHEMA))
    return repo


def test_includes_a_role_a_prompt_and_a_schema_nested(cli: Cli, tmp_path: Path) -> None:
    repo = included_repo(tmp_path)
    put = ok(uwf(cli, "workflow", "put", ".workflow/team.yaml", cwd=repo))
    roles = ok(uwf(cli, "workflow", "show", put["workflow"]))["definition"]["roles"]
    assert roles["planner"]["description"] == "Plans"
    assert roles["planner"]["goal"] == "Make a plan."  # nested: an include in an include
    assert roles["worker"]["goal"] == "# Work\n\nDo the plan.\n"  # text, as it is
    schema = json.loads(cli.cas("get", roles["worker"]["meta"]).out)["payload"]
    assert schema == SCHEMA
    # Discovery reads the same includes: same hash, nothing new recorded.
    log = cli.log_bytes()
    assert ok(uwf(cli, "thread", "start", "team", "-p", "go", cwd=repo / "src"))[
        "workflow"] == put["workflow"]
    assert len(registrations(cli)) == 1
    assert len(cli.log_bytes()) > len(log)


def test_a_changed_include_is_a_changed_workflow(cli: Cli, tmp_path: Path) -> None:
    repo = included_repo(tmp_path)
    put = ok(uwf(cli, "thread", "start", "team", "-p", "go", cwd=repo))
    write(repo / "prompts" / "plan.txt", "Make a better plan.")
    changed = ok(uwf(cli, "thread", "start", "team", "-p", "go", cwd=repo))
    assert changed["workflow"] != put["workflow"]
    assert changed["source"] == str(repo / ".workflow" / "team.yaml")
    assert changed["storeVersion"] == put["workflow"]


def test_an_include_cycle_is_refused(cli: Cli, tmp_path: Path, store_dir: Path) -> None:
    repo = make_repo(tmp_path)
    top = write(repo / "wf.yaml", "name: loop\nroles: !include roles.yaml\n"
                "graph: {$START: {_: a}}\n")
    write(repo / "roles.yaml", "a: !include a.yaml\n")
    write(repo / "a.yaml", "goal: !include roles.yaml\n")
    line = refused(uwf(cli, "workflow", "put", str(top), cwd=repo), 1, "cycle",
                   str(repo / "roles.yaml"), str(repo / "a.yaml"))
    assert "roles.a.goal" in line  # where, in the YAML path style
    assert snapshot(store_dir) == {}


def test_an_include_of_itself_is_a_cycle(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    top = write(repo / "wf.yaml", "name: me\nroles: {a: !include wf.yaml}\n"
                "graph: {$START: {_: a}}\n")
    refused(uwf(cli, "workflow", "put", str(top)), 1, "cycle", str(top))


@pytest.mark.parametrize("target", ["../../etc/passwd", "../outside.md",
                                    "sub/../../outside.md"])
def test_a_relative_path_out_of_the_repo_is_refused(cli: Cli, tmp_path: Path,
                                                    target: str) -> None:
    repo = make_repo(tmp_path)
    write(tmp_path / "outside.md", "secret")
    top = write(repo / "flows" / "wf.yaml", tiny())
    top.write_text(top.read_text().replace("goal: Do the task.", f"goal: !include {target}"))
    refused(uwf(cli, "workflow", "put", str(top)), 1, f"!include {target}", "outside",
            str(repo), "roles.worker.goal")
    assert registrations(cli) == []


def test_an_absolute_path_outside_is_refused(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    outside = write(tmp_path / "outside.md", "secret")
    top = write(repo / "wf.yaml", tiny())
    top.write_text(top.read_text().replace("goal: Do the task.", f"goal: !include {outside}"))
    refused(uwf(cli, "workflow", "put", str(top)), 1, str(outside), "outside")
    # Inside the repo an absolute path is fine.
    write(repo / "goal.md", "Inside.")
    top.write_text(top.read_text().replace(str(outside), str(repo / "goal.md")))
    put = ok(uwf(cli, "workflow", "put", str(top)))
    assert ok(uwf(cli, "workflow", "show", put["workflow"]))["definition"]["roles"][
        "worker"]["goal"] == "Inside."


def test_a_link_out_of_the_repo_is_refused(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "zero.md").symlink_to("/dev/zero")
    (repo / "passwd.md").symlink_to(write(tmp_path / "outside.md", "secret"))
    top = write(repo / "wf.yaml", tiny())
    for link in ("zero.md", "passwd.md"):
        top.write_text(yaml.safe_dump(tiny()).replace("goal: Do the task.",
                                                      f"goal: !include {link}"))
        refused(uwf(cli, "workflow", "put", str(top)), 1, f"!include {link}", "outside")


def test_without_a_repo_the_including_files_folder_bounds_it(cli: Cli,
                                                            tmp_path: Path) -> None:
    folder = tmp_path / "loose"  # no .git above tmp_path's folders (checked below)
    assert not any((parent / ".git").exists() for parent in (folder, *folder.parents))
    write(tmp_path / "sibling.md", "next door")
    write(folder / "goal.md", "Here.")
    top = write(folder / "wf.yaml", yaml.safe_dump(tiny()).replace(
        "goal: Do the task.", "goal: !include ../sibling.md"))
    refused(uwf(cli, "workflow", "put", str(top)), 1, "outside", str(folder))
    top.write_text(top.read_text().replace("../sibling.md", "goal.md"))
    ok(uwf(cli, "workflow", "put", str(top)))


def test_an_include_of_a_fifo_is_refused_without_waiting(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    os.mkfifo(repo / "pipe.md")
    top = write(repo / "wf.yaml", yaml.safe_dump(tiny()).replace(
        "goal: Do the task.", "goal: !include pipe.md"))
    refused(uwf(cli, "workflow", "put", str(top)), 1, "pipe.md", "is a FIFO")


def test_an_include_of_a_folder_or_a_missing_file_is_refused(cli: Cli,
                                                            tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "prompts").mkdir()
    top = write(repo / "wf.yaml", "")
    for target, why in (("prompts", "is a directory"), ("nope.md", "no such file")):
        top.write_text(yaml.safe_dump(tiny()).replace("goal: Do the task.",
                                                      f"goal: !include {target}"))
        refused(uwf(cli, "workflow", "put", str(top)), 1, f"!include {target}", why)
    top.write_text(yaml.safe_dump(tiny()).replace("goal: Do the task.",
                                                  "goal: !include [a, b]"))
    refused(uwf(cli, "workflow", "put", str(top)), 1, "!include", "a file path")


def test_the_size_limit_counts_every_included_file(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    text = "x" * (600 * 1024)  # each under 1 MiB; together over
    write(repo / "a.md", text)
    write(repo / "b.md", text)
    doc = tiny()
    doc["roles"]["worker"] = {"goal": "GOAL", "procedure": "PROCEDURE"}
    top = write(repo / "wf.yaml", yaml.safe_dump(doc).replace(
        "GOAL", "!include a.md").replace("PROCEDURE", "!include b.md"))
    refused(uwf(cli, "workflow", "put", str(top)), 1, "1 MiB", "includes", "b.md")
    top.write_text(top.read_text().replace("!include b.md", "!include a.md"))
    ok(uwf(cli, "workflow", "put", str(top)))  # one file included twice is read once


def test_the_node_limit_counts_every_included_file(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write(repo / "a.yaml", {"type": "object", "enum": list(range(60_000))})
    write(repo / "b.yaml", {"type": "object", "enum": list(range(60_000, 120_000))})
    doc = tiny()
    doc["roles"]["worker"] = {"meta": "A"}
    doc["roles"]["other"] = {"meta": "B"}
    top = write(repo / "wf.yaml", yaml.safe_dump(doc).replace(
        "meta: A", "meta: !include a.yaml").replace("meta: B", "meta: !include b.yaml"))
    refused(uwf(cli, "workflow", "put", str(top)), 1, "100,000 nodes")


def test_includes_nest_at_most_32_files_deep(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    top = write(repo / "wf.yaml", yaml.safe_dump(tiny()).replace(
        "goal: Do the task.", "goal: !include g1.yaml"))
    for level in range(1, 33):
        write(repo / f"g{level}.yaml", f"!include g{level + 1}.yaml\n")
    write(repo / "g33.yaml", "Deep enough.\n")
    refused(uwf(cli, "workflow", "put", str(top)), 1, "nested more than 32 deep")
    write(repo / "g32.yaml", "Deep enough.\n")  # 32 files below the workflow file
    put = ok(uwf(cli, "workflow", "put", str(top)))
    assert ok(uwf(cli, "workflow", "show", put["workflow"]))["definition"]["roles"][
        "worker"]["goal"] == "Deep enough."


def test_a_date_in_an_included_file_names_that_file(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    role = write(repo / "role.yaml", "goal: ok\ndescription: 2024-01-01\n")
    top = write(repo / "wf.yaml", yaml.safe_dump(tiny()).replace(
        "worker:\n    goal: Do the task.", "worker: !include role.yaml"))
    assert "!include role.yaml" in top.read_text()
    refused(uwf(cli, "workflow", "put", str(top)), 1, f"line 2, column 14 of {role}",
            "a date")


def test_the_config_takes_no_include(tmp_path: Path) -> None:
    from uwf.config.configfile import load_config
    from uwf.errors import Rejected

    config = write(tmp_path / "config.yaml", "defaultAgent: !include agent.txt\n")
    write(tmp_path / "agent.txt", "mock")
    with pytest.raises(Rejected, match="the tag !include is not a JSON value"):
        load_config(config)


@pytest.mark.parametrize(("length", "in_repo"), [(5000, False), (300, True), (5000, True)])
def test_a_name_too_long_for_a_file_is_not_found(cli: Cli, tmp_path: Path, length: int,
                                                 in_repo: bool) -> None:
    """A workflow name longer than a file name may be (ENAMETOOLONG where `.workflow/`
    is looked in) is a name nobody registered: one line, exit 1, nothing written; in
    the CLI and the MCP tool alike (issue 32)."""
    repo = make_repo(tmp_path)
    if in_repo:
        write(repo / ".workflow" / "tiny.yaml", tiny())
    name = "a" * length
    before = snapshot(cli.home)
    refused(uwf(cli, "workflow", "show", name, cwd=repo), 1, "no workflow named 'aaa")
    refused(uwf(cli, "thread", "start", name, "-p", "x", cwd=repo), 1,
            "no workflow named 'aaa")
    refused(uwf(cli, "thread", "start", name + ".yaml", "-p", "x", cwd=repo), 1,
            "no workflow named 'aaa")
    refused(uwf(cli, "thread", "start", f"{name}/w.yaml", "-p", "x", cwd=repo), 1,
            "no workflow file aaa")
    from uwf.cli.main import COMMANDS
    from uwf.cli.mcp import Tools
    from uwf.invoker.context import Context

    context = Context(store_root=str(cli.home), json=True, environ=cli.env, cwd=repo)
    try:
        outcome = Tools([COMMANDS], context).call(
            "uwf_thread_start", {"workflow": name, "prompt": "x", "repo": str(repo)})
    finally:
        context.close()
    assert outcome.is_error, outcome
    assert outcome.exit_code == 1, outcome
    assert "no workflow named 'aaa" in outcome.text
    assert "internal" not in outcome.text
    assert snapshot(cli.home) == before
