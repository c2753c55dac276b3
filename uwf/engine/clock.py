"""The injected clock: a function returning epoch milliseconds, passed explicitly.

`--now` (or `UWF_NOW`) fixes time for one command: the CLI turns it into a
`fixed_clock` and hands it to the store; nothing reads or writes the process
environment behind the caller's back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

from uwf.errors import UsageError

Clock = Callable[[], int]

# The instants `--now` and `UWF_NOW` accept: 1970-01-01T00:00:00.000Z (ULIDs carry
# no earlier time) to 9999-12-31T23:59:59.999Z (the last RFC 3339 can write).
MIN_INSTANT_MS = 0
MAX_INSTANT_MS = 253_402_300_799_999
INSTANT_RANGE = "between 1970-01-01 and 9999-12-31 (UTC)"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
_EPOCH_MS = re.compile(r"[+-]?[0-9]+", re.ASCII)
_MS_PER_DAY = 86_400_000


def parse_instant(text: str, source: str = "time") -> int:
    """Milliseconds since the epoch from an RFC 3339 string or an integer of ms, within
    `MIN_INSTANT_MS`..`MAX_INSTANT_MS`; `source` (`--now`, `UWF_NOW`) names it in errors."""
    text = text.strip()
    ms: int | None
    if _EPOCH_MS.fullmatch(text):
        # 16 digits already pass year 9999; int() of 4,300+ digits would raise.
        ms = int(text) if len(text) <= 20 else None
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"invalid time {_shown(text)} for {source}",
                "give RFC 3339 (2026-11-25T20:57:13Z) or epoch ms",
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        # Integer arithmetic: timestamp() is a float, and * 1000 can lose the last ms.
        ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    if ms is None or not MIN_INSTANT_MS <= ms <= MAX_INSTANT_MS:
        raise UsageError(f"{source} {_shown(text)} is out of range",
                         f"give a time {INSTANT_RANGE}, as RFC 3339 or epoch ms")
    return ms


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def system_clock() -> int:
    """The wall clock in ms."""
    return time.time_ns() // 1_000_000


def fixed_clock(ms: int) -> Clock:
    """A clock stopped at `ms` (for `--now`, `UWF_NOW` and tests)."""
    return lambda: ms


def clock_from(override: str | None = None, env: Mapping[str, str] | None = None) -> Clock:
    """`override` (`--now`), else `env["UWF_NOW"]`, else the wall clock.

    A malformed or out-of-range value is a usage error here, before any work is done.
    """
    if override:
        return fixed_clock(parse_instant(override, "--now"))
    fixed = (env or {}).get("UWF_NOW")
    return fixed_clock(parse_instant(fixed, "UWF_NOW")) if fixed else system_clock


def format_ts(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, as every event's `ts`.

    Plain integer arithmetic on the proleptic Gregorian calendar, so it never raises:
    a deadline past year 9999 (now + a year's timeout) prints as `10000-...`.
    """
    days, in_day = divmod(ms, _MS_PER_DAY)
    seconds, millis = divmod(in_day, 1000)
    hour, seconds = divmod(seconds, 3600)
    minute, second = divmod(seconds, 60)
    year, month, day = _civil_from_days(days)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a count of days since 1970-01-01 (H. Hinnant's algorithm:
    400-year eras of 146,097 days, years starting on 1 March)."""
    shifted = days + 719_468  # days since 0000-03-01
    era = shifted // 146_097
    day_of_era = shifted - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524
                   - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153  # 0 = March
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (month <= 2), month, day


class Stamps:
    """Event stamps (`format_ts`, byte for byte) for a process that writes many: the
    second spelled once, each millisecond of it one format (tests/unit/test_rounds.py).
    A journal holds one (`Journal.stamps`)."""

    __slots__ = ("_prefix", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self, ms: int) -> str:
        second, millis = divmod(ms, 1000)
        if second != self._second:
            self._prefix = format_ts(second * 1000)[:-5]  # without ".000Z"
            self._second = second
        return f"{self._prefix}.{millis:03d}Z"
