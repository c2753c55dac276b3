"""The moderator: status-based routing and Mustache edge prompts. Pure.

`evaluate(graph, last_role, last_output, user_prompt)`: the status is `_` after
`$START`, otherwise `last_output["status"]` when it is a string, else `_`. The
target is `graph[last_role][status]`; its prompt is rendered without HTML
escaping over the last output's fields, with `{{prompt}}` the user's prompt
unless the output has a field of that name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from uwf.errors import Rejected

START = "$START"
END = "$END"
ANY_STATUS = "_"


class NoTransition(Rejected):
    """The graph has no edge for this role and status: the thread is blocked."""


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
    graph: dict[str, dict[str, dict[str, str]]],
    last_role: str,
    last_output: Any,
    user_prompt: str,
) -> Decision:
    """The next role and its edge prompt, or NoTransition."""
    status = status_of(last_role, last_output)
    target = graph.get(last_role, {}).get(status)
    if target is None:
        raise NoTransition(
            f'no transition for role "{last_role}" with status "{status}"',
            "fix the workflow's graph, or kill the thread",
        )
    scope: dict[str, Any] = {"prompt": user_prompt}
    if isinstance(last_output, dict):
        scope.update(last_output)
    return Decision(target["role"], render(target["prompt"], scope), status)


def render(template: str, scope: dict[str, Any]) -> str:
    """Mustache without HTML escaping; values shown as JavaScript would show them."""
    if "{{" not in template:
        return template
    renderer = _Renderer(escape=lambda text: text, missing_tags="ignore")
    return str(renderer.render(template, scope))


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
    """Builds the pystache subclass on first use, so importing this module is cheap."""

    _cls: type | None = None

    def __call__(self, **options: Any) -> Any:
        if _LazyRenderer._cls is None:
            _LazyRenderer._cls = _renderer_class()
        return _LazyRenderer._cls(**options)


_Renderer = _LazyRenderer()
