"""Numbers from `UWF_*` environment variables: a bad value is a usage error naming it.

Every value must be finite and at least 0 (more than 0 if asked); a variable in
`MAXIMUM` (or a call's `maximum`) is bounded above too, so `UWF_LOCK_TIMEOUT=inf`
cannot make a writer wait forever. The ranges are listed in docs/cli.md#limits.

Also the environment an agent sees (`with_dotenv`): the config's `.env` under the
entry point's environment, as `uwf thread step` builds it. Nothing here reads this
process's environment: the caller passes the one its `Settings` hold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from uwf.errors import Rejected, UsageError

# The largest value each bounded variable accepts.
MAXIMUM: dict[str, float] = {
    "UWF_LOCK_TIMEOUT": 3600,  # seconds a writer waits for the store lock
    "UWF_LLM_TIMEOUT": 86_400,  # seconds of one chat-completions request
    "UWF_LLM_BACKOFF_S": 3600,  # the first retry's backoff, doubled each retry
    "UWF_LLM_RETRIES": 100,
}


def env_number(name: str, default: float, *, environ: Mapping[str, str],
               integer: bool = False, positive: bool = False,
               maximum: float | None = None) -> float:
    """The value of `name` in `environ` (an entry point's, via its `Settings`), or
    `default` when unset: finite, never negative, positive if asked, and at most
    `maximum` (default `MAXIMUM[name]`, else unbounded)."""
    raw = environ.get(name)
    if not raw:
        return default
    if maximum is None:
        maximum = MAXIMUM.get(name)
    kind = "an integer" if integer else "a number"
    try:
        # int() of 4,300+ digits raises ValueError too: far out of range anyway.
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise UsageError(f"{name} must be {kind}, not {_shown(raw)!r}",
                         f"fix or unset {name}") from None
    if (math.isfinite(value) and value >= 0 and not (positive and value == 0)
            and (maximum is None or value <= maximum)):
        return value
    raise UsageError(f"{name} must be {_wanted(integer, positive, maximum, value)}, "
                     f"not {_shown(raw)}", f"fix or unset {name}")


def _wanted(integer: bool, positive: bool, maximum: float | None, value: float) -> str:
    """The accepted range in words: `0 or more`, `a finite number from 0 to 3,600`."""
    if maximum is None:
        lowest = "positive" if positive else "0 or more"
        return lowest if math.isfinite(value) else f"a finite number, {lowest}"
    top = f"{int(maximum):,}" if float(maximum).is_integer() else f"{maximum:g}"
    if integer:
        return f"an integer from {1 if positive else 0} to {top}"
    if positive:
        return f"a finite number more than 0 and at most {top}"
    return f"a finite number from 0 to {top}"


def _shown(raw: str) -> str:
    return raw if len(raw) <= 40 else raw[:40] + "..."


def with_dotenv(environ: Mapping[str, str], env_file: Path | None) -> dict[str, str]:
    """`environ` over `env_file` (the `.env` beside the config file; None: no `.env`):
    what an agent sees. A variable set in `environ` wins over `.env`, as with dotenv
    and as `uwf thread step` builds its agents' environment, so an agent started by
    hand reads the same keys and settings as one started by a step. An unreadable `.env`, or one
    that is not a regular file of at most 1 MiB (a FIFO, a device, a folder), is an
    error naming it (Rejected); a missing one adds nothing."""
    from uwf.config.configfile import Config, WorkflowConfig

    try:
        dotenv = Config(WorkflowConfig(), None, env_file).secrets()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise Rejected(f"cannot read {env_file}: {reason}", "fix or remove that file") from None
    return {**dotenv, **environ}
