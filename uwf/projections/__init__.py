"""Pure folds of events into view states: no I/O, no clock, no randomness."""

from __future__ import annotations

from uwf.projections.base import StructProjection
from uwf.projections.store import StoreProjection
from uwf.projections.threads import ThreadsProjection
from uwf.projections.workflows import WorkflowsProjection


def all_projections() -> list[StructProjection]:
    """Every view uwf maintains, in a fixed order."""
    return [StoreProjection(), WorkflowsProjection(), ThreadsProjection()]


def views_version() -> str:
    """Changes whenever a projection changes, so outdated views are rebuilt."""
    return ",".join(f"{p.name}@{p.version}" for p in all_projections())
