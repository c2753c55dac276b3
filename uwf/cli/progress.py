"""What a long command shows on a terminal: progress bars on stderr (done of total, rate,
time left) and a run's timeline on stdout.

Services report progress through plain callbacks, `progress(done, total)` (total 0:
unknown), and know nothing of terminals; only this module draws. A bar is drawn by
tqdm, imported when the first bar is drawn and never otherwise, so a command piped or
quick costs no more to start (tests/e2e/test_layers.py checks it). Nothing is drawn unless
stderr is a terminal: what tests capture never changes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uwf.store import Store

# A bar is drawn once its work has lasted this long (UWF_PROGRESS_DELAY): a quick
# command's output is its result alone.
DELAY = 0.5
# From this many on, counts and rates are shown scaled (120k, not 120000).
SCALED = 10_000
# A bar's size on a terminal that reports none (0 columns or rows).
FALLBACK_COLUMNS, FALLBACK_ROWS = 80, 24


class Bar:
    """One bar, `label: done/total [elapsed<left, rate unit/s]`, drawn on the first call;
    a callback `bar(done, total)`. Closed (left on screen, the line ended) once done
    reaches total, or by `close()`; a call after that, or one whose `done` went back,
    starts the bar again."""

    def __init__(self, label: str, unit: str, stream: IO[str], delay: float = 0.0,
                 leave: bool = True) -> None:
        self.label = label
        self.unit = unit
        self._leave = leave
        self._stream = stream
        self._delay = delay
        self._bar: Any = None  # a tqdm, once drawn
        self._ended: tuple[int, int] | None = None  # where the last bar ended full

    def __call__(self, done: int, total: int) -> None:
        shown_total = total if total > 0 else None
        bar = self._bar
        if bar is None and ((shown_total is None and done <= 0) or self._ended == (done, total)):
            return  # nothing done of nothing known, or told again that it is all done
        if bar is not None and (done < bar.n or bar.total != shown_total):
            self.close()
            bar = None
        if bar is None:
            from tqdm import tqdm  # only now: a bar is drawn

            bar = self._bar = tqdm(total=shown_total, desc=self.label, unit=f" {self.unit}",
                                   unit_scale=(shown_total or 0) >= SCALED, file=self._stream,
                                   leave=self._leave, mininterval=0.1, smoothing=0.1,
                                   delay=self._delay, **_width(self._stream))
        bar.update(done - bar.n)
        if shown_total is not None and done >= shown_total:
            self.close()
            self._ended = (done, total)

    def close(self) -> None:
        """End the bar's line (drawing it as it stands); nothing when none is drawn."""
        self._ended = None
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.close()

    @contextlib.contextmanager
    def aside(self) -> Iterator[None]:
        """Clear the bar while a line is written on the same terminal, then draw it back."""
        bar = self._bar
        if bar is None:
            yield
            return
        bar.clear()
        try:
            yield
        finally:
            bar.refresh()


