"""Lines inside one segment file of the file log: read backward from its end, counted,
or found by the seq they claim.

Private to `uwf.engine.filelog`. A line is found by its seq from the segment's end
when it is near (catch-up and checkpoints read there), and otherwise by bisecting
byte offsets: the lines of a segment claim increasing seqs, each in the fixed
prefix `{"seq":N,`, so a probe reads a few bytes after a newline and halves the
range. Reading a stream's events one by one then costs a few reads each, wherever
they lie in a 64 MiB segment.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import EllipsisType
from typing import NamedTuple

from uwf.engine.segments import FileSegments

WINDOW = 64 * 1024  # bytes read at a time when reading many lines backward
TAIL = 4096  # the first window at the end: a few lines, for the head and the tail check
NEAR = 256 * 1024  # a line further from the end than this is found by bisecting
FAR_LINES = 64  # ... as is one whose seq is this many lines before the last line's
_PREFIX = 32  # bytes that hold `{"seq":N,` for any 20-digit N


class Span(NamedTuple):
    """A complete line in a segment: [start, end) including its newline (a tuple:
    the rebuild reads one per event)."""

    segment: str
    start: int
    end: int
    raw: bytes


def seq_of(raw: bytes) -> int | None:
    """The `seq` a line claims, read from its fixed prefix `{"seq":N,` (None if absent)."""
    if raw.startswith(b'{"seq":'):
        comma = raw.find(b",", 7)
        digits = raw[7:comma]
        if comma > 7 and digits.isdigit():
            return int(digits)
    return None


def complete_end(segments: FileSegments, name: str) -> int:
    """Offset just after the last `\\n` of a segment (0 if it has none)."""
    size = segments.size(name)
    window = TAIL
    while True:
        start = max(0, size - window)
        chunk = segments.read(name, start, size)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        if start == 0:
            return 0
        window *= 4


def backward(segments: FileSegments, name: str, end: int, window: int = TAIL
             ) -> Iterator[Span]:
    """Complete lines of a segment ending at `end`, newest first; the window grows
    from `window` to `WINDOW`, so finding the last line reads a few KiB."""
    # `carry` is the part of the file from `position` up to the line last
    # yielded (a line whose start is not read yet), newline included.
    carry = b""
    position = end
    while position > 0:
        start = max(0, position - window)
        window = min(window * 4, WINDOW)
        chunk = segments.read(name, start, position) + carry
        parts = chunk.split(b"\n")[:-1]  # the chunk ends with a newline
        whole = parts if start == 0 else parts[1:]
        line_end = start + len(chunk)
        for raw in reversed(whole):
            line_start = line_end - len(raw) - 1
            yield Span(name, line_start, line_end, raw)
            line_end = line_start
        carry = b"" if start == 0 else parts[0] + b"\n"
        position = start


def count_lines(segments: FileSegments, name: str, end: int) -> int:
    count, position = 0, 0
    while position < end:
        chunk = segments.read(name, position, min(end, position + (1 << 20)))
        count += chunk.count(b"\n")
        position += len(chunk)
    return count


def find(segments: FileSegments, name: str, seq: int) -> Span | None:
    """The line of the segment claiming `seq` (None: none does). Walked back from the
    end, and bisected once that walk is far from the end; a line claiming no seq
    sends the bisection back to the walk, which reads every line."""
    end = complete_end(segments, name)
    bisected = False
    for span in backward(segments, name, end):
        claimed = seq_of(span.raw)
        if claimed == seq:
            return span
        if claimed is not None and claimed < seq:
            return None
        far = end - span.start > NEAR or (span.end == end and claimed is not None
                                           and claimed - seq > FAR_LINES)
        if claimed is not None and not bisected and far:
            found = _bisect(segments, name, span.start, seq)
            if found is not ...:
                return found
            bisected = True  # in vain: walk the rest
    return None


def _bisect(segments: FileSegments, name: str, hi: int, seq: int
            ) -> Span | EllipsisType | None:
    """The line claiming `seq` among those before byte `hi` (a line start, whose line
    claims more): halve [lo, hi) on the claim of the first line starting past the
    middle, then read what is left. `...` when a probed line claims no seq."""
    lo = 0  # a line start whose line claims at most `seq` (or the segment's start)
    while hi - lo > WINDOW:
        at = (lo + hi) // 2
        # One read finds the first line start past the middle and its prefix, mostly.
        chunk = segments.read(name, at - 1, min(hi - 1, at - 1 + TAIL))
        newline = chunk.find(b"\n")
        if newline >= 0 and newline + 1 + _PREFIX <= len(chunk):
            start = at + newline
            prefix = chunk[newline + 1:newline + 1 + _PREFIX]
        else:
            found = _line_start(segments, name, at, hi)
            if found is None:
                break  # one long line fills the upper half: read the rest whole
            start = found
            prefix = segments.read(name, start, start + _PREFIX)
        claimed = seq_of(prefix)
        if claimed is None:
            return ...
        if claimed <= seq:
            lo = start
        else:
            hi = start
    data = segments.read(name, lo, hi)
    # The last line claiming `seq`, as the walk from the end finds it: its prefix right
    # after a newline (a JSON line holds no raw newline), or at `lo`, a line start.
    needle = b'{"seq":%d,' % seq
    at = data.rfind(b"\n" + needle)
    if at >= 0:
        start = at + 1
    elif data.startswith(needle):
        start = 0
    else:
        return None
    stop = data.find(b"\n", start)
    if stop < 0:
        return None
    return Span(name, lo + start, lo + stop + 1, data[start:stop])


def _line_start(segments: FileSegments, name: str, at: int, hi: int) -> int | None:
    """The first line start in [at, hi), or None."""
    position = at - 1  # a newline just before `at` makes `at` a line start
    window = TAIL
    while position < hi - 1:
        chunk = segments.read(name, position, min(hi - 1, position + window))
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(chunk)
        window = min(window * 4, WINDOW)
    return None
