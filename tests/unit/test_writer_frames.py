"""A writer's result crosses the socket in one frame made in one buffer
(`writerlink.done_frame`): the very bytes of a `Done` holding the result's msgpack,
which a client decodes into the same typed result."""

from __future__ import annotations

import msgspec

from uwf.engine.writerlink import HEADER, Done, _reply_decoder, done_frame, frame
from uwf.queue.results import Granted, Leased


def test_a_done_frame_is_a_dones() -> None:
    results = [
        Leased(now="2026-01-02T03:04:05.678Z", granted=2, leases=[
            Granted(id=f"0{n}", lease_id="L" * 26, lease_expires_at="2026-01-02T04:04:05.678Z",
                    attempt=n) for n in (1, 2)]),
        Leased(now="x", granted=0, leases=[]),
        {"é": ["✓" * 70_000]},  # a body over 64 KiB: the length in four bytes
    ]
    for result in results:
        framed = done_frame(result)
        assert framed == frame(Done(msgspec.Raw(msgspec.msgpack.encode(result))))
        reply = _reply_decoder.decode(framed[HEADER.size:])
        assert isinstance(reply, Done)
        assert msgspec.msgpack.decode(reply.result, type=type(result)) == result
