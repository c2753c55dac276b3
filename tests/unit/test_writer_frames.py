"""A writer's result crosses the socket in one frame made in one buffer
(`writerlink.done_frame`): the very bytes of a `Done` holding the result's msgpack; a
client reads a reply and its typed result in one pass (`DoneAs[result] | Refused`); the
writer reads a call's arguments once, as its operation's Struct (`ops.Op.read`)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from uwf.engine.writerlink import HEADER, Call, Done, DoneAs, Refused, Reply, done_frame, frame
from uwf.queue.results import Granted, Leased


def test_a_done_frame_is_a_dones() -> None:
    results: list[Any] = [
        Leased(now="2026-01-02T03:04:05.678Z", granted=2, leases=[
            Granted(id=f"0{n}", lease_id="L" * 26, lease_expires_at="2026-01-02T04:04:05.678Z",
                    attempt=n) for n in (1, 2)]),
        Leased(now="x", granted=0, leases=[]),
        {"é": ["✓" * 70_000]},  # a body over 64 KiB: the length in four bytes
    ]
    for result in results:
        framed = done_frame(result)
        assert framed == frame(Done(msgspec.Raw(msgspec.msgpack.encode(result))))
        reply = msgspec.msgpack.decode(framed[HEADER.size:], type=Reply)
        assert isinstance(reply, Done)
        assert msgspec.msgpack.decode(reply.result, type=type(result)) == result


def test_a_client_reads_a_reply_and_its_result_at_once() -> None:
    leased = Leased(now="n", granted=1, leases=[
        Granted(id="i", lease_id="l", lease_expires_at="e", attempt=1)])
    decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(DoneAs[Leased] | Refused)
    done = decoder.decode(frame(Done(msgspec.Raw(msgspec.msgpack.encode(leased))))[4:])
    assert isinstance(done, DoneAs)
    assert done.result == leased
    refused = Refused("NotFound", "no entry x", "run `uwf queue list`", 3)
    assert decoder.decode(frame(refused)[4:]) == refused


def test_the_writer_reads_a_clients_call_as_its_operations_arguments() -> None:
    from uwf.writer.ops import OPS, CompleteArgs, LeaseArgs, read_call

    for op, args, want in (
            ("queue.lease", {"limit": 1, "session": None}, LeaseArgs(1, None)),
            ("queue.lease", {}, LeaseArgs()),
            ("queue.complete", {"id": "i", "lease": "l", "run": "r"},
             CompleteArgs(id="i", lease="l", run="r"))):
        call = read_call(frame(Call(op, args))[HEADER.size:])  # as a client frames it
        assert call.op == op
        assert OPS[op].read(call.args) == want
    for wrong in ({"limit": "one"}, {"limit": 1, "later": True}):
        call = read_call(frame(Call("queue.lease", wrong))[HEADER.size:])
        with pytest.raises(msgspec.ValidationError):
            OPS["queue.lease"].read(call.args)
