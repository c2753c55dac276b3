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

Three system calls (a `stat` and two `access`): `_FileSession.own`, the same entry a
command of this process takes when it holds its views' fold (uwf/engine/filelog.py).
"""

from __future__ import annotations

from uwf.engine.filelog import _FileSession
from uwf.engine.log import Checkpoint, LogSession


def own_head(session: LogSession) -> Checkpoint | None:
    """The log's head when its last line is still the one this process appended or
    scanned last (see the module), the section set at it; None: look (`tail`)."""
    return session.own() if isinstance(session, _FileSession) else None
