"""The run registry as a value (`uwf.engine.feature.Feature`): its events, the runs
view, its `log verify` check (over the threads')."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.feature import Check, Feature
from uwf.runs.events import RUN_EVENTS
from uwf.runs.projection import RunsProjection
from uwf.threads.events import THREAD_EVENTS


def _check(made: Mapping[str, Check]) -> Check:
    """A new `log verify` check (its module loaded by `log verify` only)."""
    from uwf.runs.order import RunOrder

    return RunOrder(made)


# Its check folds each run over its thread (`evolve`), so it reads the threads' events too.
FEATURE = Feature(name="runs", events=RUN_EVENTS, views=(RunsProjection,), check=_check,
                  reads=THREAD_EVENTS)
