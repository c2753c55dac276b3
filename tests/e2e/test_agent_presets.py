"""The CLI agent presets (uwf-claude, uwf-codex, uwf-cursor, uwf-hermes), and the
environment every agent sees: the config's `.env`, loaded by the kit itself.

The CLI agents are stand-ins named as the real ones (`claude`, `codex`,
`cursor-agent`, `hermes`), first on PATH: each records its argv and a variable
from its environment, logs a little, and answers with a ```json block.
"""

from __future__ import annotations

import json
import stat
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BIN, Cli
from tests.threadkit import Kit, as_before_but_failed, make_kit, one_line_error, store_bytes
from uwf.agents.presets import PRESETS, command_line, model_in_args

PROMPT = "Fix the login bug: empty passwords are accepted"
PLAN = {"status": "ready", "plan": "Guard clause in login()"}
DOTENV_SECRET = "sk-preset-dotenv-secret-42"


def fake_cli(folder: Path, name: str, record: Path) -> Path:
    """An executable `name` that records its argv and $PRESET_SECRET, then answers."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f'''
        import json, os, sys
        json.dump({{"argv": sys.argv[1:], "secret": os.environ.get("PRESET_SECRET")}},
                  open({str(record)!r}, "w"))
        print("thinking about it...")
        print("```json")
        print(json.dumps({PLAN!r}))
        print("```")
    '''), "utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def preset_kit(cli: Cli, tmp_path: Path, preset: str, args: list[str]) -> tuple[Kit, str]:
    """A store whose default agent is `preset` with `args`, a `.env` holding
    PRESET_SECRET, and the stand-in CLI agents first on PATH."""
    kit = make_kit(cli, tmp_path, mock=False)
    record = tmp_path / "argv.json"
    fakes = tmp_path / "fake-bin"
    for binary in {p.binary for p in PRESETS.values()}:
        fake_cli(fakes, binary, record)
    cli.env["PATH"] = f"{fakes}:{cli.env['PATH']}"
    kit.write_config({"agents": {"cli": {"command": preset, "args": args}},
                      "defaultAgent": "cli"})
    kit.write_env_file(f"PRESET_SECRET={DOTENV_SECRET}\n")
    kit.put_workflow()
    return kit, kit.start(prompt=PROMPT)


def recorded(tmp_path: Path) -> dict[str, Any]:
    got: dict[str, Any] = json.loads((tmp_path / "argv.json").read_text())
    return got


# -- the presets' command lines, through a real step ------------------------------------

# (preset, its args in config.yaml, model variables, the CLI's argv before the prompt)
Case = tuple[str, list[str], dict[str, str], list[str]]


@pytest.mark.parametrize(
    "case",
    [
        ("uwf-claude", ["--permission-mode", "acceptEdits"], {"UWF_CLAUDE_MODEL": "opus"},
         ["-p", "--model", "opus", "--permission-mode", "acceptEdits"]),
        ("uwf-codex", ["--sandbox", "workspace-write"], {"UWF_MODEL": "gpt-5-codex"},
         ["exec", "--model", "gpt-5-codex", "--sandbox", "workspace-write"]),
        ("uwf-cursor", ["--force"], {"UWF_CURSOR_MODEL": "sonnet-4", "UWF_MODEL": "not-this"},
         ["-p", "--output-format", "text", "--model", "sonnet-4", "--force"]),
        ("uwf-hermes", ["--yolo"], {}, ["chat", "--yolo", "-q"]),
    ],
    ids=lambda case: str(case[0]),
)
def test_a_preset_runs_its_cli_agent_with_the_documented_command_line(
        cli: Cli, tmp_path: Path, case: Case) -> None:
    preset, args, model_env, argv_before_prompt = case
    kit, thread = preset_kit(cli, tmp_path, preset, args)
    cli.env.update(model_env)
    stepped = kit.ok("thread", "step", thread)
    call = recorded(tmp_path)
    *before, prompt = call["argv"]
    assert before == argv_before_prompt
    assert prompt.startswith("You are a planning agent")
    assert f"## Task\n{PROMPT}" in prompt
    assert call["secret"] == DOTENV_SECRET  # the step's environment, `.env` included
    # The thread advanced to the preset's StepNode, which names the preset and model.
    assert kit.show(thread)["head"] == stepped["head"]
    [entry] = kit.log(thread)
    assert entry["output"] == PLAN
    model = model_env.get(f"UWF_{PRESETS[preset].key}_MODEL") or model_env.get("UWF_MODEL")
    assert entry["agent"] == (f"{preset} {model}" if model else preset)
    assert kit.payload(entry["detail"]).startswith("thinking about it...\n```json\n")


def test_a_model_in_args_wins_over_the_environment(cli: Cli, tmp_path: Path) -> None:
    kit, thread = preset_kit(cli, tmp_path, "uwf-codex", ["-m", "o3"])
    cli.env["UWF_CODEX_MODEL"] = "gpt-5"
    kit.ok("thread", "step", thread)
    assert recorded(tmp_path)["argv"][:-1] == ["exec", "-m", "o3"]
    assert kit.log(thread)[0]["agent"] == "uwf-codex o3"


def test_the_binary_comes_from_the_environment(cli: Cli, tmp_path: Path) -> None:
    kit, thread = preset_kit(cli, tmp_path, "uwf-claude", [])
    elsewhere = fake_cli(tmp_path / "elsewhere", "my claude", tmp_path / "argv.json")
    (tmp_path / "fake-bin" / "claude").unlink()  # only the named one can answer
    kit.write_env_file(f"PRESET_SECRET={DOTENV_SECRET}\n"
                       f"UWF_CLAUDE_BIN=\"'{elsewhere}' --fast\"\n")
    kit.ok("thread", "step", thread)
    assert recorded(tmp_path)["argv"][:-1] == ["--fast", "-p"]


def test_a_missing_cli_binary_is_one_line_naming_it(cli: Cli, tmp_path: Path) -> None:
    kit, thread = preset_kit(cli, tmp_path, "uwf-cursor", [])
    (tmp_path / "fake-bin" / "cursor-agent").unlink()
    cli.env["PATH"] = f"{tmp_path / 'fake-bin'}:{BIN}:/usr/bin:/bin"
    before = kit.show(thread)
    one_line_error(kit.step(thread), 1, "step failed (exit)", "'cursor-agent' not found",
                   "UWF_CURSOR_BIN")
    as_before_but_failed(kit, thread, before, "exit")
    assert [e["data"]["reason"] for e in kit.events("thread.step_failed")] == ["exit"]
    by_hand = cli.run(thread, "planner", prog="uwf-cursor")
    assert (by_hand.code, by_hand.out) == (1, "")
    assert by_hand.err == ("uwf-cursor: error: CLI agent 'cursor-agent' not found; install "
                           "the Cursor CLI, or set UWF_CURSOR_BIN to its path\n")


def test_a_preset_run_by_hand_gives_its_cli_the_dotenv(cli: Cli, tmp_path: Path) -> None:
    """Started by hand, not by `uwf thread step`: the kit loads `.env` itself."""
    kit, thread = preset_kit(cli, tmp_path, "uwf-hermes", [])
    assert "PRESET_SECRET" not in cli.env
    before = kit.show(thread)
    by_hand = cli.run(thread, "planner", prog="uwf-hermes")
    assert by_hand.code == 0, by_hand
    assert recorded(tmp_path)["secret"] == DOTENV_SECRET
    step = kit.node(by_hand.out.strip())
    assert step["payload"]["agent"] == "uwf-hermes"
    assert kit.show(thread) == before  # only a step moves the head
    # The detail is the CLI's stdout, which does not hold the secret; nothing stored does.
    assert all(DOTENV_SECRET.encode() not in data for data in store_bytes(kit.home).values())


def test_every_preset_has_help_naming_its_command_line(cli: Cli) -> None:
    for preset in PRESETS.values():
        shown = cli.run("--help", prog=preset.name)
        assert shown.code == 0, shown
        assert preset.shape() in shown.out
        assert preset.bin_var in shown.out
        assert preset.model_var in shown.out
        assert cli.run(prog=preset.name).code == 2


# -- the command line, as a function ----------------------------------------------------

@pytest.mark.parametrize(
    ("args", "env", "expected", "model"),
    [
        ([], {}, ["claude", "-p"], None),
        ([], {"UWF_MODEL": "sonnet"}, ["claude", "-p", "--model", "sonnet"], "sonnet"),
        ([], {"UWF_MODEL": "sonnet", "UWF_CLAUDE_MODEL": "opus"},
         ["claude", "-p", "--model", "opus"], "opus"),
        (["--model=haiku"], {"UWF_MODEL": "sonnet"}, ["claude", "-p", "--model=haiku"],
         "haiku"),
        (["-v"], {"UWF_CLAUDE_MODEL": "  ", "UWF_CLAUDE_BIN": "npx 'claude code'"},
         ["npx", "claude code", "-p", "-v"], None),
    ],
)
def test_command_line(args: list[str], env: dict[str, str], expected: list[str],
                      model: str | None) -> None:
    assert command_line(PRESETS["uwf-claude"], args, env) == (expected, model)


def test_model_in_args_knows_each_clis_flags() -> None:
    assert model_in_args(PRESETS["uwf-codex"], ["--sandbox", "x", "-m", "o3"]) == "o3"
    assert model_in_args(PRESETS["uwf-claude"], ["-m", "o3"]) is None  # not claude's flag
    assert model_in_args(PRESETS["uwf-hermes"], ["--model"]) == ""


def test_a_bad_bin_variable_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    _, thread = preset_kit(cli, tmp_path, "uwf-claude", [])
    cli.env["UWF_CLAUDE_BIN"] = "'unclosed"
    by_hand = cli.run(thread, "planner", prog="uwf-claude")
    assert by_hand.code == 2, by_hand
    assert by_hand.err.startswith("uwf-claude: error: UWF_CLAUDE_BIN is not a valid command")
    assert len(by_hand.err.splitlines()) == 1


# -- `.env` for agents started by hand, and for `uwf agent context` ---------------------

def test_a_kit_agent_started_by_hand_loads_the_dotenv(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path, mock=False)
    seen = tmp_path / "seen.json"
    agent = kit.agent("by-hand", f'''
        from uwf.agents.kit import run

        def act(ctx):
            json.dump({{n: os.environ.get(n) for n in ("HAND_KEY", "BOTH")}},
                      open({str(seen)!r}, "w"))
            return {PLAN!r}, "done by hand"

        raise SystemExit(run(act))
    ''')
    kit.write_env_file("HAND_KEY=from-dotenv\nBOTH=from-dotenv\n")
    kit.put_workflow()
    thread = kit.start(prompt=PROMPT)
    cli.env["BOTH"] = "from-the-environment"
    done = cli.run(thread, "planner", prog=str(agent))
    assert done.code == 0, done
    assert json.loads(seen.read_text()) == {"HAND_KEY": "from-dotenv",
                                            "BOTH": "from-the-environment"}
    assert kit.payload(kit.payload(done.out.strip())["detail"]) == "done by hand"


def test_agent_context_reads_settings_from_the_dotenv(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start(prompt=PROMPT)
    kit.ok("thread", "step", thread)
    kit.write_env_file("UWF_HISTORY=0\n")
    assert kit.ok("agent", "context", thread, "developer")["history"] == []
    cli.env["UWF_HISTORY"] = "all"  # the environment wins over `.env`
    assert len(kit.ok("agent", "context", thread, "developer")["history"]) == 1
    del cli.env["UWF_HISTORY"]
    kit.write_env_file("UWF_HISTORY=lots\n")
    one_line_error(kit.uwf("agent", "context", thread, "developer"), 2, "UWF_HISTORY")


def test_history_items_carry_the_detail_hash(cli: Cli, tmp_path: Path) -> None:
    kit, thread = preset_kit(cli, tmp_path, "uwf-claude", [])
    head = kit.ok("thread", "step", thread)["head"]
    [item] = kit.ok("agent", "context", thread, "developer")["history"]
    assert item["step"] == head
    assert item["detail"] == kit.payload(head)["detail"]
    assert kit.payload(item["detail"]).startswith("thinking about it...")


def test_the_key_uwf_api_key_env_names_is_a_secret() -> None:
    from uwf.config.secrets import secret_values

    env = {"UWF_API_KEY_ENV": "MY_LLM_CREDENTIAL", "MY_LLM_CREDENTIAL": "cred-0123456789"}
    assert "cred-0123456789" in secret_values(env, None)


def test_every_preset_is_documented() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text("utf-8")
    for preset in PRESETS.values():
        row = (f"| `{preset.name}` | `{preset.shape()}` | `{preset.bin_var}`, else "
               f"`{preset.binary}` | `{preset.model_var}`, else `UWF_MODEL` |")
        assert row in page, row


def test_an_unreadable_dotenv_is_one_line_naming_it(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start(prompt=PROMPT)
    env_file = kit.write_env_file("")
    env_file.write_bytes(b"KEY=\xff\xfe not UTF-8\n")  # unreadable, even by root
    line = one_line_error(kit.uwf("agent", "context", thread, "planner"), 1,
                          f"cannot read {env_file}: ", "can't decode byte 0xff")
    assert line.endswith("; fix or remove that file")
    by_hand = cli.run(thread, "planner", prog="uwf-claude")
    assert by_hand.code == 1, by_hand
    assert by_hand.err.startswith(f"uwf-claude: error: cannot read {env_file}: ")
    assert len(by_hand.err.splitlines()) == 1
