"""The registry feature as a value (`uwf.engine.feature.Feature`): its event, its view,
its `log verify` check."""

from __future__ import annotations

from uwf.engine.feature import Feature
from uwf.workflows.events import WORKFLOW_EVENTS
from uwf.workflows.order import WorkflowOrder
from uwf.workflows.projection import WorkflowsProjection

FEATURE = Feature(name="workflows", events=WORKFLOW_EVENTS, views=(WorkflowsProjection,),
                  check=WorkflowOrder)
