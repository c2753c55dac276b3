"""The run registry as a value (`uwf.engine.feature.Feature`): its events, the runs
view, its `log verify` check (over the threads')."""

from __future__ import annotations

from uwf.engine.feature import Feature
from uwf.runs.events import RUN_EVENTS
from uwf.runs.order import RunOrder
from uwf.runs.projection import RunsProjection

FEATURE = Feature(name="runs", events=RUN_EVENTS, views=(RunsProjection,), check=RunOrder)
