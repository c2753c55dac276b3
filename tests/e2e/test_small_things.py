"""Small things upstream users hit (issue 8, item 6): a store root that is a file,
no command at all, a UTF-8 byte-order mark, `--format json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, Cli


@pytest.mark.parametrize("prog", ["uwf", "json-cas"])
def test_a_store_root_that_is_a_file_is_one_line(cli: Cli, tmp_path: Path, prog: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a store")
    args = ["schema", "list"] if prog == "json-cas" else ["workflow", "list"]
    result = cli.run("--store", str(afile), *args, prog=prog)
    assert result.code == 2
    assert result.err == (f"{prog}: error: the store root {afile} is not a folder; give a "
                          "folder with --store or UWF_HOME\n")
    assert afile.read_text() == "not a store"


@pytest.mark.parametrize("prog", ["uwf", "json-cas"])
@pytest.mark.cli_processes  # the console scripts' own argv
def test_no_command_prints_the_usage(cli: Cli, prog: str) -> None:
    result = cli.run(prog=prog)
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith(f"usage: {prog} ")
    assert "COMMAND" in result.err
    assert "examples:" in result.err


def test_a_byte_order_mark_is_tolerated(cli: Cli, tmp_path: Path) -> None:
    bom = "\ufeff"
    workflow = tmp_path / "bom.yaml"
    workflow.write_text(bom + EXAMPLE.read_text("utf-8"), "utf-8")
    plain = cli.run("workflow", "put", str(EXAMPLE))
    assert plain.code == 0, plain.err
    with_bom = cli.run("workflow", "put", str(workflow))
    assert with_bom.code == 0, with_bom.err
    assert json.loads(with_bom.out) == json.loads(plain.out)
    put = cli.cas("put", "--type", "Text", "-", stdin=bom + '"hello"')
    assert put.code == 0, put.err
    assert put.out == cli.cas("put", "--type", "Text", "-", stdin='"hello"').out


@pytest.mark.parametrize("answer", [
    "---\nstatus: ready\nplan: x\n---\nnotes",  # front matter
    '{"status": "ready", "plan": "x"}',  # the whole answer as JSON
    '```json\n{"status": "ready", "plan": "x"}\n```',
])
def test_a_byte_order_mark_before_an_agent_answer_is_tolerated(answer: str) -> None:
    from uwf.agents.prompting import extract_output

    assert extract_output("\ufeff" + answer) == extract_output(answer)
    assert extract_output(answer) == {"status": "ready", "plan": "x"}


@pytest.mark.parametrize("where", ["before", "after"])
def test_format_json_is_json(cli: Cli, where: str) -> None:
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    args = ["workflow", "list"]
    argv = ["--format", "json", *args] if where == "before" else [*args, "--format", "json"]
    result = cli.run(*argv)
    assert result.code == 0, result.err
    assert json.loads(result.out) == json.loads(cli.run("--json", *args).out)
    wrong = cli.run("--format", "xml", *args)
    assert wrong.code == 2
    assert "invalid choice: 'xml'" in wrong.err


@pytest.mark.parametrize("flag", ["--limit", "--offset"])
def test_thread_list_refuses_a_negative_page(cli: Cli, flag: str) -> None:
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    before = cli.log_bytes()
    result = cli.run("thread", "list", flag, "-1")
    assert result.code == 2
    assert result.err == (f"uwf: error: argument {flag}: must be 0 or more, not -1; "
                          "see `uwf thread list --help`\n")
    assert cli.log_bytes() == before
