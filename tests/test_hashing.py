"""Hash vectors: deterministic CBOR written out by hand from RFC 8949, then XXH64."""

from __future__ import annotations

from typing import Any

import pytest
import xxhash
from hypothesis import example, given
from hypothesis import strategies as st

from uwf.cas.hashing import (
    deterministic_cbor,
    format_hash,
    hash_bytes,
    is_hash,
    node_hash,
    normalize,
    self_hash,
)

TEXT = "7XHYZXM5EEFS3"  # any valid type hash; the built-in Text schema's

# (value, its deterministic CBOR written by hand)
CBOR_VECTORS: list[tuple[Any, str]] = [
    ({}, "a0"),  # empty map
    ([], "80"),
    (None, "f6"),
    (True, "f5"),
    (0, "00"),
    (23, "17"),  # the largest one-byte head
    (24, "1818"),  # the smallest two-byte head
    (-1, "20"),  # major type 1, value 0
    (-25, "3818"),
    (100000, "1a000186a0"),
    (-(2**53), "3b001fffffffffffff"),
    (2**53, "1b0020000000000000"),
    (2**53 + 1, "1b0020000000000000"),  # JavaScript reads it as the double 2^53
    (2**64, "fa5f800000"),  # beyond 2^53: a double, in its shortest (float32) form
    (1.0, "01"),  # integral float: an integer
    (-0.0, "00"),
    (100000.0, "1a000186a0"),
    (1.5, "f93e00"),  # exact in half precision
    (65504.0, "19ffe0"),  # integral: an integer, not the half-float f97bff
    (0.1, "fb3fb999999999999a"),  # needs double precision
    (1e300, "fb7e37e43c8800759c"),
    ("", "60"),
    ("héllo ☃", "6a68c3a96c6c6f20e29883"),  # 10 UTF-8 bytes
    ({"a": {"b": [1, 2]}}, "a16161a16162820102"),  # nested map
    ({"b": 1, "aa": 2}, "a261620162616102"),  # shorter key first, whatever the insertion order
    ({"z": 1, "é": 2}, "a2617a0162c3a902"),  # "é" is two bytes: after "z"
]


IDS = [repr(value)[:30] for value, _ in CBOR_VECTORS]


@pytest.mark.parametrize(("value", "cbor"), CBOR_VECTORS, ids=IDS)
def test_deterministic_cbor_matches_hand_encoding(value: Any, cbor: str) -> None:
    assert deterministic_cbor(value).hex() == cbor


@pytest.mark.parametrize(("value", "cbor"), CBOR_VECTORS, ids=IDS)
def test_node_hash_is_xxh64_of_type_and_cbor(value: Any, cbor: str) -> None:
    expected = format_hash(xxhash.xxh64_intdigest(TEXT.encode() + bytes.fromhex(cbor)))
    assert node_hash(TEXT, value) == expected
    assert self_hash(value) == format_hash(xxhash.xxh64_intdigest(bytes.fromhex(cbor)))


def test_spec_example_empty_input() -> None:
    assert hash_bytes(b"") == "EYHPV6X8XHTCS"
    assert format_hash(0xEF46DB3751D8E999) == "EYHPV6X8XHTCS"


# Pinned: any change to the algorithm breaks compatibility with stored nodes.
PINNED = [
    ({}, "1SRF30HCDXS2F", "5GRR5CT5HBMPX"),
    ({"a": {"b": [1, 2]}}, "7N2F5F4YCGHVQ", "CJP2YYVA3439J"),
    ("héllo ☃", "76K48M161T6RT", "FX7NTATJN4E82"),
    (-1, "0F77NSTV6GRWD", "F6AC8NDEZAZJB"),
    (1.5, "2H4Z5MY4R94HA", "2EY8PPT2N302J"),
    (0.1, "8EP2E6ZY1G38N", "26WJVQ99ABYN3"),
    (1.0, "8MG97G4DJ3SSG", "426V1ZMB21HNR"),
]


@pytest.mark.parametrize(("value", "self_typed", "typed"), PINNED)
def test_pinned_hashes(value: Any, self_typed: str, typed: str) -> None:
    assert self_hash(value) == self_typed
    assert node_hash(TEXT, value) == typed


def test_format_pads_to_13_and_starts_with_hex_digit() -> None:
    assert format_hash(0) == "0000000000000"
    assert format_hash(2**64 - 1) == "FZZZZZZZZZZZZ"
    assert all(is_hash(format_hash(v)) for v in (0, 1, 2**63, 2**64 - 1))


@pytest.mark.parametrize(
    "text", ["", "../../x", "EYHPV6X8XHTC", "EYHPV6X8XHTCSS", "GYHPV6X8XHTCS", "EYHPV6X8XHTCI",
             "eyhpv6x8xhtcs", "EYHPV6X8X/TCS", None, 42],
)
def test_is_hash_rejects(text: object) -> None:
    assert not is_hash(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), json_values, max_size=8))
@example({"b": 1, "aa": 2, "": None})
def test_hash_independent_of_key_order(mapping: dict[str, Any]) -> None:
    reordered = dict(reversed(list(mapping.items())))
    assert node_hash(TEXT, mapping) == node_hash(TEXT, reordered)


@given(json_values)
def test_normalize_is_idempotent(value: Any) -> None:
    once = normalize(value)
    assert normalize(once) == once
    assert deterministic_cbor(value) == deterministic_cbor(once)
