"""Commands are declared once, as typed Structs: argparse and the JSON Schemas
(for other surfaces such as an MCP server) come from the same declaration, and
`main(argv)` runs any number of commands in one process, independently."""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import EXAMPLE
from uwf.cli import jsoncas
from uwf.cli import main as uwf_cli
from uwf.cli.parsing import command_parsers
from uwf.errors import UsageError
from uwf.invoker import invoke as invoker
from uwf.invoker.context import Context
from uwf.invoker.spec import Command, Group, command_schemas

GROUPS = {"uwf": uwf_cli.COMMANDS, "json-cas": jsoncas.COMMANDS}
DECLARED = [(prog, command) for prog, group in GROUPS.items() for command in group]
IDS = [f"{prog} {command.name}" for prog, command in DECLARED]
GLOBAL = {"help", "store", "json", "format", "now"}
ULID = "01J7K9M2XNPQR5VWBCDF8G3H4T"  # a well-formed thread id


def arguments(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """A command's own arguments, as argparse holds them, by dest."""
    return {action.dest: action for action in parser._actions if action.dest not in GLOBAL}


def schema_type(prop: dict[str, Any]) -> tuple[Any, bool]:
    """The JSON type of a property (or its enum) and whether null is allowed."""
    branches = prop.get("anyOf", [prop])
    nullable = {"type": "null"} in branches
    (branch,) = [b for b in branches if b != {"type": "null"}]
    return branch.get("type", ("enum", tuple(branch.get("enum", ())))), nullable


def argparse_type(action: argparse.Action) -> Any:
    if isinstance(action, argparse._StoreTrueAction):
        return "boolean"
    if action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction):
        return "array"
    if action.choices is not None:
        return ("enum", tuple(action.choices))
    return {int: "integer", float: "number", None: "string"}[action.type]  # type: ignore[index]


@pytest.mark.parametrize(("prog", "command"), DECLARED, ids=IDS)
def test_schema_properties_are_the_parsers_arguments(prog: str, command: Command[Any]) -> None:
    schema = command_schemas(GROUPS[prog])[command.name]
    parsed = arguments(command_parsers(GROUPS[prog])[command.path])
    assert schema["type"] == "object"
    assert schema["description"] == command.help
    assert schema.get("additionalProperties") is False
    properties = schema["properties"]
    assert set(properties) == set(parsed)
    assert set(schema.get("required", [])) == {d for d, a in parsed.items() if a.required}
    for dest, action in parsed.items():
        prop = properties[dest]
        kind, nullable = schema_type(prop)
        assert kind == argparse_type(action), dest
        description = prop.get("description") or prop.get("anyOf", [{}])[0].get("description")
        assert description == action.help, dest
        if not action.required:
            assert prop["default"] == action.default, dest
            assert nullable == (action.default is None), dest
        else:
            assert "default" not in prop, dest


def test_every_command_has_a_schema() -> None:
    for prog, group in GROUPS.items():
        assert set(command_schemas(group)) == {command.name for command in group}, prog


