"""A writer's round is one exclusive section of the store's log (`DeferredLog.round`,
uwf/writer/deferred.py): left with its lock given back either way, the segment it
appended to handed to the syncer when it ends, closed when it fails (no call of a
failed round is answered as done)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from uwf.engine.events import FORMAT_VERSION, NewEvent, StoreCreated
from uwf.engine.log import GENESIS, Checkpoint
from uwf.engine.rounds import envelopes
from uwf.store import Store
from uwf.writer.deferred import DeferredLog

MS = 1_790_000_000_123


def _lock_is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_round_hands_its_segment_on_and_a_failed_one_closes_it(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store.journal.log, "durable", True)  # appends leave an fd to sync
    log = DeferredLog(store.journal.log)
    lock = store.journal.log.segments.lock_path  # type: ignore[attr-defined]
    head = GENESIS

    def line() -> bytes:
        nonlocal head
        made, lines, last = envelopes(store.journal, head, [
            NewEvent("store", StoreCreated(format=FORMAT_VERSION))], MS)
        head = Checkpoint(made[-1].seq, last)
        return lines[0]

    with log.round() as section:
        assert not _lock_is_free(lock)
        section.recover()
        section.append([line()])
    assert _lock_is_free(lock)
    assert section.appended
    assert section.fd is not None
    os.fstat(section.fd)  # open, the syncer's to fdatasync and close
    os.close(section.fd)

    entered = []

    def fail() -> None:
        with log.round() as failed:
            entered.append(failed)
            failed.recover()
            failed.append([line()])
            raise RuntimeError("a bug in a fold")

    before = _open_fds()
    with pytest.raises(RuntimeError):
        fail()
    assert _lock_is_free(lock)
    assert entered[0].fd is None
    assert _open_fds() == before  # the segment's descriptor for the syncer closed
