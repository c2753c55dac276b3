"""Phase 3's acceptance checks (uwf/threads/stepping.py): why an agent's StepNode is
refused, and a failed step as phase 2 and 3 describe it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from uwf.cas.builtins import is_step_node_type
from uwf.cas.store import Cas
from uwf.language.asking import ASK_SCHEMA, ask_problems, is_ask

if TYPE_CHECKING:
    from uwf.threads.plan import Plan


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str
    exit_status: int | None = None  # the agent's, when it ran and exited
    stderr: str | None = None  # its tail, masked (uwf.threads.agentproc.stderr_tail)


def check_step(cas: Cas, plan: Plan, hash_: str) -> Failure | None:
    """Why the agent's StepNode is refused, or None when it is accepted."""
    if not cas.has(hash_):
        return Failure("not-found", f"StepNode {hash_} is not in the CAS")
    node = cas.get(hash_)
    if not is_step_node_type(node.type):
        return Failure("wrong-type", f"{hash_} is not a StepNode (its type is {node.type})")
    step = node.payload
    if step["start"] != plan.start:
        return Failure("wrong-start", f"its start is {step['start']}, not the thread's "
                                      f"StartNode {plan.start}")
    if step["prev"] != plan.head:
        return Failure("stale-prev", f"its prev is {step['prev'] or 'null'}, but the head is "
                                     f"{plan.head or 'null (no step yet)'}")
    if step["role"] != plan.decision.role:
        return Failure("wrong-role", f"its role is {step['role']!r}, but the moderator chose "
                                     f"{plan.decision.role!r}")
    workflow = cas.get(plan.workflow).payload
    schema = workflow["roles"][plan.decision.role]["meta"]
    for field in ("output", "detail"):
        if not cas.has(step[field]):
            return Failure("not-found", f"its {field} {step[field]} is not in the CAS")
    for attempt in step.get("previousAttempts", ()):
        if not cas.has(attempt):
            return Failure("not-found", f"its previous attempt {attempt} is not in the CAS")
    output = cas.get(step["output"]).payload
    if is_ask(output):  # a question to a person: checked as one, not by the role's schema
        problems = cas.problems(cas.put_schema(ASK_SCHEMA), output) or ask_problems(output)
        if problems:
            return Failure("ask", "its question ($ASK) is not one uwf can ask: "
                                  + "; ".join(problems))
        return None
    # A node this step's own Cas gathered was validated as it was put (in-process, or
    # brought in from the agent's staging folder): against the role's schema, if its type.
    problems = [] if cas.conforms(step["output"], schema) else cas.problems(schema, output)
    if problems:
        return Failure("schema", f"its output violates the {plan.decision.role} schema: "
                                 + "; ".join(problems))
    return None


def refused_node(cas: Cas, plan: Plan, hash_: str) -> str | None:
    """`hash_` when it is a StepNode written for this very step (its start and prev are
    the step's) that the checks refused: a failed attempt, kept and named in the failure
    (and by the StepNode that passes, as one of its `previousAttempts`); else None."""
    if not cas.has(hash_):
        return None
    node = cas.get(hash_)
    if not is_step_node_type(node.type):
        return None
    step = node.payload
    return hash_ if (step["start"], step["prev"]) == (plan.start, plan.head) else None
