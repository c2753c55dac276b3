"""What `uwf store copy` returns: the payload `--json` prints, typed."""

from __future__ import annotations

import msgspec

from uwf.payload import Result


class Copied(Result):
    """A store copied: where from and where to (a folder, or a URL without its password),
    the events copied (the log's lines, up to its last whole batch), the nodes they reach,
    and that the copy verified (its head is the source's, every node is there, `log
    verify` and `registry verify` pass on it; a copy that does not is an error instead)."""

    from_: str = msgspec.field(name="from")
    to: str
    events: int
    nodes: int
    verified: bool
