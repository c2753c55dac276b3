"""Secrets from the process environment, `.env` and providers' `apiKeyEnv` never reach
the log, the CAS, stdout or stderr; short values are left alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.threadkit import Kit, make_kit, mock_config, one_line_error, store_bytes
from uwf.config.configfile import Config, ProviderConfig, WorkflowConfig
from uwf.config.secrets import load_redactor, secret_values

TOKEN = "supersecretvalue123"
SHORT = "abc1234"  # 7 characters: too short to mask
CRED = "cred-7f3a9e21c0"


def config_with(tmp_path: Path, providers: dict[str, ProviderConfig], dotenv: str = "") -> Config:
    env_file = tmp_path / ".env"
    env_file.write_text(dotenv, "utf-8")
    return Config(WorkflowConfig(providers=providers), None, env_file)


# -- which values are secret --------------------------------------------------------------

def test_secret_values_by_name_dotenv_and_provider(tmp_path: Path) -> None:
    config = config_with(
        tmp_path,
        {"local": ProviderConfig("http://127.0.0.1:1", "LLM_CRED"),
         "remote": ProviderConfig("http://127.0.0.1:2", "REMOTE_CRED")},
        "REMOTE_CRED=remote-cred-from-dotenv\nPLAIN=dotenv-plain-value\n",
    )
    env = {"LLM_CRED": CRED, "MY_SERVICE_TOKEN": TOKEN, "DB_PASSWORD": "hunter2hunter2",
           "APP_SECRET": "app-secret-1", "OPENAI_API_KEY": "sk-openai-123456",
           "HOME": "/home/somebody", "TOKEN_COUNT": "123456789", "lower_token": "lower-1234"}
    values = secret_values(env, config)
    assert set(values) == {CRED, "remote-cred-from-dotenv", "dotenv-plain-value", TOKEN,
                           "hunter2hunter2", "app-secret-1", "sk-openai-123456", "lower-1234"}
    assert len(values) == len(set(values))
    assert secret_values(env, None) == [TOKEN, "hunter2hunter2", "app-secret-1",
                                        "sk-openai-123456", "lower-1234"]


def test_the_environment_wins_over_dotenv_for_a_provider_key(tmp_path: Path) -> None:
    config = config_with(tmp_path, {"p": ProviderConfig("http://x", "LLM_CRED")},
                         "LLM_CRED=from-dotenv-file\n")
    assert secret_values({"LLM_CRED": CRED}, config)[0] == CRED
    assert secret_values({}, config) == ["from-dotenv-file"]


def test_only_values_of_eight_characters_or_more_are_masked(tmp_path: Path) -> None:
    no_config = tmp_path / "config" / "uwf" / "config.yaml"
    redact = load_redactor({"MY_SERVICE_TOKEN": TOKEN, "SHORT_TOKEN": SHORT,
                            "EIGHT_KEY": "8chars!!"}, no_config)
    assert redact is not None
    assert redact(f"a {TOKEN} b {SHORT} c 8chars!!") == f"a *** b {SHORT} c ***"
    # Nothing to mask: no work at all.
    assert load_redactor({"SHORT_TOKEN": SHORT}, no_config) is None


def test_a_broken_config_still_masks_its_dotenv(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("agents: [not, a, mapping]\n", "utf-8")
    (tmp_path / ".env").write_text("ANYTHING=dotenv-value-99\n", "utf-8")
    redact = load_redactor({}, config)
    assert redact is not None
    assert redact("x dotenv-value-99 y") == "x *** y"


@pytest.mark.parametrize("config", [None, "agents: {mock: {command: uwf-mock}}\n"])
def test_building_the_redactor_imports_no_yaml(tmp_path: Path, config: str | None) -> None:
    """The CLI runs once per agent step: without a config, or one naming no `apiKeyEnv`,
    masking neither imports PyYAML nor parses the config."""
    if config is not None:
        (tmp_path / "uwf").mkdir()
        (tmp_path / "uwf" / "config.yaml").write_text(config, "utf-8")
        (tmp_path / "uwf" / ".env").write_text("ANY=dotenv-value-99\n", "utf-8")
    code = ("import os, sys\n"
            "from uwf.cli import main\n"
            "from uwf.config.secrets import load_redactor\n"
            "from uwf.config.settings import config_path\n"
            "r = load_redactor({'MY_SERVICE_TOKEN': 'supersecretvalue123'},\n"
            "                  config_path(os.environ))\n"
            "assert r is not None and r('supersecretvalue123') == '***'\n"
            "print(r('dotenv-value-99'), 'yaml' in sys.modules, 'uwf.engine.log' in sys.modules)\n")
    env = {"PATH": "", "XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    masked = "***" if config is not None else "dotenv-value-99"
    assert done.stdout.split() == [masked, "False", "False"]


# -- the CLI and the store ------------------------------------------------------------------

def echoing_agent(kit: Kit, name: str, variable: str) -> Path:
    return kit.agent(name, f'''
        print("{variable}=" + os.environ["{variable}"], file=sys.stderr)
        sys.exit(1)
    ''')


def assert_nowhere(kit: Kit, texts: list[str], value: str) -> None:
    for text in texts:
        assert value not in text
    for name, data in store_bytes(kit.home).items():
        assert value.encode() not in data, name


def test_an_environment_token_echoed_by_a_failing_agent_is_masked(cli: Cli,
                                                                   tmp_path: Path) -> None:
    cli.env["MY_SERVICE_TOKEN"] = TOKEN
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    result = kit.step(thread, "--agent", str(echoing_agent(kit, "echo", "MY_SERVICE_TOKEN")))
    line = one_line_error(result, 1, "step failed (exit)", "MY_SERVICE_TOKEN=***")
    failed = kit.events("thread.step_failed")
    assert [event["data"]["message"] for event in failed] == [
        "agent exited with status 1: MY_SERVICE_TOKEN=***"]
    tail = kit.uwf("log", "tail", "-n", "100")
    assert tail.code == 0, tail
    assert_nowhere(kit, [result.out, result.err, line, tail.out, tail.err], TOKEN)


def test_a_token_an_agent_puts_in_its_output_and_detail_never_reaches_the_cas(
        cli: Cli, tmp_path: Path) -> None:
    """The agent kit opens the store with the same redactor: what an agent submits is
    masked before it is hashed and stored."""
    cli.env["MY_SERVICE_TOKEN"] = TOKEN
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    agent = kit.agent("leaky", '''
        token = os.environ["MY_SERVICE_TOKEN"]
        print(submit({"status": "ready", "plan": "use " + token}, detail="called with " + token))
    ''')
    result = kit.step(thread, "--agent", str(agent))
    assert result.code == 0, result.err
    (step,) = kit.log(thread)
    assert step["output"]["plan"] == "use ***"
    assert_nowhere(kit, [result.out, result.err], TOKEN)


def test_an_environment_token_cut_by_truncation_is_still_masked(cli: Cli,
                                                                  tmp_path: Path) -> None:
    """The step's message keeps the end of the agent's stderr: masked before the cut,
    or a prefix of the token would survive (and no longer match)."""
    cli.env["MY_SERVICE_TOKEN"] = TOKEN
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    agent = kit.agent("long", '''
        sys.stderr.write("e" * 190 + os.environ["MY_SERVICE_TOKEN"] + "\\n")
        sys.exit(1)
    ''')
    result = kit.step(thread, "--agent", str(agent))
    one_line_error(result, 1, "step failed (exit)")
    assert_nowhere(kit, [result.out, result.err], TOKEN[:10])


def test_a_short_value_is_not_masked(cli: Cli, tmp_path: Path) -> None:
    cli.env["SHORT_TOKEN"] = SHORT
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    result = kit.step(thread, "--agent", str(echoing_agent(kit, "echo", "SHORT_TOKEN")))
    one_line_error(result, 1, f"SHORT_TOKEN={SHORT}")
    assert kit.events("thread.step_failed")[0]["data"]["message"].endswith(SHORT)


def test_a_providers_key_under_any_name_is_masked(cli: Cli, tmp_path: Path) -> None:
    cli.env["LLM_CRED"] = CRED
    kit = make_kit(cli, tmp_path, mock=False)
    kit.write_config(mock_config(kit.mock_script(), providers={
        "local": {"baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "LLM_CRED"}}))
    kit.put_workflow()
    thread = kit.start()
    result = kit.step(thread, "--agent", str(echoing_agent(kit, "echo", "LLM_CRED")))
    one_line_error(result, 1, "step failed (exit)", "LLM_CRED=***")
    tail = kit.uwf("log", "tail", "-n", "100")
    assert_nowhere(kit, [result.out, result.err, tail.out], CRED)


def test_the_cli_masks_what_it_prints(cli: Cli, tmp_path: Path) -> None:
    """An error line and a usage error quoting a secret are printed masked."""
    cli.env["MY_SERVICE_TOKEN"] = TOKEN
    missing = cli.run("workflow", "show", TOKEN)
    one_line_error(missing, 1, "no workflow named '***'")
    usage = cli.run("registry", "show", "--scope", TOKEN)
    one_line_error(usage, 2, "invalid choice: '***'")
    for text in (missing.err, usage.err):
        assert TOKEN not in text


def test_json_cas_get_put_copies_a_node_exactly_with_secrets_set(cli: Cli,
                                                                 tmp_path: Path) -> None:
    """`json-cas --store A get H | json-cas --store B put` keeps the hash although the
    node holds values that are secrets now: what `get` prints for a pipe (or with
    --json) is the node as stored; only a terminal's panel is masked (issue 32)."""
    note = tmp_path / "note.json"
    note.write_text(json.dumps(f"the token is {TOKEN} and {CRED}"), "utf-8")
    stored = cli.cas("put", "--type", "Text", str(note))
    assert stored.code == 0, stored
    original = stored.out.strip()
    cli.env.update(MY_SERVICE_TOKEN=TOKEN, LLM_CRED_KEY=CRED)
    other = tmp_path / "other-store"
    for flags in ((), ("--json",)):
        got = cli.cas(*flags, "get", original)
        assert got.code == 0, got
        assert json.loads(got.out)["payload"] == f"the token is {TOKEN} and {CRED}"
        copied = cli.cas("--store", str(other), "put", stdin=got.out)
        assert copied.code == 0, copied
        assert copied.out.strip() == original
    from uwf.cli.jsoncas import COMMANDS
    from uwf.cli.render import render_text
    from uwf.redact import redactor

    get = next(command for command in COMMANDS if command.name == "get")
    node = {"type": "478BZEA9KT9WQ", "payload": f"the token is {TOKEN}"}
    redact = redactor([TOKEN])
    assert redact is not None
    assert TOKEN not in render_text(get, node, False, redact)  # a panel, read by a person
    assert TOKEN in render_text(get, node, True, redact)
