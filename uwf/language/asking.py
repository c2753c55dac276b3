"""A role's question to a person: the `$ASK` output (docs/threads.md#a-human-in-the-loop).

Any role may, instead of its own output, ask:

    {"status": "$ASK", "question": "Deploy v2 to production?",
     "answerSchema": {"type": "object", "properties": {"approved": {"type": "boolean"}},
                      "required": ["approved"]},
     "timeoutSeconds": 86400}

The output is checked against ASK_SCHEMA (not the role's own schema), and its
`answerSchema` must be a schema of json-cas's subset: the answer is stored as a node
of that type, so it is validated where every other node is. `timeoutSeconds` is
optional. Pure: no store, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ASK = "$ASK"
TIMEOUT = "$TIMEOUT"
# The type of an asking output's node: the shape above, in json-cas's schema subset
# (a non-empty question and a positive timeout are checked by `ask_problems`).
ASK_SCHEMA: dict[str, Any] = {
    "title": "Ask",
    "description": "A role's question to a person, answered by `uwf thread answer`.",
    "type": "object",
    "required": ["status", "question", "answerSchema"],
    "properties": {
        "status": {"const": ASK},
        "question": {"type": "string"},
        "answerSchema": {"type": "object"},
        "timeoutSeconds": {"type": "number"},
    },
    "additionalProperties": False,
}
# A question longer than this is refused: it is recorded in an event and shown in lists.
MAX_QUESTION_CHARS = 4000
# The longest wait a question may declare: a year, as an agent's timeout.
MAX_WAIT_S = 31_536_000


@dataclass(frozen=True)
class Ask:
    """An asking output, read: the question, its answer's schema and the wait (seconds,
    None: no deadline)."""

    question: str
    answer_schema: dict[str, Any]
    timeout_s: float | None


def is_ask(output: Any) -> bool:
    """Whether `output` asks (its status is `$ASK`)."""
    return isinstance(output, dict) and output.get("status") == ASK


def ask_problems(output: dict[str, Any]) -> list[str]:
    """Why an asking output cannot be recorded beyond its shape (ASK_SCHEMA): an empty or
    over-long question, a timeout out of range, an answer schema outside the subset."""
    from uwf.cas.subset import schema_problems

    problems = []
    question = output.get("question")
    if isinstance(question, str) and not question.strip():
        problems.append("question: it is empty")
    elif isinstance(question, str) and len(question) > MAX_QUESTION_CHARS:
        problems.append(f"question: it is longer than {MAX_QUESTION_CHARS:,} characters")
    timeout = output.get("timeoutSeconds")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and not (
            math.isfinite(timeout) and 0 < timeout <= MAX_WAIT_S):
        problems.append(f"timeoutSeconds: it must be more than 0 and at most "
                        f"{MAX_WAIT_S:,}, not {timeout}")
    schema = output.get("answerSchema")
    if isinstance(schema, dict):
        problems += [f"answerSchema: {problem}" for problem in schema_problems(schema)]
    return problems


def read_ask(output: dict[str, Any]) -> Ask:
    """The question an asking output (already checked) asks."""
    timeout = output.get("timeoutSeconds")
    return Ask(str(output["question"]), dict(output["answerSchema"]),
               None if timeout is None else float(timeout))
