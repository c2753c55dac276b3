"""The question a step asks (`$ASK`), as `thread.asked` records it: when the step is
accepted (uwf/threads/stepping.py), and again for a thread that begins at an asking
step (a fork at it, an incremental rerun that takes it over). docs/threads.md#a-human-in-the-loop.
"""

from __future__ import annotations

from typing import Any

from uwf.cas.store import Cas
from uwf.language.asking import is_ask, read_ask
from uwf.threads.events import ThreadAsked


def asked(cas: Cas, step_id: str, role: str, output: dict[str, Any], now: int
          ) -> ThreadAsked:
    """The question an accepted asking output records; its answer schema is put as a
    node first (node before the event that names it)."""
    ask = read_ask(output)
    due = None if ask.timeout_s is None else now + int(ask.timeout_s * 1000)
    return ThreadAsked(step_id, role, ask.question, cas.put_schema(ask.answer_schema), due)


def asked_again(cas: Cas, head: str, step_id: str, now: int) -> ThreadAsked | None:
    """The question the StepNode `head` asks (its output is `$ASK`), asked again of a
    thread that begins at it (a fork at it, a rerun that took it over) as its step
    `step_id`: the same question and answer schema, its deadline counted from `now`.
    None when it asks none."""
    step = cas.get(head).payload
    output = cas.get(step["output"]).payload
    return asked(cas, step_id, step["role"], output, now) if is_ask(output) else None
