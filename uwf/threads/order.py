"""`log verify`'s check of the threads' events: each thread folded by its `evolve`
(uwf/threads/rules.py, as the `threads` view is), each event judged by its transition
table and time rules at the event's instant: no step before its thread starts, none
after it ends, one step in flight, a result only for it, a step an incremental rerun
took over (`reused`) never while one is in flight; a step taken over only past its
deadline, a question answered before its deadline and timed out only after it."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.clock import parse_instant
from uwf.engine.events import Envelope
from uwf.engine.feature import Check
from uwf.errors import UsageError
from uwf.threads.rules import NOT_STARTED, TIMED, evolve, verdict
from uwf.threads.state import Phase, ThreadState


def _instant(ts: str) -> int | None:
    try:
        return parse_instant(ts)
    except UsageError:
        return None  # named by the auditor's ts check already


class ThreadOrder:
    """Each thread's state as the log has it so far; the runs' check reads its phase
    (`phase`)."""

    def __init__(self, made: Mapping[str, Check]) -> None:
        self.threads: dict[str, ThreadState] = {}

    def phase(self, subject: str) -> Phase:
        state = self.threads.get(subject)
        return NOT_STARTED if state is None else state.phase

    def __call__(self, envelope: Envelope) -> str | None:
        subject = envelope.subject
        state = self.threads.get(subject)
        at = _instant(envelope.ts) if envelope.type in TIMED else None
        problem = verdict(state, envelope.data, subject, at)
        after = evolve(state, envelope)
        if after is not None:
            self.threads[subject] = after
        return problem
