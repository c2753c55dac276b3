"""`log verify`'s check of what is filed on a run (uwf/runs/rules.py): each run folded
by its `evolve` (as the `runs` view is), over its thread's state as the threads' check
folds it from the same events (a run is a thread); each run event judged by the table:
an archive, an unarchive, a rerun's link, each in a state of the run and of its thread
that allows it, and a link only to an original not running at its instant."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.clock import parse_instant
from uwf.engine.events import Envelope
from uwf.engine.feature import Check
from uwf.errors import UsageError
from uwf.runs.events import RunRerunLinked
from uwf.runs.rules import evolve, kind_of, problem, rerun_refusal
from uwf.runs.state import RunPhase, RunState
from uwf.threads.order import ThreadOrder


class RunOrder:
    """Each run's whole state as the log has it so far, over its thread's (the threads'
    check runs first on a thread's event: the runs feature is listed after it)."""

    def __init__(self, made: Mapping[str, Check]) -> None:
        threads = made.get("threads")
        if not isinstance(threads, ThreadOrder):
            raise ValueError("the runs feature's check reads the threads': list the threads "
                             "feature before the runs feature")
        self.threads = threads
        self.runs: dict[str, RunState] = {}

    def __call__(self, envelope: Envelope) -> str | None:
        data, subject = envelope.data, envelope.subject
        run = self.runs.get(subject)
        thread = self.threads.threads.get(subject)
        after = evolve(run, envelope, thread)
        if after is not None:
            self.runs[subject] = after
        if kind_of(data) is None:  # a thread's event: the threads' check judged it
            return None
        found = problem(RunPhase() if run is None else run.phase,
                        None if thread is None else thread.state, data, subject)
        if found is None and isinstance(data, RunRerunLinked):
            found = self._rerun(data, envelope.ts, subject)
        return found

    def _rerun(self, data: RunRerunLinked, ts: str, subject: str) -> str | None:
        try:
            at = parse_instant(ts)
        except UsageError:
            return None  # named by the auditor's ts check already
        original = self.threads.threads.get(f"thread/{data.rerun_of}")
        if rerun_refusal(original, at) is None:
            return None
        return f"{subject} linked as a rerun of {data.rerun_of}, which was running at {ts}"
