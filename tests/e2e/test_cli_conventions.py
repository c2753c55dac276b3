"""The conventions people bring to a command line (docs/cli.md): `--version`, shell
completion generated from the declarations, ids in any case and as a unique prefix
(on every surface), lists that page on a terminal, and panels that show nested values
as indented blocks and never `None`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN, Cli, snapshot
from tests.e2e.test_terminal import on_terminal
from tests.queuekit import Queue, queue_on
from tests.threadkit import Kit, make_kit, one_line_error
from uwf import __version__
from uwf.cli.render import page_footer, panel

NOW = "2026-12-01T10:00:00Z"  # one instant: ids minted now share their first 10 characters


def _common(ids: list[str]) -> int:
    """How many leading characters `ids` share."""
    shared = 0
    while all(len(text) > shared and text[shared] == ids[0][shared] for text in ids):
        shared += 1
    return shared


# -- --version ----------------------------------------------------------------------------

@pytest.mark.parametrize("prog", ["uwf", "json-cas"])
def test_version(proc_cli: Cli, prog: str) -> None:
    for argv in (["--version"], ["--store", str(proc_cli.home), "--version"]):
        result = proc_cli.run(*argv, prog=prog)
        assert (result.code, result.out, result.err) == (0, f"{prog} {__version__}\n", "")
    from importlib.metadata import version

    assert version("uwf") == __version__  # the package's version is this one


# -- ids: any case, a unique prefix, an ambiguous one refused ------------------------------

@pytest.fixture
def twins(cli: Cli, tmp_path: Path) -> tuple[Kit, list[str]]:
    """Two threads started at the same instant (their ids share 10+ characters) and one
    at another."""
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    cli.env["UWF_NOW"] = NOW
    twins = [kit.start(prompt="one"), kit.start(prompt="two")]
    del cli.env["UWF_NOW"]
    assert _common(twins) >= 10
    return kit, twins


def test_an_id_in_lower_case_or_a_unique_prefix_is_accepted(
        twins: tuple[Kit, list[str]]) -> None:
    kit, (first, second) = twins
    unique = first[:_common([first, second]) + 1]
    for given in (first.lower(), unique, unique.lower()):
        assert kit.ok("thread", "show", given)["thread"] == first
        assert kit.ok("run", "show", given)["run"]["runId"] == first
    assert kit.ok("thread", "show", second[:_common([first, second]) + 1])["thread"] == second
    # A command that writes gets the whole id too.
    kit.ok("thread", "kill", unique.lower(), "--reason", "a prefix was enough")
    assert kit.show(first)["status"] == "killed"


def test_a_node_hash_in_lower_case_is_accepted(twins: tuple[Kit, list[str]]) -> None:
    kit, (first, _) = twins
    assert kit.step(first).code == 0
    [step] = kit.log(first)
    assert kit.node(step["hash"].lower())["payload"]["role"] == step["role"]
    forked = kit.ok("thread", "fork", first.lower(), "--at", step["hash"].lower())
    assert forked["head"] == step["hash"]


def test_an_ambiguous_prefix_is_refused_naming_the_matches(
        twins: tuple[Kit, list[str]]) -> None:
    kit, ids = twins
    prefix = ids[0][:_common(ids)].lower()
    before = snapshot(kit.cli.home)
    for command in (["thread", "show"], ["thread", "kill"], ["run", "show"],
                    ["run", "archive"]):
        line = one_line_error(kit.uwf(*command, prefix), 2, "is the start of several",
                              "give more of the id")
        assert all(thread in line for thread in ids), line
    assert snapshot(kit.cli.home) == before


def test_a_prefix_no_id_has_is_not_found(twins: tuple[Kit, list[str]]) -> None:
    kit, _ = twins
    one_line_error(kit.uwf("thread", "show", "7ZZZ"), 1, "no thread id starts with 7ZZZ",
                   "uwf thread list --all")
    one_line_error(kit.uwf("run", "show", "7zzz"), 1, "no run id starts with 7ZZZ")


def test_queue_entry_and_lease_ids_resolve_too(cli: Cli) -> None:
    queue: Queue = queue_on(cli)
    one, two = (queue.add(now=NOW, prompt=prompt) for prompt in ("one", "two"))
    shared = _common([one, two])
    line = queue.refused(2, "queue", "show", one[:shared])
    assert one in line
    assert two in line
    assert queue.entry(one[:shared + 1].lower())["id"] == one
    [lease] = queue.lease("--limit", "1", now=NOW)
    assert lease["id"] == one
    queue.ok("sched", "complete", one[:shared + 1], "--lease", lease["leaseId"][:12].lower(),
             now=NOW)
    assert queue.entry(one)["status"] == "drained"


def test_mcp_resolves_ids_as_the_cli_does(twins: tuple[Kit, list[str]]) -> None:
    from uwf.cli.main import COMMANDS
    from uwf.cli.mcp import Tools
    from uwf.invoker.context import Context

    kit, (first, second) = twins
    context = Context(store_root=str(kit.cli.home), environ=kit.cli.env,
                      cwd=kit.cli.home.parent)
    try:
        tools = Tools([COMMANDS], context)
        unique = first[:_common([first, second]) + 1].lower()
        shown = tools.call("uwf_thread_show", {"thread": unique})
        assert not shown.is_error
        assert shown.payload["thread"] == first
        refused = tools.call("uwf_thread_show", {"thread": first[:_common([first, second])]})
        assert refused.exit_code == 2
        assert "is the start of several" in refused.text
    finally:
        context.close()


# -- completion --------------------------------------------------------------------------------

def _complete(env: dict[str, str], script: Path, line: str) -> list[str]:
    """What bash offers for `line` (the cursor at its end), the completion script
    sourced and its function driven as bash's `complete -F` would."""
    driver = f"""
source {shlex.quote(str(script))}
COMP_LINE={shlex.quote(line)}
COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_TYPE=9
_python_argcomplete "${{COMP_WORDS[0]}}" "${{COMP_WORDS[COMP_CWORD]}}" \
    "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", driver], env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    return [word.strip() for word in done.stdout.splitlines() if word.strip()]


def test_completion_scripts_for_each_shell(cli: Cli) -> None:
    for shell, says in (("bash", "complete "), ("zsh", "compdef"), ("fish", "complete ")):
        result = cli.run("completion", shell)
        assert (result.code, result.err) == (0, ""), result
        assert says in result.out
        assert "_python_argcomplete" in result.out or "__fish" in result.out
        assert "json-cas" in result.out
    one_line_error(cli.run("completion", "tcsh"), 2, "invalid choice: 'tcsh'")


def test_bash_completes_commands_flags_and_thread_ids(
        twins: tuple[Kit, list[str]], tmp_path: Path) -> None:
    kit, ids = twins
    script = tmp_path / "uwf.bash"
    result = kit.uwf("completion", "bash")
    assert result.code == 0, result
    script.write_text(result.out, "utf-8")
    env = {**kit.cli.env, "PATH": f"{BIN}{os.pathsep}{kit.cli.env['PATH']}"}
    assert _complete(env, script, "uwf thr") == ["thread"]
    assert set(_complete(env, script, "uwf thread s")) == {"start", "step", "show"}
    assert _complete(env, script, "uwf thread list --wor") == ["--workflow"]
    assert _complete(env, script, "uwf queue list --status dra") == ["drained"]
    assert set(_complete(env, script, "uwf thread show ")) >= set(ids)
    assert sorted(_complete(env, script, f"uwf thread show {ids[0][:10].lower()}")) \
        == sorted(ids)
    assert _complete(env, script, "json-cas ve") == ["verify"]
    # --store names the store the ids come from; one that does not exist offers none.
    assert _complete(env, script, f"uwf --store {tmp_path / 'none'} thread show 0") == []
    assert not (tmp_path / "none").exists()


# -- paging and panels --------------------------------------------------------------------------

def test_queue_list_pages_on_a_terminal_and_not_when_piped(cli: Cli, tmp_path: Path) -> None:
    queue = queue_on(cli)
    lines = [{"workflow": "solve-issue", "prompt": f"task {n}"} for n in range(53)]
    queue.ok("queue", "add", "--batch", str(queue.batch(tmp_path / "many.jsonl", lines)))
    code, out = on_terminal(cli.env, "queue", "list")
    assert code == 0, out
    rows = [line for line in out.splitlines() if line.startswith("01")]
    assert len(rows) == 50
    assert "showing 1-50 of 53 entries; next page: --offset 50" in out
    code, out = on_terminal(cli.env, "queue", "list", "--offset", "50")
    assert "showing 51-53 of 53 entries" in out
    assert "next page" not in out
    piped = queue.ok("queue", "list")
    assert len(piped["entries"]) == 53
    assert piped["total"] == 53
    code, out = on_terminal(cli.env, "queue", "list", "--json")
    assert len(json.loads(out)["entries"]) == 53


def test_page_footer() -> None:
    assert page_footer(10_009, 0, 50, ("entry", "entries")) == \
        "showing 1-50 of 10,009 entries; next page: --offset 50"
    assert page_footer(1, 0, 1, ("run", "runs"), " (home)") == "showing 1-1 of 1 run (home)"
    assert page_footer(0, 0, 0, ("run", "runs")) == "0 runs"
    assert page_footer(3, 5, 0, ("run", "runs")) == "3 runs; none from --offset 5"


def test_a_panel_indents_what_nests_and_never_says_none() -> None:
    shown = panel({"added": True, "entry": {"id": "01X", "run": None, "tags": ["a", "b"],
                                            "lease": {"id": "01Y", "attempt": 1}},
                   "pools": [{"session": None, "ceiling": 1}, {"session": "s1", "ceiling": 2}],
                   "skipped": [], "steps": [{"role": "planner", "output": {"plan": "x"}}]})
    assert shown.splitlines() == [
        "added    true",
        "entry",
        "  id     01X",
        "  run    -",
        "  tags   a, b",
        "  lease",
        "    id       01Y",
        "    attempt  1",
        "pools",
        "  SESSION  CEILING",
        "  -        1",
        "  s1       2",
        "skipped  (none)",
        "steps",
        "  - role    planner",
        "    output",
        "      plan  x",
    ]
    assert "None" not in shown
    assert "{" not in shown


def _on_terminal_ok(env: dict[str, str], *args: str) -> str:
    code, out = on_terminal(env, *args)
    assert code == 0, out
    assert "None" not in out, out
    assert '{"' not in out, out
    return out


def test_panels_on_a_terminal(cli: Cli, tmp_path: Path) -> None:
    queue = queue_on(cli)
    entry = queue.add(prompt="shown")
    out = _on_terminal_ok(cli.env, "sched", "policy", "show")
    assert "policy\n  maxConcurrent  1" in out.replace("\r\n", "\n")
    out = _on_terminal_ok(cli.env, "queue", "logs", entry)
    assert "registered      ready  " in out
    assert "prompt=shown" in out
    _on_terminal_ok(cli.env, "sched", "plan")
    _on_terminal_ok(cli.env, "queue", "add", "--workflow", "solve-issue", "-p", "again")


def test_thread_log_on_a_terminal_is_for_people(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    assert kit.step(thread).code == 0
    [record] = kit.log(thread)  # piped: a JSON line a step, as before
    out = _on_terminal_ok(cli.env, "thread", "log", thread.lower()).replace("\r\n", "\n")
    head = f"  1  {record['role']}  {record['status']}  by {record['agent']}  (step " \
           f"{record['hash']}"
    assert out.startswith(head), out
    assert f"     status  {record['status']}" in out
