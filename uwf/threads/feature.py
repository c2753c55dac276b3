"""The threads feature as a value (`uwf.engine.feature.Feature`): its events, the
threads and steps views, its `log verify` check."""

from __future__ import annotations

from uwf.engine.feature import Feature
from uwf.threads.events import THREAD_EVENTS
from uwf.threads.order import ThreadOrder
from uwf.threads.projection import ThreadsProjection
from uwf.threads.steps import StepsProjection

FEATURE = Feature(name="threads", events=THREAD_EVENTS,
                  views=(ThreadsProjection, StepsProjection), check=ThreadOrder)
