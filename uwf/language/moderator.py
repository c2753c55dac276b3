"""The moderator: status-based or condition-based routing, and Mustache edge prompts.

`evaluate(graph, last_role, last_output, user_prompt)` reads `graph[last_role]`,
which is one of two forms:

- a map `status -> target`: the status is `_` after `$START`, otherwise
  `last_output["status"]` when it is a string, else `_`; the target is
  `graph[last_role][status]`. The Decision's `status` is that status.
- a list of `{role, condition, prompt}`, tried in order: the first entry whose
  condition holds (conditions.py; `null` always holds) is the target. The
  Decision's `status` is the condition's name, or `_` for a `null` entry.

Two statuses are the moderator's own (RESERVED, one table; uwf/language/asking.py):
`$ASK`, a role's answered question, and `$TIMEOUT`, a question not answered before
its deadline. An edge the role declares for one (in its map) is taken; else `$ASK`
resumes the asking role, the answer in its edge prompt, and `$TIMEOUT` has no
transition (the thread is blocked).

No target is NoTransition (a condition that fails to evaluate is ConditionFailed,
one kind of it). The prompt is rendered without HTML escaping over the last
output's fields, with `{{prompt}}` the user's prompt unless the output has a
field of that name. Pure, but for a condition's time limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from uwf.errors import Rejected
from uwf.language.asking import ASK, TIMEOUT

START = "$START"
END = "$END"
ANY_STATUS = "_"
# The statuses the moderator gives a meaning of its own, and what follows one when the
# role's graph declares no edge for it: RESUME (the asking role runs again), or None
# (no transition: the thread is blocked, as for any status without an edge).
RESUME = "resume"
RESERVED: dict[str, str | None] = {ASK: RESUME, TIMEOUT: None}
# The edge prompt of a resumed role: its question and the answer (shown as JSON).
RESUME_PROMPT = 'You asked: "{{question}}". The answer: {{answer}}'


class NoTransition(Rejected):
    """The graph has no edge for this role and status (or no condition of its list
    holds): the thread is blocked. `status` is the status that has no edge (None for
    a list)."""

    def __init__(self, what: str, next_action: str = "", status: str | None = None) -> None:
        super().__init__(what, next_action)
        self.status = status


class ConditionFailed(NoTransition):
    """A condition's expression failed to evaluate: the thread is blocked, naming it."""


@dataclass(frozen=True)
class Decision:
    role: str
    prompt: str
    status: str

    @property
    def ends(self) -> bool:
        return self.role == END


def status_of(last_role: str, last_output: Any) -> str:
    if last_role == START:
        return ANY_STATUS
    if isinstance(last_output, dict) and isinstance(last_output.get("status"), str):
        return str(last_output["status"])
    return ANY_STATUS


def evaluate(
    graph: Mapping[str, Any],
    last_role: str,
    last_output: Any,
    user_prompt: str,
    *,
    conditions: Mapping[str, Any] | None = None,
    steps: Callable[[], list[dict[str, Any]]] | None = None,
) -> Decision:
    """The next role and its edge prompt, or NoTransition.

    `conditions` are the workflow's; `steps` gives the thread's history for them,
    oldest first (called only when `last_role`'s edges are a list).
    """
    edges = graph.get(last_role, {})
    status = status_of(last_role, last_output)
    if status in RESERVED:
        declared = edges.get(status) if isinstance(edges, dict) else None
        target = declared or _reserved(last_role, status)
    elif isinstance(edges, list):
        target, status = _first_holding(edges, last_role, conditions or {},
                                        steps or list, user_prompt)
    else:
        target = edges.get(status)
        if target is None:
            raise NoTransition(
                f'no transition for role "{last_role}" with status "{status}"',
                "fix the workflow's graph, or kill the thread", status,
            )
    scope: dict[str, Any] = {"prompt": user_prompt}
    if isinstance(last_output, dict):
        scope.update(last_output)
    return Decision(target["role"], render(target["prompt"], scope), status)


def _reserved(last_role: str, status: str) -> dict[str, Any]:
    """The edge a reserved status takes when the role declares none (RESERVED)."""
    if RESERVED[status] == RESUME:
        return {"role": last_role, "prompt": RESUME_PROMPT}
    raise NoTransition(
        f'no transition for role "{last_role}" with status "{status}"',
        f'declare a "{status}" edge for the role, or kill the thread', status)


def _first_holding(
    edges: list[dict[str, Any]],
    last_role: str,
    conditions: Mapping[str, Any],
    steps: Callable[[], list[dict[str, Any]]],
    user_prompt: str,
) -> tuple[dict[str, Any], str]:
    """The first entry whose condition holds, and its status (the condition, or `_`)."""
    from uwf.language.conditions import ConditionError, holds, scope_of

    scope: dict[str, Any] | None = None  # the history is read only if a condition needs it
    tried: list[str] = []
    for entry in edges:
        name = entry["condition"]
        if name is None:
            return entry, ANY_STATUS
        if scope is None:
            scope = scope_of(steps(), user_prompt)
        spec = conditions.get(name)
        try:
            if not isinstance(spec, dict) or not isinstance(spec.get("expression"), str):
                raise ConditionError("the workflow does not define it")  # a hand-made node
            if holds(spec["expression"], scope):
                return entry, str(name)
        except ConditionError as exc:
            raise ConditionFailed(
                f'condition "{name}" of role "{last_role}" failed: {exc}',
                "fix its expression in the workflow, or kill the thread",
            ) from None
        tried.append(str(name))
    raise NoTransition(
        f'no transition for role "{last_role}": no condition holds '
        f"({', '.join(tried) or 'none listed'})",
        "fix the workflow's graph, or kill the thread",
    )


def render(template: str, scope: dict[str, Any]) -> str:
    """Mustache without HTML escaping; values shown as JavaScript would show them."""
    if "{{" not in template:
        return template
    return str(_Renderer.render(template, scope))


def show(value: Any) -> str:
    """How an interpolated value reads: lists joined by commas, objects as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ",".join(show(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _renderer_class() -> type:
    import pystache

    class Renderer(pystache.Renderer):  # type: ignore[misc]
        def str_coerce(self, value: Any) -> str:
            return show(value)

    return Renderer


class _LazyRenderer:
    """The pystache renderer, built on first use, so importing this module is cheap; and
    the templates it has parsed (a pure memo: parsing is 3/4 of a render, and a
    workflow's few prompts are rendered at every step)."""

    KEEP = 256

    def __init__(self) -> None:
        self._renderer: Any = None
        self._parsed: dict[str, Any] = {}

    def render(self, template: str, scope: dict[str, Any]) -> Any:
        import pystache

        if self._renderer is None:
            self._renderer = _renderer_class()(escape=lambda text: text,
                                               missing_tags="ignore")
        parsed = self._parsed.get(template)
        if parsed is None:
            if len(self._parsed) >= self.KEEP:
                self._parsed.clear()
            parsed = self._parsed[template] = pystache.parse(template)
        return self._renderer.render(parsed, scope)


_Renderer = _LazyRenderer()
