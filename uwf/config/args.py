"""A command's arguments, declared once: a frozen msgspec Struct per command.

Each field's type says what it holds (`str`, `int`, `float`, `bool`,
`list[str]`, `Literal[...]` for choices, `X | None` when optional) and its
`Annotated[..., arg(...)]` metadata gives the help text, bounds and the few
details only a command line needs (positional or flag, a short flag, a
metavar). Each feature declares its commands' arguments in its `commands`
module; the CLI renders argparse from them and any other surface (an MCP
server) derives a JSON Schema. Cheap to import: msgspec and the limits only.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from uwf.config.limits import MAX_TIMEOUT_S


class Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The arguments of a command; subclasses declare them as fields."""


class NoArgs(Args, frozen=True, kw_only=True):
    """A command that takes no arguments."""


# Bounds shared by several commands; an optional field is `Annotated[Count | None, arg(...)]`
# because msgspec checks bounds on the number type itself, not on `int | None`.
# At most SQLite's largest INTEGER: a count or page beyond it is a usage error, not an
# overflow deep in a query.
MAX_COUNT = 2**63 - 1
NonNegative = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Count = Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)]
# A duration: finite (the bounds refuse nan and inf) and at most a year, so that
# now + duration is a date every clock function can still print (docs/cli.md#limits).
MAX_SECONDS = MAX_TIMEOUT_S
Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_SECONDS)]
Age = Annotated[float, msgspec.Meta(ge=0, le=100 * MAX_SECONDS)]
# Whole seconds an entry or a step may run: at least one, at most a year.
TimeoutSec = Annotated[int, msgspec.Meta(ge=1, le=MAX_TIMEOUT_S)]


def arg(help: str, *, positional: bool = False, short: str | None = None,
        metavar: str | None = None, expect: str | None = None,
        alias: str | None = None, ids: str | None = None) -> msgspec.Meta:
    """The metadata of one argument: its help text (the schema's `description`) and the
    command-line details kept in `extra`: `positional` (else it is a `--flag`), a
    `short` alias such as `-p`, another long flag (`alias`, such as `--app`), the
    `metavar` shown in usage, for a string with a pattern what a value must be
    (`expect`), said when one does not match, and for an id the kind it is (`ids`:
    threads, runs, queue or lease, which every surface accepts in any case and as a
    unique prefix; or hash, in any case: uwf.invoker.ids)."""
    extra: dict[str, Any] = {}
    if positional:
        extra["positional"] = True
    if short is not None:
        extra["short"] = short
    if metavar is not None:
        extra["metavar"] = metavar
    if expect is not None:
        extra["expect"] = expect
    if alias is not None:  # another long flag for the same argument (`--app`)
        extra["alias"] = alias
    if ids is not None:
        extra["ids"] = ids
    return msgspec.Meta(description=help, extra=extra or None)
