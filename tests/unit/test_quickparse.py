"""The plain command lines read without argparse (`uwf.cli.quickparse`, issue 30 item
6) read as argparse reads them: the same command, the same arguments, the same global
options; every other shape is left to argparse. And the JSON the CLI prints is
`json.dumps`'s text whether msgspec or json writes it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from uwf.cli import jsoncas
from uwf.cli import main as uwf_cli
from uwf.cli.parsing import parse
from uwf.cli.quickparse import quick_parse
from uwf.cli.render import dump_json
from uwf.invoker.params import params
from uwf.invoker.spec import Group

GROUPS = {"uwf": uwf_cli.COMMANDS, "json-cas": jsoncas.COMMANDS}
GLOBALS = [[], ["--store", "/tmp/s"], ["--store=/tmp/s", "--json"],
           ["--json", "--now", "2026-01-02T03:04:05Z", "--format", "json"],
           ["--now=1700000000000", "--format=json", "--store", "a b"]]
OPTIONS = ("store", "json", "format", "now")


def same_as_argparse(group: Group, argv: list[str]) -> bool:
    """Whether the quick reading of `argv` is argparse's (False: it left it to argparse)."""
    quick = quick_parse(group, argv)
    if quick is None:
        return False
    command, args, options = parse(group, argv)
    assert quick[0] is command
    assert quick[1] == args
    assert ({name: getattr(quick[2], name, None) for name in OPTIONS}
            == {name: getattr(options, name, None) for name in OPTIONS})
    return True


@pytest.mark.parametrize("prog", GROUPS)
def test_every_plain_command_line_reads_as_argparse_reads_it(prog: str) -> None:
    group = GROUPS[prog]
    read = set()
    for command in group.commands:
        positionals = [param for param in params(command.args) if param.positional]
        for given in GLOBALS:
            argv = [*given, *command.path, *(f"word{i}" for i in range(len(positionals)))]
            if same_as_argparse(group, argv):
                read.add(command.name)
    assert ("workflow show" in read) if prog == "uwf" else read  # the probe saw some


@pytest.mark.parametrize("argv", [
    [], ["--help"], ["workflow", "show", "--help"], ["workflow", "show", "-h"],
    ["workflow", "show"], ["workflow", "show", "a", "b"], ["workflow", "show", "-x"],
    ["workflow", "show", "--", "a"], ["workflow", "show", "a", "--json"],
    ["--st", "S", "workflow", "show", "a"], ["--js", "workflow", "show", "a"],
    ["--json=1", "workflow", "show", "a"], ["--format", "yaml", "workflow", "show", "a"],
    ["--store", "-S", "workflow", "show", "a"], ["--store"], ["--version"],
    ["workflow", "show", "a\x00"], ["workflow", "show", "\udcff"],
    ["workflow", "nope", "a"], ["workflow"], ["thread", "list", "--limit", "3"],
])
def test_other_shapes_are_left_to_argparse(argv: list[str]) -> None:
    assert quick_parse(uwf_cli.COMMANDS, argv) is None


@pytest.mark.parametrize("payload", [
    {"a": [], "b": {}, "c": [1, {"d": None, "e": True}], "f": "é\u2028\x01\x7f\"\\/",
     "g": 1.5, "h": -0.0, "i": 0.1, "j": 2 ** 70, "k": (1, "x")},
    [1e16, 1e-07], {"n": float("nan")}, {"inf": float("inf")}, {1: "int key"},
    {"s": "\ud800"}, "text", 3, None, [], {},
])
def test_json_output_is_json_dumps_text(payload: Any) -> None:
    assert dump_json(payload) == json.dumps(payload, ensure_ascii=False, indent=2)
