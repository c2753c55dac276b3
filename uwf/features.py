"""The composition root: the features a store of uwf's holds, listed once.

The entry points (the CLI's `main`, and through its context `uwf mcp`, the dashboard
and the worker; the agent kit) hand this list to `Store.open`, which wires their
events, views, verify checks and upcasters into the log, the views and the auditor.
A library user may pass a list of their own (`Store.open(path, features=...)`);
`Store.open(path)` without one uses this list. Importing it loads each feature's
events, projections and rules (what opening a store loads anyway), no service.
"""

from __future__ import annotations

from uwf.engine.feature import Feature
from uwf.queue.feature import FEATURE as QUEUE
from uwf.runs.feature import FEATURE as RUNS
from uwf.threads.feature import FEATURE as THREADS
from uwf.workflows.feature import FEATURE as WORKFLOWS

# In this order: a feature's check may read those of the features before it (runs
# read threads'), and the views are made and folded in it.
FEATURES: tuple[Feature, ...] = (WORKFLOWS, THREADS, RUNS, QUEUE)
