"""`uwf workflow put|show|list` through the real console script, good and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLE, Cli
from tests.conftest import refused as one_line_error


def write_workflow(tmp_path: Path, document: object, name: str = "wf.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document) if not isinstance(document, str) else document)
    return str(path)


def example() -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load(EXAMPLE.read_text())
    return loaded


def test_put_registers_and_is_idempotent(cli: Cli) -> None:
    first = cli.run("workflow", "put", str(EXAMPLE))
    assert first.code == 0, first.err
    payload = json.loads(first.out)
    assert payload["name"] == "solve-issue"
    assert len(payload["workflow"]) == 13
    log = cli.log_bytes()
    assert log.count(b"\n") == 2
    again = cli.run("workflow", "put", str(EXAMPLE))
    assert json.loads(again.out) == payload
    assert cli.log_bytes() == log  # nothing new to record


def test_reregistering_points_the_name_at_the_new_hash(cli: Cli, tmp_path: Path) -> None:
    old = json.loads(cli.run("workflow", "put", str(EXAMPLE)).out)["workflow"]
    changed = example()
    changed["description"] = "Changed"
    new = json.loads(cli.run("workflow", "put", write_workflow(tmp_path, changed)).out)["workflow"]
    assert new != old
    listed = json.loads(cli.run("workflow", "list").out)
    assert [(w["name"], w["workflow"], w["versions"]) for w in listed] == [
        ("solve-issue", new, 2)
    ]
    last = json.loads(cli.run("log", "tail", "-n", "1").out)
    assert last["data"] == {"name": "solve-issue", "hash": new, "previous": old}
    # The old version is still addressable by hash.
    shown = json.loads(cli.run("workflow", "show", old).out)
    assert shown["definition"]["description"] == "End-to-end issue resolution"


def test_show_by_name_and_by_hash(cli: Cli) -> None:
    put = json.loads(cli.run("workflow", "put", str(EXAMPLE)).out)
    by_name = json.loads(cli.run("workflow", "show", "solve-issue").out)
    by_hash = json.loads(cli.run("workflow", "show", put["workflow"]).out)
    assert by_name == by_hash
    definition = by_name["definition"]
    assert set(definition["roles"]) == {"planner", "developer", "reviewer"}
    assert definition["graph"]["planner"]["unclear"] == {"role": "$END", "prompt": ""}
    assert definition["graph"]["$START"]["_"] == {"role": "planner", "prompt": "{{prompt}}"}
    schema = cli.cas("get", definition["roles"]["reviewer"]["meta"])
    assert json.loads(schema.out)["payload"]["properties"]["status"]["enum"] == [
        "approved", "rejected"
    ]


def test_output_is_identical_after_deleting_the_views(cli: Cli) -> None:
    cli.run("workflow", "put", str(EXAMPLE))
    commands = [("workflow", "list"), ("workflow", "show", "solve-issue"), ("log", "tail"),
                ("log", "verify"), ("registry", "verify")]
    before = [cli.run(*c).out for c in commands]
    shutil.rmtree(cli.home / "views")
    after = [cli.run(*c).out for c in commands]
    assert after == before
    assert json.loads(cli.run("registry", "show").out)["status"] == "valid"


def test_empty_store_reads_are_empty_and_create_nothing(cli: Cli) -> None:
    assert json.loads(cli.run("workflow", "list").out) == []
    assert cli.run("log", "tail").out == ""
    assert json.loads(cli.run("log", "verify").out)["ok"] is True
    assert not (cli.home / "events").exists()


def test_registry_show_reports_absent_stale_and_valid(cli: Cli) -> None:
    cli.run("workflow", "put", str(EXAMPLE))
    shutil.rmtree(cli.home / "views")
    shown = json.loads(cli.run("registry", "show").out)
    assert (shown["status"], shown["durability"]) == ("absent", "fsync")
    assert "rebuild" in shown["nextAction"]
    rebuilt = json.loads(cli.run("registry", "rebuild").out)
    assert rebuilt["checkpoint"] == 2
    shown = json.loads(cli.run("registry", "show").out)
    assert shown["status"] == "valid"
    assert shown["views"]["workflows"]["rows"] == 1
    assert shown["nextAction"] == "none"


def test_durability_none_says_so(cli: Cli) -> None:
    cli.env["UWF_DURABILITY"] = "none"
    cli.run("workflow", "put", str(EXAMPLE))
    assert json.loads(cli.run("registry", "show").out)["durability"] == "none"


# -- bad input: one line on stderr, the spec's exit code, the log unchanged ------------

@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("name: [unclosed\n", ("malformed YAML at line", "fix the YAML")),
        ("- just\n- a list\n", ("must be a YAML mapping",)),
        ("name: x\nroles: {a: {}}\ngraph:\n  $START: {_: a}\n  a: {ok: {role: b}}\n",
         ("graph.a.ok.role: unknown role 'b'",)),
        ("name: x\nroles: {a: {meta: {type: nope}}}\ngraph: {$START: {_: a}}\n",
         ("roles.a.meta.type: invalid JSON Schema: \"nope\" is not valid",)),
        ("name: x\nroles: {a: {}}\ngraph: {a: {_: $END}}\n", ("graph: missing $START",)),
        ("name: x\nroles: {a: {}}\ngraph: {$START: {_: {role: a, prompt: '{{#open}} x'}}}\n",
         ("graph.$START._.prompt: template does not parse",)),
        ("name: x\nroles: {a: {colour: red}}\ngraph: {$START: {_: a}}\n",
         ("roles.a.colour: unknown field",)),
        ("name: x\nroles: {a: {meta: ../../x}}\ngraph: {$START: {_: a}}\n",
         ("roles.a.meta:", "neither an inline JSON Schema nor a schema hash")),
        ("name: x\nroles: {a: {meta: '0000000000000'}}\ngraph: {$START: {_: a}}\n",
         ("schema 0000000000000 is not a schema node",)),
        ("name: '../x'\nroles: {a: {}}\ngraph: {$START: {_: a}}\n", ("name: '../x' is not",)),
        ("roles: {a: {}}\ngraph: {$START: {_: a}, ghost: {_: a}}\n",
         ("name: required", "graph.ghost: 'ghost' is not a role", "2 problems")),
        ("version: 2\nname: x\nroles: {a: {}}\ngraph: {$START: {_: a}}\n",
         ("version: unsupported version 2",)),
    ],
)
def test_invalid_workflows_are_rejected_and_write_nothing(
    cli: Cli, tmp_path: Path, text: str, fragments: tuple[str, ...]
) -> None:
    cli.run("workflow", "put", str(EXAMPLE))
    log = cli.log_bytes()
    cas_before = sorted(p.name for p in (cli.home / "cas").rglob("*.json"))
    result = cli.run("workflow", "put", write_workflow(tmp_path, text))
    one_line_error(result, 1, *fragments)
    assert cli.log_bytes() == log
    assert sorted(p.name for p in (cli.home / "cas").rglob("*.json")) == cas_before


def test_missing_file_and_unknown_workflow(cli: Cli, tmp_path: Path) -> None:
    one_line_error(cli.run("workflow", "put", str(tmp_path / "nope.yaml")), 1, "no such file")
    one_line_error(cli.run("workflow", "show", "nope"), 1, "no workflow named 'nope'",
                   "uwf workflow list")
    # A path is a file (`workflow show FILE` registers one), never a name.
    one_line_error(cli.run("workflow", "show", "../../x"), 1, "no workflow file ../../x")
    one_line_error(cli.run("workflow", "show", "0000000000000"), 1, "not found")
    assert cli.log_bytes() == b""


def test_usage_errors_exit_2(cli: Cli) -> None:
    one_line_error(cli.run("workflow", "put"), 2, "the following arguments are required")
    one_line_error(cli.run("workflow", "frobnicate"), 2, "invalid choice")
    one_line_error(cli.run("log", "tail", "-n", "-3"), 2, "must be 0 or more")
    one_line_error(cli.run("--now", "yesterday", "workflow", "list"), 2, "invalid time")
    cli.env["UWF_DURABILITY"] = "sometimes"
    one_line_error(cli.run("workflow", "list"), 2, "UWF_DURABILITY must be fsync or none")


def test_now_fixes_event_time(cli: Cli) -> None:
    cli.run("--now", "2026-01-02T03:04:05.678Z", "workflow", "put", str(EXAMPLE))
    event = json.loads(cli.run("log", "tail", "-n", "1").out)
    assert event["ts"] == "2026-01-02T03:04:05.678Z"
    assert event["id"] < "01KF"  # the ULID carries the same instant


def test_log_tail_filters(cli: Cli, tmp_path: Path) -> None:
    cli.run("workflow", "put", str(EXAMPLE))
    other = example()
    other["name"] = "other"
    cli.run("workflow", "put", write_workflow(tmp_path, other))
    lines = cli.run("log", "tail", "--type", "workflow.registered").out.splitlines()
    assert [json.loads(line)["subject"] for line in lines] == [
        "workflow/solve-issue", "workflow/other"
    ]
    assert len(cli.run("log", "tail", "--type", "workflow").out.splitlines()) == 2
    assert len(cli.run("log", "tail", "--subject", "workflow/other").out.splitlines()) == 1
    assert [json.loads(x)["seq"] for x in cli.run("log", "tail", "--since", "1").out.splitlines()
            ] == [2, 3]
    assert len(cli.run("log", "tail", "-n", "1").out.splitlines()) == 1


def test_json_cas_round_trip_and_errors(cli: Cli, tmp_path: Path) -> None:
    text_hash = cli.cas("put", "--type", "Text", stdin='"hello"')
    assert text_hash.code == 0, text_hash.err
    hash_ = text_hash.out.strip()
    assert cli.cas("hash", "--type", "Text", stdin='"hello"').out.strip() == hash_
    node = cli.cas("get", hash_).out
    assert json.loads(node)["payload"] == "hello"
    # A node printed by get is accepted back by put.
    assert cli.cas("put", stdin=node).out.strip() == hash_
    assert cli.cas("has", hash_).code == 0
    assert json.loads(cli.cas("verify", hash_).out)["ok"] is True
    one_line_error(cli.cas("get", "../../x"), 2, "invalid hash '../../x'")
    one_line_error(cli.cas("get", "0000000000000"), 1, "not found")
    one_line_error(cli.cas("has", "0000000000000"), 1, "not found")
    one_line_error(cli.cas("put", "--type", "Text", stdin="{not json"), 2, "is not JSON")
    one_line_error(cli.cas("put", "--type", "Text", stdin="42"), 1, "does not match")
    one_line_error(cli.cas("put", "--type", "NoSuchSchema", stdin='"x"'), 1, "no schema named")
    one_line_error(cli.cas("gc"), 2, "--dry-run")
    one_line_error(cli.cas("verify"), 2, "hashes or --all")


def test_json_cas_gc_removes_only_unreachable_nodes(cli: Cli) -> None:
    put = json.loads(cli.run("workflow", "put", str(EXAMPLE)).out)
    orphan = cli.cas("put", "--type", "Text", stdin='"orphan"').out.strip()
    listed = json.loads(cli.cas("gc", "--dry-run", "--grace", "0").out)
    assert listed == {"unreachable": [orphan], "count": 1}
    assert cli.cas("has", orphan).code == 0
    removed = json.loads(cli.cas("gc", "--yes", "--grace", "0").out)
    assert removed["removed"] == [orphan]
    assert cli.cas("has", orphan).code == 1
    assert json.loads(cli.cas("verify", "--all").out)["ok"] is True
    assert cli.run("workflow", "show", put["workflow"]).code == 0
    assert json.loads(cli.run("log", "verify").out)["ok"] is True


def test_json_cas_walk_and_schema_list(cli: Cli) -> None:
    put = json.loads(cli.run("workflow", "put", str(EXAMPLE)).out)
    walked = json.loads(cli.cas("walk", put["workflow"]).out)
    assert walked[0]["hash"] == put["workflow"]
    assert {w["path"] for w in walked[1:]} == {
        "roles.planner.meta", "roles.developer.meta", "roles.reviewer.meta"
    }
    titles = {s["title"] for s in json.loads(cli.cas("schema", "list").out)}
    assert {"Workflow", "StartNode", "StepNode", "Text"} <= titles


def test_log_tail_follow_prints_new_events_as_they_land(cli: Cli, tmp_path: Path) -> None:
    import subprocess
    import sys

    cli.run("workflow", "put", str(EXAMPLE))
    exe = str(Path(sys.executable).parent / "uwf")
    follower = subprocess.Popen([exe, "log", "tail", "-n", "1", "--follow"], env=cli.env,
                                stdout=subprocess.PIPE, text=True)
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert first["seq"] == 2
        other = example()
        other["name"] = "later"
        cli.run("workflow", "put", write_workflow(tmp_path, other))
        later = json.loads(follower.stdout.readline())  # blocks until it is printed
        assert later["seq"] == 3
        assert later["subject"] == "workflow/later"
    finally:
        follower.terminate()
        follower.wait(timeout=10)
