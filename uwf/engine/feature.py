"""A feature as a value: what a store and an auditor need to know of it.

Each feature package exports one `Feature` (`uwf/<feature>/feature.py`): its event
types, its views (projection classes), its `log verify` check and its upcasters. The
entry points list them once (`uwf/features.py`) and hand the list to the store
(`Store.open(features=...)`) and, through it, to the auditor (`uwf/audit/verify.py`):
nothing below the surfaces names a feature. Plain values, no registry: two stores in
one process may be opened with two lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from uwf.engine.events import Envelope, EventCatalog, EventData, Upcaster
from uwf.engine.projection import StructProjection

if TYPE_CHECKING:
    from uwf.engine.pgoverlay import Overlay

# One `log verify` pass over a feature's events, made anew for each pass (it keeps what
# it has seen: each subject's state under the feature's transition table): the problem
# with an envelope, which follows every line checked before it (None: the feature's
# rules allow it).
Check = Callable[[Envelope], str | None]


# Makes a feature's check, given the checks made so far for the features listed before
# it, by feature name (a run's check reads its thread's, as the runs view reads the
# threads view).
MakeCheck = Callable[[Mapping[str, Check]], Check]


class Feature(msgspec.Struct, frozen=True, kw_only=True):
    """What a feature adds to a store: event types, views, a verify check, upcasters.

    `views` are projection classes (a store makes its own instances); `check` is
    called with the feature's own `events` and the other features' `reads`. A Struct,
    not a dataclass, which would compile its methods at every start-up.
    """

    name: str
    events: tuple[type[EventData], ...] = ()
    views: tuple[type[StructProjection], ...] = ()
    check: MakeCheck | None = None
    # Other features' event types the check reads too (after their own feature's check).
    reads: tuple[type[EventData], ...] = ()
    upcasters: tuple[Upcaster, ...] = ()
    # On PostgreSQL, the fields of its views that its server-side commands write as
    # columns (uwf/engine/pgoverlay.py), by view: made only by a store on a server.
    overlays: Callable[[], Mapping[str, Overlay]] | None = None


def valid(features: Sequence[Feature]) -> tuple[Feature, ...]:
    """`features` as a tuple, refused (a programming error: ValueError) when two share a
    name or one is not a `Feature`."""
    seen: set[str] = set()
    for feature in features:
        if not isinstance(feature, Feature):
            raise ValueError(f"{feature!r} is not a Feature: list uwf.features.FEATURES or "
                             "each feature's FEATURE value")
        if feature.name in seen:
            raise ValueError(f"two features are named {feature.name}")
        seen.add(feature.name)
    return tuple(features)


def catalog_of(features: Iterable[Feature]) -> EventCatalog:
    """The core event types plus every feature's, and every feature's upcasters."""
    listed = tuple(features)
    return EventCatalog(*(feature.events for feature in listed),
                        upcasters=[u for feature in listed for u in feature.upcasters])


def views_of(features: Iterable[Feature]) -> list[StructProjection]:
    """A new instance of every feature's views, in the features' order, except that a
    view folded over another's state (`extends`: runs over threads) comes right after
    the views it extends, before the rest of that one's feature: the views that share a
    state stay together (`registry show` lists them in this order)."""
    ordered: list[StructProjection] = []
    for feature in features:
        for view in feature.views:
            base = getattr(view, "extends", None)
            at = next((i for i, made in enumerate(ordered) if made.name == base), None)
            if at is None:
                ordered.append(view())
                continue
            at += 1
            while at < len(ordered) and getattr(ordered[at], "extends", None) == base:
                at += 1
            ordered.insert(at, view())
    return ordered


def checks_of(features: Iterable[Feature]) -> dict[str, list[Check]]:
    """A new check of every feature that has one, by the event types it reads, in the
    features' order."""
    made: dict[str, Check] = {}
    routes: dict[str, list[Check]] = {}
    for feature in features:
        if feature.check is None:
            continue
        check = made[feature.name] = feature.check(made)
        for event_type in (*feature.events, *feature.reads):
            routes.setdefault(event_type.type, []).append(check)
    return routes
