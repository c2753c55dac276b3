"""Ids as people type them: a thread, run, queue entry or lease id in any case (Crockford
Base32 is case-insensitive), whole or as the first few characters of one; a node's hash
in any case.

Every surface (the CLI, `uwf mcp`, the dashboard) runs a command through the invoker
(`uwf.invoker.invoke`), which makes each id argument whole (`whole_ids`) before the
handler sees it: upper case, and a prefix looked up in the view that holds such ids by a
range scan of its key (never a scan of every row). A prefix no id has is not found (exit
1); one several ids have is refused naming a few of them (exit 2). The features'
services take whole ids only.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from uwf.ids import ULID_LENGTH, ULID_PREFIX_PATTERN

if TYPE_CHECKING:
    from uwf.invoker.context import Context
    from uwf.invoker.spec import A

_HASH = r"[0-9A-Fa-f][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{12}"  # uwf.cas.hashing's
# (Patterns, compiled by `re`'s own cache on first use: most commands take no id.)
# What each kind of id (an argument's `arg(..., ids=KIND)`) is looked up in: the view,
# the noun, and where the whole ids are listed.
KINDS = {
    "threads": ("threads", "thread", "uwf thread list --all"),
    "runs": ("runs", "run", "uwf run list"),
    "queue": ("queue", "queue entry", "uwf queue list"),
}
SHOWN = 3  # the matches an ambiguous prefix names


def whole_ids(args: A, ctx: Context) -> A:
    """`args` with every id argument whole and upper case (the store is read only for
    a prefix); a value that is no id's start is left for the handler to refuse."""
    from uwf.invoker.params import params

    given = {param.name: param.ids for param in params(type(args)) if param.ids}
    changed: dict[str, str] = {}
    for name, kind in given.items():
        value = getattr(args, name)
        if not isinstance(value, str):
            continue
        if kind == "hash":  # a node's hash: any case, whole (a prefix would need a scan)
            whole = value.upper() if re.fullmatch(_HASH, value) else value
        elif not re.match(ULID_PREFIX_PATTERN, value):
            continue
        elif len(value) == ULID_LENGTH:
            whole = value.upper()
        elif kind == "lease":
            whole = _lease(value.upper(), changed.get("id", getattr(args, "id", None)), ctx)
        else:
            whole = unique(kind, value.upper(), ctx)
        if whole != value:
            changed[name] = whole
    if not changed:
        return args
    import msgspec

    return msgspec.structs.replace(args, **changed)


def unique(kind: str, prefix: str, ctx: Context) -> str:
    """The one id of `kind` that starts with `prefix` (upper case)."""
    from uwf.errors import NotFound, UsageError

    view, noun, listed = KINDS[kind]
    found = starting_with(ctx, view, prefix, SHOWN + 1, fresh=True)
    if not found:
        raise NotFound(f"no {noun} id starts with {prefix}", f"see `{listed}`")
    if len(found) > 1:
        more = " and more" if len(found) > SHOWN else ""
        raise UsageError(f"{prefix} is the start of several {noun} ids: "
                         f"{', '.join(found[:SHOWN])}{more}", "give more of the id")
    return found[0]


def starting_with(ctx: Context, view: str, prefix: str, limit: int, *,
                  fresh: bool) -> list[str]:
    """The first `limit` keys of `view` that start with `prefix`, in key order: a range
    of the key's index. `fresh`: the views caught up with the log first (completion,
    which must stay quick, reads them as they are)."""
    from uwf.engine.viewspec import Query

    store = ctx.store
    if fresh:
        store.read()
    where: tuple[tuple[str, str, Any], ...] = (("key", ">=", prefix),)
    if prefix:  # keys are ASCII: below the prefix with its last character's successor
        where += (("key", "<", prefix[:-1] + chr(ord(prefix[-1]) + 1)),)
    return [key for key, _ in store.views.query(Query(view, where, limit=limit))]


def _lease(prefix: str, entry: str | None, ctx: Context) -> str:
    """The entry's lease id when `prefix` starts it; else `prefix`, for the command to
    refuse as a lease that is not the entry's."""
    if entry is None or len(entry) != ULID_LENGTH:
        return prefix
    state = ctx.store.read().get("queue", entry)
    lease = getattr(state, "lease", None)
    held: str | None = getattr(lease, "id", None)
    return held if held is not None and held.startswith(prefix) else prefix
