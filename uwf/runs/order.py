"""`log verify`'s check of what is filed on a run (uwf/runs/rules.py): an archive, an
unarchive, a rerun's link, each in a state of the run and of its thread that allows
it, and a link only to an original not running at its instant. A run is a thread: its
thread's state is the threads' check's (the threads' `evolve` folded)."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.clock import parse_instant
from uwf.engine.events import Envelope
from uwf.engine.feature import Check
from uwf.errors import UsageError
from uwf.runs.events import RunRerunLinked
from uwf.runs.rules import RunPhase, kind_of, next_run, problem, rerun_refusal
from uwf.threads.order import ThreadOrder


class RunOrder:
    """Each run's phase as the log has it so far, over its thread's."""

    def __init__(self, made: Mapping[str, Check]) -> None:
        threads = made.get("threads")
        if not isinstance(threads, ThreadOrder):
            raise ValueError("the runs feature's check reads the threads': list the threads "
                             "feature before the runs feature")
        self.threads = threads
        self.runs: dict[str, RunPhase] = {}

    def __call__(self, envelope: Envelope) -> str | None:
        data, subject = envelope.data, envelope.subject
        if kind_of(data) is None:
            return None
        run = self.runs.get(subject, RunPhase())
        thread = self.threads.phase(subject)[0]
        if thread is not None:  # as the runs view: nothing folds before the start
            self.runs[subject] = next_run(run, data)
        found = problem(run, thread, data, subject)
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
