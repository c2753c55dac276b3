"""A full replay's filter of the keys its parts wrote (uwf/engine/bulkfold.py
`_Written`): a key it does not hold was never written (no read of the views); of the
keys never written it holds few at a replay's ratio of keys to bits (720,000 rows at
1.04M events in 2 ** 26 bits; here the same ratio, 64 times smaller), so few states are
read back in vain."""

from __future__ import annotations

import pytest

from uwf.engine import bulkfold
from uwf.engine.bulkfold import _Written

BITS = 20
WRITTEN = 720_000 >> (26 - BITS)
OTHERS = 20_000


def test_every_key_written_is_held_and_few_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulkfold, "SEEN_BITS", BITS)
    written = _Written()
    salt = hash("runs")
    keys = [f"01J{number:023d}" for number in range(WRITTEN)]
    half = WRITTEN // 2
    for key in keys[:half]:
        written.add(hash(key) + salt)
    written.add_rows([(key, b"") for key in keys[half:]], salt)
    assert all(written.may_hold(hash(key) + salt) for key in keys)
    others = sum(written.may_hold(hash(f"01K{number:023d}") + salt)
                 for number in range(OTHERS))
    assert others < OTHERS // 500  # a byte a key (fold.Seen's, 8 times the keys) holds ~8 %
    # The same key under another view's salt is another key.
    assert sum(written.may_hold(hash(key) + hash("threads")) for key in keys) < WRITTEN // 500