def _width(stream: IO[str]) -> dict[str, Any]:
    """How wide a bar is: the terminal's width, followed as it changes; a fixed
    FALLBACK_COLUMNS x FALLBACK_ROWS when the terminal reports no size (0 columns or
    rows, as a serial console or a container's pseudo-terminal may), where tqdm would
    draw nothing."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        size = os.terminal_size((0, 0))
    if size.columns > 0 and size.lines > 0:
        return {"dynamic_ncols": True}
    return {"ncols": size.columns or FALLBACK_COLUMNS, "nrows": size.lines or FALLBACK_ROWS}


class Bars:
    """The bars of one command on `stream` (stderr), each shown only once its work has
    lasted `delay` seconds (quick work draws nothing); `close()` ends any left open."""

    def __init__(self, stream: IO[str], delay: float = DELAY) -> None:
        self._stream = stream
        self._delay = delay
        self._bars: list[Bar] = []

    def bar(self, label: str, unit: str = "events", leave: bool = True) -> Bar:
        """A bar; `leave` false erases it when it ends (the result says the rest)."""
        made = Bar(label, unit, self._stream, self._delay, leave)
        self._bars.append(made)
        return made

    def close(self) -> None:
        for bar in self._bars:
            bar.close()


# -- a run's timeline --------------------------------------------------------------------

END = "$END"
# Verdicts marked in the path taken; any other status is shown in the table only.
PASSED = frozenset({"approved", "accepted", "passed", "ok", "success", "succeeded", "lgtm"})
FAILED = frozenset({"rejected", "failed", "failure", "error", "declined", "blocked",
                    "changes_requested", "changes-requested", "needs_changes"})


STDERR_SHOWN = 3  # a failed attempt's last lines of stderr a panel shows (--json: all)


def timeline(steps: Sequence[Mapping[str, Any]], in_flight: Mapping[str, Any] | None,
             reached_end: bool) -> str:
    """A run's steps (`thread log`'s records) as lines: number, role, status, duration;
    then the path taken, e.g. `planner → developer → reviewer ✗ → reviewer ✓ → $END`."""
    rows = [(str(step.get("step", number)), str(step.get("role", "?")),
             str(step.get("status", "?")), _duration(step))
            for number, step in enumerate(steps, 1)]
    if in_flight is not None:
        rows.append((str(len(steps) + 1), str(in_flight.get("role", "?")), "running",
                     f"since {in_flight.get('startedAt', '?')}"))
    if not rows:
        return "timeline  (no step yet)"
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["timeline"]
    for row in rows:
        cells = [row[0].rjust(widths[0]), row[1].ljust(widths[1]), row[2].ljust(widths[2]),
                 row[3]]
        lines.append("  " + "  ".join(cells).rstrip())
    path = [_marked(str(step.get("role", "?")), str(step.get("status", ""))) for step in steps]
    if in_flight is not None:
        path.append(f"{in_flight.get('role', '?')} …")
    if reached_end:
        path.append(END)
    lines.append("path  " + " → ".join(path))
    return "\n".join(lines)


def failure_line(failure: Mapping[str, Any]) -> str:
    """`lastFailure` in one line: the reason, the role and the message."""
    return f"{failure.get('reason', '?')} ({failure.get('role', '?')}): " \
           f"{failure.get('message', '')}"


def attempts_lines(attempts: Sequence[Mapping[str, Any]]) -> str:
    """A run's last attempts (`attempts`) as lines: role, outcome, duration, and a
    failure's message and its agent's last lines of stderr, or the StepNode a reused
    step was taken over from."""
    rows = []
    for attempt in attempts:
        ms = attempt.get("durationMs")
        took = "-" if not isinstance(ms, int) else _duration({"startedAtMs": 0,
                                                               "completedAtMs": ms})
        outcome = str(attempt.get("outcome", "?"))
        note = str(attempt.get("message") or attempt.get("status") or "")
        if outcome == "reused":
            note = f"{note}, reused from {attempt.get('reused')}"
        rows.append((str(attempt.get("role", "?")), outcome, took, note,
                     str(attempt.get("stderr") or "").splitlines()[-STDERR_SHOWN:]))
    widths = [max(len(row[i]) for row in rows) for i in range(3)] if rows else [0, 0, 0]
    lines = ["attempts"]
    for number, (role, outcome, took, note, stderr) in enumerate(rows, 1):
        cells = [str(number).rjust(len(str(len(rows)))), role.ljust(widths[0]),
                 outcome.ljust(widths[1]), took.ljust(widths[2]), note]
        lines.append("  " + "  ".join(cells).rstrip())
        lines += [f"      stderr  {line}" for line in stderr]
    return "\n".join(lines)


def run_timeline(store: Store, thread: str, in_flight: Mapping[str, Any] | None,
                 reached_end: bool) -> str | None:
    """The timeline of `thread` read from `store` (`thread log`'s records); None when its
    steps cannot be read (a node missing: the panel above says what is known)."""
    from uwf.errors import UwfError
    from uwf.payload import to_payload
    from uwf.threads.service import iter_log

    try:
        steps = [to_payload(record) for record in iter_log(store, thread)]
    except UwfError:
        return None
    return timeline(steps, in_flight, reached_end)


def _marked(role: str, status: str) -> str:
    if status.lower() in PASSED:
        return f"{role} ✓"
    if status.lower() in FAILED:
        return f"{role} ✗"
    return role


def _duration(step: Mapping[str, Any]) -> str:
    started, completed = step.get("startedAtMs"), step.get("completedAtMs")
    if not isinstance(started, int) or not isinstance(completed, int):
        return "-"
    seconds = max(0, completed - started) / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
