"""The run commands' decisions, pure: a run's record, the command and the clock's
reading in; the event to record, or a refusal (`Rejected`, raised), out.

`run archive` asks the run's transition table (`uwf/runs/rules.py`); `run rerun`
refuses a run that is running (the rules' `rerun_refusal`, which `log verify` names on
a forged link too) and links the new run to its original. The
services (`service.py`, `rerun.py`) read the views and the CAS, and write.
"""

from __future__ import annotations

from uwf.errors import Rejected
from uwf.runs.events import RunArchived, RunRerunLinked, RunUnarchived
from uwf.runs.rules import ALREADY_ARCHIVED, NOT_ARCHIVED, refusal, rerun_refusal
from uwf.runs.state import RunState


def archive(run: RunState, reason: str, *, unarchive: bool = False
            ) -> RunArchived | RunUnarchived:
    """`run archive [--unarchive]`: refused when the run is already where it would go."""
    run_id = run.thread.thread
    why = refusal(run.phase, run.thread.state, "unarchived" if unarchive else "archived")
    if why == NOT_ARCHIVED:
        raise Rejected(f"run {run_id} is not archived", "nothing to do")
    if why == ALREADY_ARCHIVED:
        raise Rejected(f"run {run_id} is already archived (at {run.archived_at})",
                       f"unarchive it with `uwf run archive {run_id} --unarchive`")
    return RunUnarchived(reason) if unarchive else RunArchived(reason)


def rerunnable(run: RunState, now: int) -> None:
    """`run rerun` takes a run that is not running at `now` (a stalled one is taken)."""
    run_id = run.thread.thread
    if rerun_refusal(run.thread, now) is not None:
        raise Rejected(f"run {run_id} is running",
                       f"wait for it to end, or end it with `uwf thread kill {run_id}`")


def link(original: RunState, reason: str, *, incremental: bool = False) -> RunRerunLinked:
    """A rerun's provenance: generation one past the original's, and the chain's first
    run as origin, pinned however long the chain grows."""
    run_id = original.thread.thread
    provenance = original.provenance
    return RunRerunLinked(
        rerun_of=run_id, rerun_of_repo=original.thread.repo,
        origin_run_id=provenance.origin_run_id if provenance else run_id,
        generation=(provenance.generation if provenance else 0) + 1, reason=reason,
        incremental=incremental)
