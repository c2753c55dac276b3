"""`uwf-mock SCRIPT THREAD ROLE`: scripted outputs per role and per visit.

SCRIPT is YAML mapping each role to a list of outputs; the n-th visit of a role
(counted from the thread's history) gets the n-th output, the last one repeating:

    planner:   [{status: ready, plan: "Fix the parser"}]
    developer: [{status: done, files: [parser.py]}]
    reviewer:  [{status: rejected, comments: "Add a test"}, {status: approved}]

For tests, demos and CI: it exercises the whole protocol with no model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from uwf.agents.kit import run
from uwf.engine.errors import NotFound, UsageError


def load_script(path: str) -> dict[str, list[Any]]:
    import yaml

    try:
        script = yaml.safe_load(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise NotFound(
            f"no mock script {path}", "give the script's path in the agent's args"
        ) from None
    except yaml.YAMLError as exc:
        raise UsageError(f"mock script {path} is not YAML: {exc}", "fix the script") from None
    if not isinstance(script, dict) or not all(
        isinstance(outputs, list) and outputs for outputs in script.values()
    ):
        raise UsageError(f"mock script {path} must map roles to non-empty lists of outputs",
                         "see `uwf-mock --help`")
    return script


def main(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help"):
        sys.stdout.write(__doc__ or "")
        return 0 if arguments else 2
    script_path = arguments[0]

    def scripted(ctx: dict[str, Any]) -> tuple[Any, str]:
        role = ctx["role"]["name"]
        script = load_script(script_path)
        if role not in script:
            raise UsageError(f"mock script {script_path} has no outputs for role {role!r}",
                             "add them to the script")
        visit = int(ctx["visits"].get(role, 0))
        outputs = script[role]
        return outputs[min(visit, len(outputs) - 1)], f"uwf-mock: {role}, visit {visit + 1}"

    return run(scripted, arguments[1:], name="uwf-mock", history_limit=0)


def entry() -> None:
    sys.exit(main())
