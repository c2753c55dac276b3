"""The registry feature as a value (`uwf.engine.feature.Feature`): its event, its view,
its `log verify` check."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.feature import Check, Feature
from uwf.workflows.events import WORKFLOW_EVENTS
from uwf.workflows.projection import WorkflowsProjection


def _check(made: Mapping[str, Check]) -> Check:
    """A new `log verify` check (its module loaded by `log verify` only)."""
    from uwf.workflows.order import WorkflowOrder

    return WorkflowOrder(made)


FEATURE = Feature(name="workflows", events=WORKFLOW_EVENTS, views=(WorkflowsProjection,),
                  check=_check)
