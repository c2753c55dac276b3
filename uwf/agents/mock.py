"""`uwf-mock SCRIPT THREAD ROLE`: scripted outputs per role and per visit.

SCRIPT is YAML (or JSON, which is YAML and is read faster) mapping each role to
a list of outputs; the n-th visit of a role (counted from the thread's history)
gets the n-th output, the last one repeating:

    planner:   [{status: ready, plan: "Fix the parser"}]
    developer: [{status: done, files: [parser.py]}]
    reviewer:  [{status: rejected, comments: "Add a test"}, {status: approved}]

A relative SCRIPT is looked for in the working directory (the thread's repo,
where `uwf thread step` runs agents), then beside the config file, so a config
can name a script kept next to it.

For tests, demos and CI: it exercises the whole protocol with no model.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from uwf.agents.kit import agent_cli, context, submit
from uwf.errors import NotFound, UsageError


def find_script(path: str) -> Path:
    """SCRIPT as given, else (when relative) the same path beside the config file."""
    from uwf.config.settings import config_path

    given = Path(path).expanduser()
    if given.is_absolute() or given.exists():
        return given
    config_dir = config_path(os.environ).parent
    if (config_dir / given).exists():
        return config_dir / given
    raise NotFound(f"no mock script {path} in {Path.cwd()} or {config_dir}",
                   "give the script's path in the agent's args")


def parse_script(text: str, path: str) -> Any:
    """The script's YAML. JSON is YAML: a script that is JSON is read as JSON, without
    loading PyYAML, whose import (its regular expressions compiled) is a large part of
    a mock agent process's own work."""
    import msgspec

    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        pass
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"mock script {path} is not YAML: {exc}", "fix the script") from None


def load_script(path: str) -> dict[str, list[Any]]:
    try:
        text = find_script(path).read_text("utf-8")
    except FileNotFoundError:
        raise NotFound(
            f"no mock script {path}", "give the script's path in the agent's args"
        ) from None
    script = parse_script(text, path)
    if not isinstance(script, dict) or not all(
        isinstance(outputs, list) and outputs for outputs in script.values()
    ):
        raise UsageError(f"mock script {path} must map roles to non-empty lists of outputs",
                         "see `uwf-mock --help`")
    return script


def main(argv: list[str] | None = None) -> int:
    def scripted(thread: str, role: str, args: list[str]) -> str:
        if len(args) != 1:
            raise UsageError("uwf-mock takes one SCRIPT before THREAD ROLE",
                             "set args: [path/to/script.yaml]")
        script = load_script(args[0])
        if role not in script:
            raise UsageError(f"mock script {args[0]} has no outputs for role {role!r}",
                             "add them to the script")
        visit = int(context(thread, role, history_limit=0)["visits"].get(role, 0))
        outputs = script[role]
        return submit(thread, role, outputs[min(visit, len(outputs) - 1)],
                      f"uwf-mock: {role}, visit {visit + 1}", agent="uwf-mock")

    return agent_cli("uwf-mock", scripted, argv, usage=__doc__ or "")


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":  # `python -m uwf.agents.mock`, as `uwf demo` runs it
    entry()
