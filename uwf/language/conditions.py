"""Named conditions: JSONata expressions that choose between a role's list-form edges.

A workflow's `conditions` maps a name to `{description, expression}`; a list-form
graph entry names one (or `null`, the fallback). The expression is evaluated with
jsonata-python over `{steps, prompt, lastOutput}`: `steps` the thread's history
oldest first (each `{role, status, output, agent}`, so `steps[-1]` is the last
step), `prompt` the user's prompt, `lastOutput` the last step's output (null after
`$START`). A condition holds only when the result is boolean `true`; undefined,
`false` and every other value (a string, a number, a list of booleans) do not.

jsonata-python is imported on first use: the CLI runs once per agent step and
most workflows route by status alone.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

# An expression runs at most this long (wall clock, checked between evaluation
# steps, so one built-in call on a huge value -- `$sort` of a long list -- runs to
# its end) and nests evaluation at most this deep. The step's decision is taken
# under the store lock: a runaway expression must not hold it.
TIMEOUT_MS = 1000
MAX_DEPTH = 200


class ConditionError(Exception):
    """An expression that does not parse, or whose evaluation failed."""


def expression_problem(expression: str) -> str | None:
    """Why `expression` is not a JSONata expression, or None."""
    try:
        _compile(expression)
    except ConditionError as exc:
        return str(exc)
    return None


def holds(expression: str, scope: dict[str, Any]) -> bool:
    """Whether `expression` is boolean true over `scope`; ConditionError if it fails.

    The scope is copied first: the nodes it holds are the CAS's cached payloads.
    """
    # Compiled for each evaluation: jsonata-python starts the time limit's clock
    # when the expression is compiled, not when it is evaluated.
    compiled = _compile(expression)
    try:
        result = compiled.evaluate(copy.deepcopy(scope))
    except RecursionError:
        raise ConditionError("evaluation nests too deeply") from None
    except Exception as exc:  # JException (timeouts, type errors) and the library's own bugs
        raise ConditionError(_describe(exc)) from None
    return result is True


def scope_of(steps: list[dict[str, Any]], prompt: str) -> dict[str, Any]:
    """The input every expression sees."""
    return {"steps": steps, "prompt": prompt,
            "lastOutput": steps[-1]["output"] if steps else None}


def _compile(expression: str) -> Any:
    jsonata = _jsonata()
    try:
        return jsonata.Jsonata(expression, timeout=TIMEOUT_MS, stack=MAX_DEPTH)
    except RecursionError:
        raise ConditionError("does not parse as JSONata: it nests too deeply") from None
    except Exception as exc:  # JException; anything else is the parser's own failure
        raise ConditionError(f"does not parse as JSONata: {_describe(exc)}") from None


def _describe(exc: Exception) -> str:
    code = getattr(exc, "error", None)
    location = getattr(exc, "location", None)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = [str(code)] if isinstance(code, str) else []
    if isinstance(location, int) and location >= 0:
        where.append(f"at character {location}")
    return f"{text} ({', '.join(where)})" if where else text


def _jsonata() -> Any:
    """The jsonata module. Importing it raises the interpreter's recursion limit to
    10,000 for the whole process; it is put back, since MAX_DEPTH bounds the
    expressions and nothing else in uwf needs it."""
    module = sys.modules.get("jsonata")
    if module is not None:
        return module
    limit = sys.getrecursionlimit()
    try:
        import jsonata  # type: ignore[import-untyped]
    finally:
        sys.setrecursionlimit(limit)
    return jsonata
