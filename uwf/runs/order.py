"""`log verify`'s check of what is filed on a run (uwf/runs/py): an archive, an
unarchive, a rerun's link, each in a state of the run and of its thread that allows
it. A run is a thread: its thread's phase is the threads' check's."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.events import Envelope
from uwf.engine.feature import Check
from uwf.runs.rules import RunPhase, kind_of, next_run, problem
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
        return problem(run, thread, data, subject)