def test_a_schema_as_another_surface_sees_it() -> None:
    schemas = command_schemas(uwf_cli.COMMANDS)
    assert schemas["thread start"] == {
        "type": "object",
        "description": "Create a thread of a workflow (no step runs); a workflow file is "
                       "registered first.",
        "properties": {
            "workflow": {"description": "workflow name or hash, or a workflow file (.yaml, "
                                        ".yml, .json, or a path with a folder) to register "
                                        "first; a name is also looked for in .workflows/ "
                                        "and .workflow/ folders, here and up to the repo's "
                                        "top",
                         "type": "string"},
            "prompt": {"description": "the task: the thread's user prompt", "type": "string"},
            "repo": {"description": "repo the thread belongs to (default: git top level of the "
                                    "working directory)",
                     "anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["workflow", "prompt"],
        "additionalProperties": False,
    }
    run = schemas["thread run"]["properties"]
    assert run["timeout"]["exclusiveMinimum"] == 0
    assert run["max_steps"] == {"description": run["max_steps"]["description"],
                                "type": "integer", "minimum": 1, "maximum": 2**63 - 1,
                                "default": 200}
    tail = schemas["log tail"]["properties"]
    assert tail["n"]["anyOf"][0] == {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
    assert schemas["registry show"]["properties"]["scope"]["enum"] == ["home", "repo"]
    assert "self" in command_schemas(jsoncas.COMMANDS)["hash"]["properties"]


def test_schemas_are_plain_json() -> None:
    for group in GROUPS.values():
        assert json.loads(json.dumps(command_schemas(group))) == command_schemas(group)


# -- usage errors from the declaration ------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["log", "tail", "-n", "-1"], "argument -n: must be 0 or more, not -1"),
    (["log", "tail", "--since", "-3"], "argument --since: must be 0 or more, not -3"),
    (["log", "tail", "-n", "x"], "argument -n: invalid int value: 'x'"),
    (["thread", "step", ULID, "--timeout", "0"], "argument --timeout: must be positive, not 0"),
    (["thread", "step", ULID, "--timeout", "nan"],
     "argument --timeout: must be positive, not nan"),
    (["thread", "run", ULID, "--max-steps", "0"],
     "argument --max-steps: must be 1 or more, not 0"),
    (["agent", "context", ULID, "R", "--history", "-1"],
     "argument --history: must be N|all, not '-1'"),
    (["registry", "show", "--scope", "nope"], "argument --scope: invalid choice: 'nope'"),
    (["thread", "start", "wf"], "the following arguments are required: -p/--prompt"),
    (["--now", "yesterday", "workflow", "list"], "invalid time 'yesterday'"),
])
def test_bad_values_are_one_line_usage_errors(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    code = uwf_cli.main(["--store", str(tmp_path / "store"), *argv])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("uwf: error: ")
    assert message in err
    assert not (tmp_path / "store").exists()  # refused before any work


def test_help_returns_zero_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert uwf_cli.main(["thread", "step", "--help"]) == 0
    assert "uwf thread step 01J7K9M2XNPQR5VWBCDF8G3H4T" in capsys.readouterr().out
    assert jsoncas.main(["gc", "--help"]) == 0


# -- one process, many commands ---------------------------------------------------------

@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [name for name in os.environ if name.startswith("UWF_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("UWF_DURABILITY", "none")


def in_process(main: Callable[[Sequence[str] | None], int], capsys: pytest.CaptureFixture[str],
               *argv: str) -> str:
    """stdout of `main(argv)`, which must succeed quietly."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return out


def events(capsys: pytest.CaptureFixture[str], store: str) -> list[dict[str, Any]]:
    out = in_process(uwf_cli.main, capsys, "--store", store, "log", "tail", "-n", "99")
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.usefixtures("clean_env")
def test_main_runs_many_commands_in_one_process(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    sigterm = signal.getsignal(signal.SIGTERM)
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    times = {first: "2026-01-02T03:04:05.678Z", second: "2027-06-07T08:09:10.111Z"}
    for store, now in times.items():
        put = in_process(uwf_cli.main, capsys, "--store", store, "--now", now,
                         "workflow", "put", str(EXAMPLE))
        assert json.loads(put)["name"] == "solve-issue"
    # No --now: the wall clock, whatever the commands before said.
    in_process(uwf_cli.main, capsys, "--store", second, "thread", "start", "solve-issue",
               "-p", "Fix the login bug")
    first_log, second_log = events(capsys, first), events(capsys, second)
    assert {event["ts"] for event in first_log} == {times[first]}
    assert [event["type"] for event in first_log] == [event["type"] for event in
                                                      second_log[:len(first_log)]]
    assert second_log[0]["ts"] == times[second]
    assert second_log[-1]["type"] == "thread.started"
    assert second_log[-1]["ts"] not in times.values()
    # json-cas too, against each store, in the same process.
    schemas = [json.loads(in_process(jsoncas.main, capsys, "--store", store, "schema", "list"))
               for store in times]
    assert schemas[0] == schemas[1]
    assert "UWF_NOW" not in os.environ
    assert signal.getsignal(signal.SIGTERM) == sigterm


@pytest.mark.usefixtures("clean_env")
def test_a_handler_is_callable_without_the_command_line(tmp_path: Path) -> None:
    """What another surface does: argument values, a Context, the one invoker."""
    group: Group = uwf_cli.COMMANDS
    commands = {command.name: command for command in group}
    context = Context(store_root=str(tmp_path / "store"), now="2026-01-02T03:04:05Z",
                      environ=dict(os.environ), cwd=tmp_path)
    try:
        put = commands["workflow put"]
        registered = invoker.invoke(put, invoker.arguments(put, {"file": str(EXAMPLE)}), context)
        listed = commands["workflow list"]
        rows = invoker.invoke(listed, invoker.arguments(listed, {}), context)
    finally:
        context.close()
    assert [row.workflow for row in rows] == [registered.workflow]
    with pytest.raises(invoker.Invalid) as refused:  # a classified refusal
        invoker.arguments(commands["thread run"],
                          {"thread": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "max_steps": 0})
    assert refused.value.exit_code == 2
    assert refused.value.line() == ("argument --max-steps: must be 1 or more, not 0; "
                                    "see `uwf thread run --help`")
    assert refused.value.worded(lambda param: f"parameter {param.name}") == (
        "parameter max_steps: must be 1 or more, not 0")
    with pytest.raises(UsageError, match="invalid time"):
        Context(now="yesterday", environ={}, cwd=None)


def _outcome(parse: Callable[[], tuple[Command[Any], Any, argparse.Namespace]],
             capsys: pytest.CaptureFixture[str]) -> tuple[Any, ...]:
    """What parsing gave: the command, its arguments and the global options; or the
    exit code and what was written."""
    try:
        command, args, namespace = parse()
    except SystemExit as exc:
        out = capsys.readouterr()
        return ("exit", exc.code, out.out, out.err)
    globals_ = {name: getattr(namespace, name, None) for name in ("store", "json", "format",
                                                                  "now")}
    return ("parsed", command.path, msgspec.to_builtins(args), globals_)


def _golden_argvs() -> list[tuple[str, list[str]]]:
    """Every command line of the CLI transcript (tests/golden/cli.txt), split as a shell
    would."""
    import shlex

    found = []
    golden = Path(__file__).resolve().parent.parent / "golden" / "cli.txt"
    for line in golden.read_text("utf-8").splitlines():
        if line.startswith(("$ uwf ", "$ json-cas ")):
            words = shlex.split(line[2:].split(" < ")[0].split(" | ")[0])
            found.append((words[0], words[1:]))
    return found


ODD_ARGVS = [
    ["--json", "workflow", "list"], ["--store=/tmp/x", "--json", "workflow", "list"],
    ["--sto", "/tmp/x", "workflow", "list"], ["--js", "queue", "list"], ["--s", "x", "history"],
    ["--now", "2026-01-01T00:00:00Z", "thread", "show", ULID],
    ["--format", "json", "run", "counts"], ["--format", "yaml", "run", "counts"],
    ["--json=1", "workflow", "list"], ["--", "workflow", "list"], ["-h"], ["--help"],
    ["--he"], ["workflow"], ["workflow", "-h"], ["workflow", "nope"], ["nope"],
    ["workflow", "list", "-h"], ["workflow", "list", "extra"], ["history", "--limit", "-1"],
    ["history", "--lim", "3"], ["run", "search", "--status", "lost"],
    ["thread", "show"], ["thread", "show", "not-a-ulid"], ["queue", "add", "--bogus"],
    ["--store"], ["--now"], ["--json", "--json", "run", "counts", "--json"],
    ["run", "counts", "--store", "/tmp/y"], ["sched", "lease", "--limit", "2", "--json"],
]


@pytest.mark.parametrize("prog", ["uwf", "json-cas"])
def test_a_command_lines_branch_parses_as_the_whole_tree_does(
        prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`parse` builds only the branch of the command a command line names: for every
    command line of the transcript and odd ones (global options before it, abbreviated,
    help, unknown or incomplete commands, bad values), the result or the error is the
    one the whole tree gives."""
    from uwf.cli.parsing import build_parser, parse, parse_with

    group = GROUPS[prog]
    argvs = [argv for name, argv in _golden_argvs() if name == prog] + ODD_ARGVS
    assert len(argvs) > 60
    whole = build_parser(group)
    for argv in argvs:
        branch = _outcome(functools.partial(parse, group, argv), capsys)
        tree = _outcome(functools.partial(parse_with, whole, argv), capsys)
        assert branch == tree, argv
