"""`uwf-claude`, `uwf-codex`, `uwf-cursor`, `uwf-hermes`: uwf-exec with the command
line of a known CLI coding agent filled in.

    uwf-claude [ARGS...] THREAD ROLE  runs  claude -p [--model M] [ARGS...] PROMPT

The table below is the whole of each preset; docs/agents.md says why each
command line is what it is. ARGS (the agent's `args:` in config.yaml) go to the
CLI agent, before the prompt. The executable is `UWF_<KEY>_BIN` (a command,
split like a shell would), else the CLI's usual name; the model is
`UWF_<KEY>_MODEL`, else `UWF_MODEL`, passed with the CLI's model flag unless
ARGS already give one; neither set: the CLI's own default. All of these are read
from the environment over the config's `.env`.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from uwf.agents.execagent import run_cli_agent
from uwf.agents.kit import agent_cli, environment
from uwf.errors import UsageError


@dataclass(frozen=True)
class Preset:
    """One CLI agent's non-interactive command line, as data."""

    name: str  # the console script
    key: str  # <KEY> in UWF_<KEY>_BIN and UWF_<KEY>_MODEL
    binary: str  # the executable, unless UWF_<KEY>_BIN
    fixed: tuple[str, ...]  # right after the executable: its one-shot, print-only mode
    model_flags: tuple[str, ...]  # the first passes the model; any of them in ARGS gives it
    product: str  # what to install when the executable is missing
    before_prompt: tuple[str, ...] = ()  # for a CLI whose prompt is an option's value

    @property
    def bin_var(self) -> str:
        return f"UWF_{self.key}_BIN"

    @property
    def model_var(self) -> str:
        return f"UWF_{self.key}_MODEL"

    def shape(self) -> str:
        """The command line in words: `claude -p [--model M] [ARGS...] PROMPT`."""
        return " ".join([self.binary, *self.fixed, f"[{self.model_flags[0]} MODEL]",
                         "[ARGS...]", *self.before_prompt, "PROMPT"])


PRESETS: dict[str, Preset] = {preset.name: preset for preset in (
    Preset("uwf-claude", "CLAUDE", "claude", ("-p",), ("--model",), "Claude Code"),
    Preset("uwf-codex", "CODEX", "codex", ("exec",), ("--model", "-m"), "the Codex CLI"),
    Preset("uwf-cursor", "CURSOR", "cursor-agent", ("-p", "--output-format", "text"),
           ("--model",), "the Cursor CLI"),
    Preset("uwf-hermes", "HERMES", "hermes", ("chat",), ("--model", "-m"), "Hermes Agent",
           before_prompt=("-q",)),
)}


def model_in_args(preset: Preset, args: Sequence[str]) -> str | None:
    """The model ARGS already give (`--model M`, `--model=M`, `-m M`), else None."""
    for index, arg in enumerate(args):
        for flag in preset.model_flags:
            if arg == flag:
                return args[index + 1] if index + 1 < len(args) else ""
            if flag.startswith("--") and arg.startswith(flag + "="):
                return arg[len(flag) + 1:]
    return None


def command_line(preset: Preset, args: Sequence[str],
                 env: Mapping[str, str]) -> tuple[list[str], str | None]:
    """The CLI agent's argv up to (not including) the prompt, and the model it names
    (None: the CLI's default)."""
    raw_binary = env.get(preset.bin_var, "").strip()
    try:
        binary = shlex.split(raw_binary) if raw_binary else [preset.binary]
    except ValueError as exc:
        raise UsageError(f"{preset.bin_var} is not a valid command line ({exc})",
                         "fix its quoting") from None
    model_args: list[str] = []
    model = model_in_args(preset, args)
    if model is None:
        model = (env.get(preset.model_var, "").strip()
                 or env.get("UWF_MODEL", "").strip() or None)
        if model:
            model_args = [preset.model_flags[0], model]
    return [*binary, *preset.fixed, *model_args, *args, *preset.before_prompt], model or None


def usage(preset: Preset) -> str:
    return (
        f"{preset.name} [ARGS...] THREAD ROLE: run {preset.product} for one step.\n\n"
        f"    {preset.shape()}\n\n"
        "ARGS go to the CLI agent. The prompt is the step's assembled prompt; the\n"
        "output JSON is taken from the last ```json block of its stdout, which is kept\n"
        "as the step's detail.\n\n"
        "Environment (or the config's .env):\n"
        f"  {preset.bin_var:<18} the executable (default {preset.binary})\n"
        f"  {preset.model_var:<18} the model, passed as {preset.model_flags[0]} "
        "(default UWF_MODEL;\n"
        f"  {'':<18} unset: the CLI's own default; ARGS that give one win)\n\n"
        "Config example:\n"
        f"    agents:\n      {preset.key.lower()}: {{command: {preset.name}, args: []}}\n"
    )


def main(name: str, argv: list[str] | None = None) -> int:
    """Run the preset `name` (a key of PRESETS) as an agent: `[ARGS...] THREAD ROLE`."""
    preset = PRESETS[name]

    def body(thread: str, role: str, args: list[str]) -> str:
        env = environment()
        command, model = command_line(preset, args, env)
        return run_cli_agent(
            thread, role, command, env=env,
            agent=f"{preset.name} {model}" if model else preset.name,
            missing_hint=f"install {preset.product}, or set {preset.bin_var} to its path",
        )

    return agent_cli(name, body, argv, usage=usage(preset))


def _entry(name: str) -> Callable[[], None]:
    def entry() -> None:
        sys.exit(main(name))

    return entry


# The console scripts (pyproject.toml [project.scripts]).
claude = _entry("uwf-claude")
codex = _entry("uwf-codex")
cursor = _entry("uwf-cursor")
hermes = _entry("uwf-hermes")
