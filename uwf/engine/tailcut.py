"""A torn tail's cut and its note, for the file log's writers (uwf/engine/filelog.py).

A tail that was never acknowledged (a last line without `\\n`, a batch with fewer than
n lines) is cut by the next writer, which records what it dropped as `log.repaired`.
The cut is noted (`repair.pending`, listing every cut not yet recorded) before the
bytes go, so a writer killed between truncating and recording leaves the record to
the next writer; a note whose cuts already end the log as records was left by a
writer killed before it could remove it.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import msgspec

from uwf.engine.events import LogRepaired
from uwf.engine.log import digest
from uwf.engine.segments import PENDING_NOTE, FileSegments
from uwf.engine.spans import Span, backward, complete_end
from uwf.errors import Corrupt


class TailInfo(msgspec.Struct):
    seq: int
    batch: tuple[int, int]


class _LastRepair(msgspec.Struct):
    type: str
    data: LogRepaired


_tail_decoder = msgspec.json.Decoder(TailInfo)
_repair_decoder = msgspec.json.Decoder(LogRepaired)
_last_repair_decoder = msgspec.json.Decoder(_LastRepair)
_notes_decoder = msgspec.json.Decoder(list[LogRepaired])


def tail_info(raw: bytes, where: str) -> TailInfo:
    """The seq and batch place of a line (the last of segment `where`)."""
    try:
        return _tail_decoder.decode(raw)
    except msgspec.DecodeError:
        raise Corrupt(
            f"the last line of {where} is not a valid event", "run `uwf log verify` to inspect it"
        ) from None


def check_whole(segments: FileSegments, previous: str, name: str) -> None:
    """A cut that empties the last segment leaves the one before it as the log's
    end: it must end with a whole line closing a whole batch, as a writer left it
    before rotating. Otherwise the log was altered; nothing is cut."""
    end = complete_end(segments, previous)
    last = next(backward(segments, previous, end), None)
    k, n = (1, 1) if last is None else tail_info(last.raw, previous).batch
    if end < segments.size(previous) or k < n:
        raise Corrupt(f"segment {previous} ends mid-line or mid-batch, and {name} "
                      "follows it: the log was altered", "run `uwf log verify`")


def read_note(segments: FileSegments) -> list[LogRepaired]:
    """The cuts the repair note lists (none when there is no note)."""
    note = segments.pending()
    if note is None:
        return []
    try:
        return _notes_decoder.decode(note)
    except msgspec.DecodeError:
        pass
    try:
        return [_repair_decoder.decode(note)]  # a note of one cut, as first written
    except msgspec.DecodeError:
        raise Corrupt(f"the repair note {segments.events_dir / PENDING_NOTE} is "
                      "damaged: it should list the torn tails cut and not yet recorded",
                      "run `uwf log verify`; once the log's tail is whole, remove the "
                      "note and retry") from None


def recorded_tail(segments: FileSegments, count: int) -> list[LogRepaired]:
    """The `log.repaired` data among the log's last `count` lines."""
    found: list[LogRepaired] = []
    for span in islice(_last_spans(segments), count):
        try:
            last_event = _last_repair_decoder.decode(span.raw)
        except msgspec.DecodeError:
            continue
        if last_event.type == LogRepaired.type:
            found.append(last_event.data)
    return found


def _last_spans(segments: FileSegments) -> Iterator[Span]:
    for name in reversed(segments.names()):
        yield from backward(segments, name, complete_end(segments, name))


def cut_tail(segments: FileSegments, name: str, size: int, cut: int, *,
             reasons: tuple[str, ...], unrecorded: list[LogRepaired]) -> LogRepaired:
    """Cut segment `name` from `cut` to `size`, noted first (with `unrecorded`, the
    earlier cuts not recorded yet); what was dropped, for `log.repaired`."""
    dropped = segments.read(name, cut, size)
    repair = LogRepaired(
        segment=name,
        offset=cut,
        dropped_bytes=len(dropped),
        dropped_lines=dropped.count(b"\n") + (0 if dropped.endswith(b"\n") else 1),
        digest=digest(dropped),
        reason="; ".join(reasons),
    )
    # Noted (with any earlier unrecorded cut) before the bytes go.
    segments.set_pending(msgspec.json.encode([*unrecorded, repair]))
    if cut == 0:
        segments.remove(name)
    else:
        segments.truncate(name, cut)
    return repair
