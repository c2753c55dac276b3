"""Hash vectors: deterministic CBOR written out by hand from RFC 8949 and json-cas's
number rule (cborg's `rfc8949EncodeOptions`: a safe integer is a CBOR integer, every
other number an 8-byte float64), then XXH64. The expected bytes are built here, with
`struct`, never by the code under test."""

from __future__ import annotations

import json
import struct
from typing import Any

import cbor2
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
from uwf.cas.legacy import legacy_cbor, legacy_node_hash, legacy_self_hash

TEXT = "7XHYZXM5EEFS3"  # any valid type hash; the built-in Text schema's
SAFE = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


def f64(number: float) -> str:
    """A float64 by hand: major type 7, additional information 27, 8 bytes big-endian."""
    return "fb" + struct.pack(">d", number).hex()


# (value, its deterministic CBOR written by hand)
CBOR_VECTORS: list[tuple[Any, str]] = [
    ({}, "a0"),  # empty map
    ([], "80"),
    (None, "f6"),
    (True, "f5"),
    (False, "f4"),
    (0, "00"),
    (23, "17"),  # the largest one-byte head
    (24, "1818"),  # the smallest two-byte head
    (-1, "20"),  # major type 1, value 0
    (-24, "37"),
    (-25, "3818"),
    (100000, "1a000186a0"),
    (2**32, "1b0000000100000000"),
    # The safe-integer boundary: ±(2^53 - 1) are integers, ±2^53 and beyond doubles.
    (SAFE, "1b001fffffffffffff"),
    (SAFE - 1, "1b001ffffffffffffe"),
    (-SAFE, "3b001ffffffffffffe"),
    (2**53, "fb4340000000000000"),  # json-cas: `echo 9007199254740992 | json-cas hash --self`
    (2**53, f64(2.0**53)),
    (-(2**53), f64(-(2.0**53))),
    (2**53 + 1, f64(2.0**53)),  # JavaScript reads it as the nearest double, 2^53
    (-(2**53) - 1, f64(-(2.0**53))),
    (2**53 + 2, f64(2.0**53 + 2)),
    (2**64, f64(2.0**64)),  # a float32 would hold it exactly: still 8 bytes
    (10**20, f64(1e20)),
    (-(10**20), f64(-1e20)),
    (float(SAFE), "1b001fffffffffffff"),
    (float(2**53), f64(2.0**53)),
    (1.0, "01"),  # integral float: an integer
    (-0.0, "00"),  # -0 is integral and safe in JavaScript: the integer 0
    (0.0, "00"),
    (100000.0, "1a000186a0"),
    (65504.0, "19ffe0"),  # integral: an integer, not the half-float f97bff
    (1.5, "fb3ff8000000000000"),  # json-cas: `echo 1.5 | json-cas hash --self`, not f93e00
    (-1.5, f64(-1.5)),
    (0.5, f64(0.5)),  # exact in half precision: still 8 bytes
    (65504.5, f64(65504.5)),
    (0.1, "fb3fb999999999999a"),
    (1e-7, f64(1e-7)),
    (1e300, "fb7e37e43c8800759c"),
    (1e308, f64(1e308)),
    (1.7976931348623157e308, f64(1.7976931348623157e308)),  # float64's largest
    (5e-324, f64(5e-324)),  # the smallest subnormal
    (-5e-324, f64(-5e-324)),
    (2.2250738585072014e-308, f64(2.2250738585072014e-308)),  # the smallest normal
    (3.4028234663852886e38, f64(3.4028234663852886e38)),  # float32's largest: not fa7f7fffff
    ([1.5, -0.0, 2**53], "83" + f64(1.5) + "00" + f64(2.0**53)),
    ({"n": 1.5}, "a1616e" + f64(1.5)),
    ("", "60"),
    ("héllo ☃", "6a68c3a96c6c6f20e29883"),  # 10 UTF-8 bytes
    ("x" * 24, "7818" + "78" * 24),  # the smallest two-byte length head
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


# JSON text as `json-cas` reads it, and the real json-cas's answer to `json-cas hash --self`
# (or the hash of the bytes written by hand, where its answer was not recorded).
JSON_CAS_SELF_HASHES: list[tuple[str, str]] = [
    ("1.5", "A8N18B9280GNX"),  # json-cas 0.5.3
    ("9007199254740992", "FFFZ4SRDQDD7Y"),  # json-cas 0.5.3
    ("9007199254740993", "FFFZ4SRDQDD7Y"),  # the same double
    ("9007199254740992.0", "FFFZ4SRDQDD7Y"),
    ("-0", hash_bytes(b"\x00")),
    ("-0.0", hash_bytes(b"\x00")),
    ("0", hash_bytes(b"\x00")),
    ("1E2", hash_bytes(b"\x18\x64")),  # 100.0 is the integer 100
]


@pytest.mark.parametrize(("text", "expected"), JSON_CAS_SELF_HASHES)
def test_json_text_self_hashes_as_json_cas(text: str, expected: str) -> None:
    assert self_hash(json.loads(text)) == expected


# The rule uwf used before (legacy.py), still read in stores made with it: shortest
# floats, ±2^53 integers. Pinned: old stores' names depend on them.
LEGACY_VECTORS: list[tuple[Any, str]] = [
    (2**53, "1b0020000000000000"),
    (2**53 + 1, "1b0020000000000000"),
    (-(2**53), "3b001fffffffffffff"),
    (2**64, "fa5f800000"),  # the shortest float that keeps it
    (1.5, "f93e00"),  # half precision
    (0.1, "fb3fb999999999999a"),  # the same under both rules
    (65504.0, "19ffe0"),
    (-0.0, "00"),
    ({"b": 1.5, "aa": 2}, "a26162f93e0062616102"),
]


@pytest.mark.parametrize(("value", "cbor"), LEGACY_VECTORS,
                         ids=[repr(value)[:30] for value, _ in LEGACY_VECTORS])
def test_the_old_rule_is_kept_for_old_stores(value: Any, cbor: str) -> None:
    assert legacy_cbor(value).hex() == cbor
    assert legacy_self_hash(value) == hash_bytes(bytes.fromhex(cbor))
    assert legacy_node_hash(TEXT, value) == hash_bytes(TEXT.encode() + bytes.fromhex(cbor))


def test_the_two_rules_differ_only_on_numbers_json_cas_writes_as_doubles() -> None:
    assert legacy_self_hash(1.5) == "2H4Z5MY4R94HA" != self_hash(1.5)
    assert legacy_self_hash(2**53) == "A3B5XS9977FB1" != self_hash(2**53)
    for value in ({}, {"a": {"b": [1, 2]}}, "héllo ☃", -1, 0.1, 1.0, SAFE, 1e300):
        assert legacy_self_hash(value) == self_hash(value)


def test_spec_example_empty_input() -> None:
    assert hash_bytes(b"") == "EYHPV6X8XHTCS"
    assert format_hash(0xEF46DB3751D8E999) == "EYHPV6X8XHTCS"


# Pinned: any change to the algorithm breaks compatibility with stored nodes.
PINNED = [
    ({}, "1SRF30HCDXS2F", "5GRR5CT5HBMPX"),
    ({"a": {"b": [1, 2]}}, "7N2F5F4YCGHVQ", "CJP2YYVA3439J"),
    ("héllo ☃", "76K48M161T6RT", "FX7NTATJN4E82"),
    (-1, "0F77NSTV6GRWD", "F6AC8NDEZAZJB"),
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


def js_sorted(value: Any) -> Any:
    """The oracle's input, built here: numbers as JavaScript reads them (a safe integer
    an int, any other number a float) and map keys in RFC 8949 order (the UTF-8 length,
    then the bytes: the order of their encoded form)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        if float(value).is_integer() and abs(value) <= SAFE:
            return int(value)
        return float(value)
    if isinstance(value, dict):
        ordered = sorted(value.items(), key=lambda item: (len(item[0].encode()),
                                                          item[0].encode()))
        return {key: js_sorted(item) for key, item in ordered}
    return [js_sorted(item) for item in value]


@given(json_values)
@example({"b": [1.5, 2**53], "aa": -0.0, "é": 2**53 - 1, "z": 5e-324})
def test_cbor_matches_an_independent_float64_encoder(value: Any) -> None:
    """cbor2 without `canonical` writes every float in 8 bytes and a map in its insertion
    order: over the JavaScript view with sorted keys, it is json-cas's encoding."""
    assert deterministic_cbor(value) == cbor2.dumps(js_sorted(value))
