"""The threads feature as a value (`uwf.engine.feature.Feature`): its events, the
threads and steps views, its `log verify` check."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.feature import Check, Feature
from uwf.threads.events import THREAD_EVENTS
from uwf.threads.projection import ThreadsProjection
from uwf.threads.steps import StepsProjection


def _check(made: Mapping[str, Check]) -> Check:
    """A new `log verify` check (its module loaded by `log verify` only)."""
    from uwf.threads.order import ThreadOrder

    return ThreadOrder(made)


FEATURE = Feature(name="threads", events=THREAD_EVENTS,
                  views=(ThreadsProjection, StepsProjection), check=_check)
