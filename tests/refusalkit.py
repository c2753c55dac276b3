"""What the refusal walks share (tests/test_refusals_named*.py): a memory store written
at instants the test sets, the decide module's functions, a decider's call, whether it
refused, and what `log verify` names on a line forged into the log."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType

from uwf.audit.verify import verify
from uwf.cas.builtins import builtin_hash
from uwf.engine.clock import parse_instant
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome
from uwf.errors import NothingToDo, Rejected
from uwf.store import Store

T0 = parse_instant("2026-12-01T10:00:00Z")


def deciders(module: ModuleType) -> set[str]:
    """The public functions a decide module defines (its deciders and their helpers)."""
    return {name for name, value in vars(module).items()
            if inspect.isfunction(value) and value.__module__ == module.__name__
            and not name.startswith("_")}


class Clocked:
    """A memory store whose clock the test sets: each line is written at `now`."""

    def __init__(self) -> None:
        self.now = T0
        self.store = Store.memory(clock=lambda: self.now)
        self.store.cas.ensure_builtins()  # the nodes the events refer to (V1, V2)

    def write(self, subject: str, data: EventData, at: int) -> int:
        self.now = at
        self.store.journal.write(lambda views: Outcome([NewEvent(subject, data)]))
        return self.store.log.head().seq


def named(clocked: Clocked, subject: str, data: EventData, at: int) -> list[str]:
    """The problems `log verify` names on `data` forged onto `subject` at `at` (the
    log before it verifies clean)."""
    before = verify(clocked.store)
    assert before.ok, before.problems
    seq = clocked.write(subject, data, at)
    return [item.problem for item in verify(clocked.store).problems if item.seq == seq]


# Two nodes in every store (the built-in schemas), standing for what events refer to.
V1, V2 = builtin_hash("Workflow"), builtin_hash("Text")

# A call of a decider: its name, what it returns (raising its refusal), and the event
# it would have written (forged when it refuses).
Call = tuple[str, Callable[[], object], EventData]


def refused(call: Callable[[], object]) -> bool:
    """Whether a decider refused: it raised, or a batch decider took nothing. (The
    fail_attempt decider returns the refusal it gives once the failure is recorded: a
    refusal of the command, not of the event it writes.)"""
    try:
        answer = call()
    except (Rejected, NothingToDo):
        return True
    return answer == []
