"""A writer's round spells its lines as the journal does (uwf/engine/rounds.py): the
same envelopes and bytes for the same events at the same instant with the same ids,
the chain's last digest handed back rather than taken again, and `clock.Stamps`
spelling an instant as `format_ts` does."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import pytest

from uwf.engine import ulids
from uwf.engine.clock import Stamps, format_ts
from uwf.engine.events import Envelope, NewEvent, digest, encode_line
from uwf.engine.log import Checkpoint
from uwf.engine.rounds import envelopes
from uwf.queue.events import QueueCompleted, QueueReleased
from uwf.store import Store
from uwf.writer.server import chain_digest

MS = 1_790_000_000_123


def _fixed_ids(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Ids minted from the same randomness each time `reset()` is called."""
    def reset() -> None:
        counter = itertools.count(7)
        monkeypatch.setattr(ulids, "_LAST", ulids._Last())
        monkeypatch.setattr(ulids, "randomness", lambda: next(counter).to_bytes(10, "big"))
    return reset


@pytest.mark.parametrize("count", [1, 3])
@pytest.mark.parametrize("fast", [False, True])
def test_a_rounds_lines_are_the_journals(store: Store, monkeypatch: pytest.MonkeyPatch,
                                         count: int, fast: bool) -> None:
    reset = _fixed_ids(monkeypatch)
    journal = store.journal
    head = Checkpoint(41, "ab" * 16)
    released = QueueReleased(lease_id="l", failed=True, attempts=2, reason="é\n")
    events = [NewEvent(f"queue/{n}", QueueCompleted(lease_id=f"lease {n}") if n % 2
                       else released) for n in range(count)]
    reset()
    want_made, want_lines = journal.envelopes(head, events, MS)
    reset()
    journal.stamps = Stamps()  # the second spelled again
    made, lines, last = envelopes(journal, head, events, MS,
                                  line_digest=chain_digest if fast else digest)
    assert lines == want_lines
    assert {envelope.ts for envelope in made} == {format_ts(MS)}
    assert made == want_made
    assert last == digest(lines[-1])  # the head a round moves to
    chained = [json.loads(line)["prev"] for line in lines]  # each line's prev its own
    assert chained == [head.digest, *(digest(line) for line in lines[:-1])]


def test_stamps_spell_as_format_ts() -> None:
    stamps = Stamps()
    instants = [0, 999, 1000, MS, MS + 877, MS + 1000, 253_402_300_799_999,
                253_402_300_800_000, *range(MS - 3, MS + 2_003, 7)]
    for ms in instants:
        assert stamps(ms) == format_ts(ms), ms


def test_the_writers_digest_is_the_chains() -> None:
    for line in (b"", b"{}", b'{"seq":1}' * 100, "é✓".encode() * 999):
        assert chain_digest(line) == digest(line)


def test_one_events_line_is_its_envelope(store: Store, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    """A round's usual call, one event, takes a path of its own (no lists of ids): its
    envelope and line are the ones the event's fields make, chained after `head`."""
    reset = _fixed_ids(monkeypatch)
    head = Checkpoint(41, "ab" * 16)
    event = NewEvent("queue/7", QueueCompleted(lease_id="lease 7"))
    reset()
    want = Envelope(42, ulids.new_ulid(MS), format_ts(MS), "queue.completed", "queue/7",
                    (1, 1), event.data, head.digest)
    for last_digest in (True, False):
        reset()
        made, lines, last = envelopes(store.journal, head, [event], MS,
                                      last_digest=last_digest)
        assert made == [want]
        assert lines == [encode_line(want)]
        assert last == (digest(lines[0]) if last_digest else head.digest)
