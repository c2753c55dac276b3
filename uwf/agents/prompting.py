"""Turning a step's context into a prompt, and an agent's text back into output JSON."""

from __future__ import annotations

import json
import re
from typing import Any

from uwf.errors import Rejected

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.DOTALL)
_FRONT = re.compile(r"\A\s*---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)


def assemble_prompt(ctx: dict[str, Any]) -> str:
    """The full prompt for a CLI or LLM agent: role, task, history, output contract.

    The history is the context's, bounded by default (`agent_context`): the
    prompt's size does not grow with the thread.
    """
    role = ctx["role"]
    parts = [
        role.get("goal", ""),
        f"Capabilities: {', '.join(role.get('capabilities', []))}"
        if role.get("capabilities") else "",
        f"Procedure: {role['procedure']}" if role.get("procedure") else "",
        f"## Task\n{ctx['prompt']}",
    ]
    if ctx.get("edgePrompt") and ctx["edgePrompt"] != ctx["prompt"]:
        parts.append(f"## This step\n{ctx['edgePrompt']}")
    if ctx.get("history"):
        lines = [f"- {h['role']} ({h['status']}): {json.dumps(h['output'], ensure_ascii=False)}"
                 for h in ctx["history"]]
        shown = len(ctx["history"])
        title = (f"## Previous steps (the last {shown} of {ctx['steps']})"
                 if ctx.get("historyTruncated") and "steps" in ctx else "## Previous steps")
        parts.append(title + "\n" + "\n".join(lines))
    parts.append(
        "## Output\n"
        + (role.get("output") + "\n" if role.get("output") else "")
        + "End your answer with the output as one ```json fenced block matching this "
        "JSON Schema:\n```json\n" + json.dumps(role["schema"], indent=2) + "\n```"
    )
    return "\n\n".join(part for part in parts if part)


def extract_output(text: str) -> Any:
    """The output JSON in an agent's text: the last ```json block that parses, else YAML
    front matter, else the whole text as JSON. A leading byte-order mark is ignored."""
    text = text.removeprefix("\ufeff")
    for language, body in reversed(_FENCE.findall(text)):
        if language.lower() in ("json", ""):
            try:
                return json.loads(body)
            except json.JSONDecodeError:
                continue
    front = _FRONT.match(text)
    if front:
        import yaml

        try:
            loaded = yaml.safe_load(front.group(1))
        except yaml.YAMLError:
            loaded = None
        if isinstance(loaded, dict):
            return loaded
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise Rejected(
            "no output found in the agent's answer (no ```json block, front matter or JSON)",
            "make the agent end with a ```json block",
        ) from None
