"""A StepNode written from what it is built on (`StepFacts`): the output validated
against the role's schema, then the output, detail and StepNode nodes put in a CAS.

Apart from `uwf.threads.agent` (which reads the facts from the store) so that an agent
writing its nodes into its staging folder (uwf/threads/staging.py) imports no store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uwf.cas.builtins import builtin_hash
from uwf.cas.hashing import is_hash
from uwf.cas.store import Cas
from uwf.errors import NotFound, Rejected, UsageError


@dataclass(frozen=True)
class StepFacts:
    """What a StepNode is built on: the thread's start and head, the role played, its
    output schema and the edge prompt that asked for it."""

    start: str
    head: str | None
    role: str
    schema: str
    edge_prompt: str | None
    # The StepNodes refused for this step before (oldest first): a StepNode after them
    # is a RetriedStepNode naming them as `previousAttempts`.
    previous_attempts: tuple[str, ...] = ()


def write_step(
    cas: Cas,
    facts: StepFacts,
    output: Any,
    detail: str | None = None,
    *,
    detail_ref: str | None = None,
    agent: str,
    started_at_ms: int | None,
    completed_at_ms: int,
    usage: Any = None,
    refs_checked_later: bool = False,
) -> str:
    """`submit_step` into `cas` from `facts`: the output validated against the role's
    schema, then the output, detail and StepNode nodes written; the StepNode's hash.

    `refs_checked_later`: a `detail_ref` missing from `cas` is let through, as in a
    staging folder, whose parent checks the node against the store."""
    from uwf.language.asking import ASK_SCHEMA, ask_problems, is_ask
    from uwf.threads.usage import parse_usage, split_usage, with_usage

    schema, what = facts.schema, f"the {facts.role} schema"
    if is_ask(output):  # a question to a person: its own type, whatever the role's
        schema, what = cas.put_schema(ASK_SCHEMA), "a question ($ASK)"
    output, reported = split_usage(output, cas.get(schema).payload)
    if usage is not None:
        if reported is not None:
            raise UsageError("usage is given twice: in the output and on its own",
                             "give it once")
        reported = parse_usage(usage)
    if reported is not None and detail_ref is not None:
        raise UsageError("usage is kept in a text detail, and this detail is a node "
                         f"given by reference ({detail_ref})", "report usage without it")
    problems = cas.problems(schema, output)
    if not problems and schema != facts.schema:
        problems = ask_problems(output)
    if problems:
        raise Rejected(f"output does not match {what}: "
                       f"{'; '.join(problems)}", "fix the output and submit again")
    cas.ensure_builtins()
    output_hash = cas.put(schema, output, checked=True)  # validated just above
    if detail_ref is not None:
        if not is_hash(detail_ref) or not (refs_checked_later or cas.has(detail_ref)):
            raise NotFound(f"detail node {detail_ref} is not in the CAS", "put it first")
        detail_hash = detail_ref
    else:
        text = detail or ""
        detail_hash = cas.put_text(text if reported is None else with_usage(text, reported))
    step: dict[str, Any] = {
        "start": facts.start,
        "prev": facts.head,
        "role": facts.role,
        "output": output_hash,
        "detail": detail_hash,
        "agent": agent,
    }
    if facts.edge_prompt:
        step["edgePrompt"] = facts.edge_prompt
    if started_at_ms is not None:
        step["startedAtMs"] = started_at_ms
    step["completedAtMs"] = completed_at_ms
    if facts.previous_attempts:  # upstream's retry lineage; a plain StepNode without it
        step["previousAttempts"] = list(facts.previous_attempts)
        return cas.put(builtin_hash("RetriedStepNode"), step)
    return cas.put(builtin_hash("StepNode"), step)
