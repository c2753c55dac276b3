"""uwf's own ULIDs (uwf/engine/ulids.py) are ULIDs any library reads back."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from uwf.engine.ulids import new_ulid, new_ulids
from uwf.ids import ULID_PATTERN

MS = st.integers(min_value=0, max_value=(1 << 48) - 1)


@given(MS)
def test_a_new_ulid_is_read_back_by_python_ulid_with_its_time(ms: int) -> None:
    text = new_ulid(ms)
    assert re.match(ULID_PATTERN, text)
    parsed = ULID.from_str(text)
    assert parsed.milliseconds == ms
    assert str(parsed) == text


@given(MS, st.integers(min_value=1, max_value=300))
def test_a_run_of_ulids_increases_within_its_millisecond(ms: int, count: int) -> None:
    ids = new_ulids(ms, count)
    assert len(ids) == count
    assert ids == sorted(ids)
    assert len(set(ids)) == count
    assert {ULID.from_str(text).milliseconds for text in ids} == {ms}
    values = [int(ULID.from_str(text)) for text in ids]
    assert values == list(range(values[0], values[0] + count))


def test_random_bits_differ_between_calls() -> None:
    assert len({new_ulid(1_700_000_000_000) for _ in range(200)}) == 200


@pytest.mark.parametrize("ms", [-1, 1 << 48])
def test_a_time_a_ulid_cannot_hold_is_refused(ms: int) -> None:
    with pytest.raises(ValueError, match="2\\*\\*48"):
        new_ulid(ms)
