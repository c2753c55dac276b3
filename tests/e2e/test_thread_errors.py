"""Bad input to the thread commands: unknown names, usage, config, missing agents,
blocked threads, and secrets from `.env` that must never leak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli, Result
from tests.threadkit import Kit, make_kit, one_line_error, store_bytes

UNKNOWN_THREAD = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
SECRET = "sk-very-secret-value-7Hq2Zx"


def test_unknown_workflow(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    log = cli.log_bytes()
    one_line_error(kit.uwf("thread", "start", "no-such-flow", "-p", "x"), 1,
                   "no workflow named 'no-such-flow'", "uwf workflow list")
    one_line_error(kit.uwf("thread", "start", "0000000000000", "-p", "x"), 1, "0000000000000")
    assert cli.log_bytes() == log
    assert kit.ok("thread", "list", "--all") == []


@pytest.mark.parametrize(
    "command",
    [
        ("thread", "show"), ("thread", "step"), ("thread", "run"), ("thread", "kill"),
        ("thread", "log"), ("thread", "fork", "--at", "0000000000000"),
        ("agent", "context", "planner"),
    ],
)
def test_unknown_thread(cli: Cli, tmp_path: Path, command: tuple[str, ...]) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    log = cli.log_bytes()
    args = [*command[:2], UNKNOWN_THREAD, *command[2:]]
    one_line_error(kit.uwf(*args), 1, f"no thread {UNKNOWN_THREAD}", "uwf thread list --all")
    assert cli.log_bytes() == log


def test_missing_or_empty_prompt_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    log = cli.log_bytes()
    missing = kit.uwf("thread", "start", "solve-issue")
    assert missing.code == 2, missing
    assert missing.out == ""
    assert "-p" in missing.err
    assert "Traceback" not in missing.err
    one_line_error(kit.uwf("thread", "start", "solve-issue", "-p", "  "), 2, "prompt is empty")
    assert kit.uwf("thread", "step").code == 2
    assert kit.uwf("thread", "step", UNKNOWN_THREAD, "--timeout", "0").code == 2
    assert cli.log_bytes() == log


@pytest.mark.parametrize(
    ("config", "fragments"),
    [
        ("agents:\n  mock:\n    command: 5\n", ("agents.mock.command", "str")),
        ("agents:\n  mock: {command: uwf-mock}\ndefaultAgent: ghost\n",
         ("defaultAgent", "'ghost'", "mock")),
        ("agents:\n  mock: {command: uwf-mock}\ndefaultAgnet: mock\n", ("defaultAgnet",)),
        ("agents:\n  mock: {command: uwf-mock}\nagentOverrides:\n  solve-issue:\n"
         "    developer: nobody\n", ("agentOverrides.solve-issue.developer", "'nobody'")),
        ("models:\n  m: {provider: nowhere, name: x}\n", ("models.m.provider", "'nowhere'")),
        ("agents:\n  mock: {command: '  '}\n", ("agents.mock.command", "empty")),
        ("agents: [unclosed\n", ("invalid config",)),
        ("- just\n- a list\n", ("invalid config",)),
    ],
)
def test_invalid_config_names_the_field(cli: Cli, tmp_path: Path, config: str,
                                        fragments: tuple[str, ...]) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    head = kit.show(thread)
    path = kit.write_config(config)
    log = cli.log_bytes()
    line = one_line_error(kit.step(thread), 1, "invalid config", str(path), *fragments)
    assert line.startswith("uwf: error: ")
    assert cli.log_bytes() == log
    assert kit.show(thread) == head


def test_no_agent_configured_blocks_the_thread(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path, mock=False)
    kit.put_workflow()
    thread = kit.start()
    head = kit.show(thread)
    line = one_line_error(kit.step(thread), 1, 'no agent configured for workflow "solve-issue" '
                          'role "planner"', "defaultAgent", "agentOverrides", "--agent")
    assert line.startswith("uwf: error: ")
    blocked = kit.events("thread.blocked")
    assert len(blocked) == 1
    assert blocked[0]["subject"] == f"thread/{thread}"
    assert blocked[0]["data"]["reason"] == "no-agent"
    assert blocked[0]["data"]["role"] == "planner"
    assert 'workflow "solve-issue" role "planner"' in blocked[0]["data"]["message"]
    assert kit.events("thread.step_started") == []
    assert kit.show(thread) == {**head, "status": "blocked", "currentRole": "planner"}
    assert [t["thread"] for t in kit.ok("thread", "list")] == [thread]

    # A config file without defaultAgent: the message names that file.
    path = kit.write_config({"agents": {"other": {"command": "uwf-mock"}}})
    one_line_error(kit.step(thread), 1, 'role "planner"', str(path))
    assert len(kit.events("thread.blocked")) == 2

    # Fix the config and the blocked thread goes on.
    kit.write_config({"agents": {"mock": {"command": "uwf-mock",
                                          "args": [str(kit.mock_script())]}},
                      "defaultAgent": "mock"})
    stepped = kit.ok("thread", "step", thread)
    assert stepped["head"] != head["head"]
    assert kit.log(thread)[0]["role"] == "planner"
    assert kit.ok("log", "verify")["ok"] is True


def test_no_transition_blocks_the_thread(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    document = {
        "name": "odd-flow",
        "description": "A graph with a hole",
        "roles": {"worker": {"description": "d", "goal": "g", "capabilities": [],
                             "procedure": "p", "output": "o",
                             "meta": {"type": "object", "required": ["status"],
                                      "properties": {"status": {"enum": ["ok", "odd"]}}}}},
        "graph": {"$START": {"_": {"role": "worker", "prompt": "{{prompt}}"}},
                  "worker": {"ok": "$END"}},
    }
    put = kit.uwf("workflow", "put", str(kit.workflow_file(document, "odd.yaml")))
    assert put.code == 0, put
    # The hole is on purpose: put warns and registers it.
    assert put.err.startswith("warning: graph.worker: status 'odd' (allowed by roles.worker.meta) "
                              "has no edge"), put.err
    script = kit.mock_script({"worker": [{"status": "odd"}]}, "odd-mock.yaml")
    kit.write_config({"agents": {"mock": {"command": "uwf-mock", "args": [str(script)]}},
                      "defaultAgent": "mock"})
    thread = kit.start("odd-flow")
    first = kit.ok("thread", "step", thread)
    assert first["done"] is False
    message = 'no transition for role "worker" with status "odd"'
    one_line_error(kit.step(thread), 1, message)
    blocked = kit.events("thread.blocked")
    assert [(b["data"]["reason"], b["data"]["message"], b["data"]["role"], b["data"]["status"])
            for b in blocked] == [("no-transition", message, "worker", "odd")]
    assert first["currentRole"] is None  # the moderator cannot decide: no role, no error
    assert kit.show(thread) == {**first, "status": "blocked", "currentRole": "worker"}
    one_line_error(kit.uwf("thread", "run", thread), 1, message)
    assert kit.ok("thread", "kill", thread)["done"] is True


def test_agent_command_that_does_not_exist(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.write_config({"agents": {"ghost": {"command": "uwf-no-such-agent-xyz"}},
                      "defaultAgent": "ghost"})
    kit.put_workflow()
    thread = kit.start()
    head = kit.show(thread)
    one_line_error(kit.step(thread), 1, "step failed (spawn)", "'uwf-no-such-agent-xyz'",
                   "not found")
    missing = tmp_path / "nowhere" / "agent"
    one_line_error(kit.step(thread, "--agent", str(missing)), 1, "step failed (spawn)",
                   str(missing))
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\necho hi\n")
    one_line_error(kit.step(thread, "--agent", str(plain)), 1, "step failed (spawn)",
                   "not executable")
    failed = kit.events("thread.step_failed")
    assert [f["data"]["reason"] for f in failed] == ["spawn", "spawn", "spawn"]
    shown = kit.show(thread)  # as before, and why it failed
    assert shown.pop("lastFailure")["message"] == failed[-1]["data"]["message"]
    assert [a["reason"] for a in shown.pop("attempts")] == ["spawn", "spawn", "spawn"]
    assert shown == head
    assert kit.ok("log", "verify")["ok"] is True


# -- secrets --------------------------------------------------------------------------

def leaky_agents(kit: Kit) -> list[Path]:
    """Agents that print the secret on stdout or stderr and fail, in several ways."""
    seen = kit.tmp / "seen-by-agent"
    return [
        kit.agent("leak-stdout", f'''
            open({str(seen)!r}, "a").write(os.environ.get("SECRET_TOKEN", "") + "\\n")
            print("token=" + os.environ["SECRET_TOKEN"])
        '''),
        kit.agent("leak-stderr", '''
            print("progress: using " + os.environ["SECRET_TOKEN"], file=sys.stderr)
            print("failed with key " + os.environ["SECRET_TOKEN"], file=sys.stderr)
            sys.exit(2)
        '''),
        kit.agent("leak-alone", 'print(os.environ["SECRET_TOKEN"])\n'),
        kit.agent("leak-both", '''
            secret = os.environ["SECRET_TOKEN"]
            print(secret, secret)
            sys.stderr.write(secret)
            sys.exit(1)
        '''),
    ]


def assert_no_secret(kit: Kit, results: list[Result], *needles: str) -> None:
    for needle in needles:
        for result in results:
            assert needle not in result.out, result
            assert needle not in result.err, result
        for name, data in store_bytes(kit.home).items():
            assert needle.encode() not in data, name


def test_secrets_reach_agents_but_never_the_store_or_output(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.write_env_file(f"SECRET_TOKEN={SECRET}\n")
    kit.put_workflow()
    thread = kit.start()
    results = [kit.step(thread, "--agent", str(agent)) for agent in leaky_agents(kit)]
    for result, reason in zip(results, ["garbage", "exit", "garbage", "exit"], strict=True):
        one_line_error(result, 1, f"step failed ({reason})")
        assert "***" in result.err, result.err  # redacted, not dropped
    assert (tmp_path / "seen-by-agent").read_text() == SECRET + "\n"
    results.append(kit.uwf("thread", "run", thread))  # uwf-mock: the thread completes
    assert json.loads(results[-1].out)["done"] is True
    for command in (("log", "tail", "-n", "1000"), ("thread", "log", thread),
                    ("thread", "show", thread), ("thread", "list", "--all"),
                    ("registry", "show"), ("log", "verify"), ("registry", "verify"),
                    ("agent", "context", thread, "reviewer")):
        results.append(kit.uwf(*command))
        assert results[-1].code == 0, results[-1]
    failed = kit.events("thread.step_failed")
    assert [f["data"]["reason"] for f in failed] == ["garbage", "exit", "garbage", "exit"]
    assert all("***" in f["data"]["message"] for f in failed)
    assert_no_secret(kit, results, SECRET)


def test_a_secret_cut_by_truncation_is_still_redacted(cli: Cli, tmp_path: Path) -> None:
    """The agent's text is shortened for the message; no prefix of the secret may remain."""
    kit = make_kit(cli, tmp_path)
    kit.write_env_file(f"SECRET_TOKEN={SECRET}\n")
    kit.put_workflow()
    thread = kit.start()
    stdout_agent = kit.agent("long-stdout", 'print("x" * 70 + os.environ["SECRET_TOKEN"])\n')
    stderr_agent = kit.agent("long-stderr", '''
        sys.stderr.write("e" * 190 + os.environ["SECRET_TOKEN"] + "\\n")
        sys.exit(1)
    ''')
    results = [kit.step(thread, "--agent", str(stdout_agent)),
               kit.step(thread, "--agent", str(stderr_agent))]
    for result in results:
        one_line_error(result, 1, "step failed")
    assert_no_secret(kit, results, SECRET[:10])
