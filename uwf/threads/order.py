"""`log verify`'s check of the threads' events: the thread's transition table
(uwf/threads/py): no step before its thread starts, none after it ends, one step
in flight, a result only for it, a step an incremental rerun took over (`reused`)
never while one is in flight."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.events import Envelope
from uwf.engine.feature import Check
from uwf.threads.rules import NOT_STARTED, Phase, check


class ThreadOrder:
    """Each thread's phase (its state and the step in flight) as the log has it so far;
    the runs' check reads it (`phase`)."""

    def __init__(self, made: Mapping[str, Check]) -> None:
        self.threads: dict[str, Phase] = {}

    def phase(self, subject: str) -> Phase:
        return self.threads.get(subject, NOT_STARTED)

    def __call__(self, envelope: Envelope) -> str | None:
        subject = envelope.subject
        phase = self.threads.get(subject, NOT_STARTED)
        problem, after = check(phase, envelope.data, subject)
        if after != phase:
            self.threads[subject] = after
        return problem
