"""The writer's entry to a round when the log's tail is still its own: no scan, no
recovery, no line digested again.

A round enters the write protocol by reading the log's tail and recovering it (a torn
line cut, a repair note's cuts recorded: `_FileSession.tail`, `recover`). While the
writer runs, the tail is its own as a rule: the last line is the one its previous
round appended, its checkpoint (seq, digest) known from that append. `own_head` says
so from the file system alone, under the writers' lock, when it can:

- the last segment is still the file the writer appended to (device, inode), of the
  size its append left: no byte after its line (no line of another process, no torn
  tail), none cut;
- no segment after it (another process that rotated);
- no repair note (`repair.pending`: a cut noted and not yet recorded).

Then the section is at that head as `recover` would leave it (it would find nothing
to cut or record), and the round appends after it. Anything else (another process
appended, or left a torn tail when it was killed, or a note) gives None and the round
takes the full entry (`rounds.enter`), which catches up.

Three system calls (a `stat` and two `access`), on paths kept from round to round
(`OwnTail`), not through the log's general tail hint (which parses the line's seq
again each time).
"""

from __future__ import annotations

import os

from uwf.engine.filelog import _FileSession
from uwf.engine.log import Checkpoint, LogSession
from uwf.engine.segments import PENDING_NOTE, segment_name
from uwf.engine.spans import Span


class OwnTail:
    """The paths `own_head` looks at: the segment the writer's last line is in and the
    repair note spelled once (each is the same for many rounds), the segment that
    would follow that line spelled each round (its name is the next line's seq)."""

    def __init__(self) -> None:
        self._segment = ("", "")  # (name, path)
        self._note = ""

    def paths(self, session: _FileSession, known: tuple[Span, Checkpoint]
              ) -> tuple[str, str, str]:
        segments = session.segments
        name = known[0].segment
        if self._segment[0] != name:
            self._segment = name, segments._path(name)
            self._note = segments._path(PENDING_NOTE)
        return (self._segment[1], segments._path(segment_name(known[1].seq + 1)),
                self._note)

    def head(self, session: LogSession) -> Checkpoint | None:
        """The log's head when its last line is still the one this process appended or
        scanned last (see the module), the section set at it; None: look (`tail`)."""
        if not isinstance(session, _FileSession):
            return None
        log = session.log
        known = log._known
        if known is None or known[0] is not log._tail_hint:
            return None
        segment, following, note = self.paths(session, known)
        try:
            found = os.stat(segment)
        except FileNotFoundError:
            return None
        span = known[0]
        if found.st_size != span.end or (found.st_dev, found.st_ino) != log._tail_file \
                or os.access(following, os.F_OK) or os.access(note, os.F_OK):
            return None
        session._head_span, session._file, session._head = span, log._tail_file, known[1]
        session._unrecorded = 0
        return known[1]


def own_head(session: LogSession) -> Checkpoint | None:
    """`OwnTail().head(session)` (the paths spelled again: a caller that keeps an
    `OwnTail` spells them once a head)."""
    return OwnTail().head(session)
