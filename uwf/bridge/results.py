"""What `uwf bridge ...` returns: the payloads `--json` prints, typed."""

from __future__ import annotations

import msgspec

from uwf.payload import Result


class Bridged(Result):
    """Events published to a broker (`host:port`) under `prefix`: the seqs from `from` to
    `to` (`from` None when there was nothing to publish; `to` is then the seq the bridge
    stands at), how many the broker acknowledged, and the state file holding `to`."""

    broker: str
    prefix: str
    from_: int | None = msgspec.field(name="from")
    to: int
    published: int
    state: str
