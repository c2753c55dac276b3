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


def test_each_millisecond_draws_its_own_random_bits() -> None:
    firsts = {new_ulid(ms)[10:] for ms in range(1_700_000_000_000, 1_700_000_000_200)}
    assert len(firsts) == 200


@pytest.mark.parametrize("ms", [-1, 1 << 48])
def test_a_time_a_ulid_cannot_hold_is_refused(ms: int) -> None:
    with pytest.raises(ValueError, match="2\\*\\*48"):
        new_ulid(ms)


@given(MS, st.lists(st.integers(min_value=1, max_value=20), min_size=2, max_size=20))
def test_ids_of_one_millisecond_sort_in_the_order_they_were_minted(
        ms: int, counts: list[int]) -> None:
    minted: list[str] = []
    for count in counts:
        minted += new_ulids(ms, count) if count > 1 else [new_ulid(ms)]
    assert minted == sorted(minted)
    assert len(set(minted)) == len(minted)


@given(MS, st.integers(min_value=-40, max_value=40), st.integers(min_value=1, max_value=90))
def test_a_run_across_a_change_of_its_high_bits_is_the_ids_minted_one_by_one(
        ms: int, offset: int, count: int) -> None:
    """`new_ulids` spells the first 22 characters once per 2**20 values: a run that
    crosses such a boundary (or a carry into the time's bits) is what `new_ulid` gives."""
    from uwf.engine import ulids

    start = ((3 << 20) + offset) & ((1 << 79) - 1)
    saved = ulids.randomness
    ulids.randomness = lambda: start.to_bytes(10, "big")
    try:
        ulids._LAST.value = 1 << 128  # no millisecond: the next id draws its bits
        together = new_ulids(ms, count)
        ulids._LAST.value = 1 << 128  # no millisecond: the next id draws its bits
        alone = [new_ulid(ms) for _ in range(count)]
    finally:
        ulids.randomness = saved
    assert together == alone
    assert [int(ULID.from_str(text)) for text in together] == list(
        range((ms << 80) | start, ((ms << 80) | start) + count))
