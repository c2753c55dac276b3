"""A node's stored bytes (`uwf.cas.store.encode_node`) and its record's
(`uwf.cas.records.compact`) are made with msgspec's formatter over the text Python's
json writes: byte for byte what Python's json alone writes, indented and compact, for
any JSON value (json-cas reads and hashes these files). A node a step gathers is read
back from its record's bytes by msgspec (`uwf.cas.nodes.gathered`): the very values
Python's json reads from them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from uwf.cas.limits import first_problem
from uwf.cas.nodes import compact_node, gathered, parsed
from uwf.cas.records import compact
from uwf.cas.store import encode_node

TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from("\x00\x1f\"\\\n\t\u2028 ,:{}[]"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=30)


def python_json(payload: Any, timestamp: int) -> bytes:
    node = {"type": "0123456789ABC", "payload": payload, "timestamp": timestamp}
    return (json.dumps(node, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


@given(JSON, st.integers(min_value=0, max_value=2**53))
def test_a_nodes_bytes_are_pythons_json(payload: Any, timestamp: int) -> None:
    stored = encode_node("0123456789ABC", payload, timestamp)
    assert stored == python_json(payload, timestamp)
    assert compact(stored) == json.dumps(json.loads(stored), ensure_ascii=False,
                                         separators=(",", ":")).encode("utf-8")


def test_empty_containers_and_escapes() -> None:
    payloads: list[Any] = [{}, [], {"a": {}, "b": [[]]}, [{}], "é\u2028\x00\"\\", -0.0,
                           1e300, 10**30, {"": ""}]
    for payload in payloads:
        stored = encode_node("0123456789ABC", payload, 7)
        assert stored == python_json(payload, 7)
        assert json.loads(compact(stored)) == json.loads(stored)
        assert b"\n" not in compact(stored)


@given(JSON, st.integers(min_value=0, max_value=2**53))
def test_a_gathered_node_reads_back_as_pythons_json_reads_it(payload: Any,
                                                             timestamp: int) -> None:
    if first_problem(payload) is not None:
        return  # `Cas.put` refuses it before it is encoded
    data = compact_node("0123456789ABC", payload, timestamp)
    # repr: the same types too (1 and 1.0, 0.0 and -0.0, key order).
    assert repr(gathered("ABCDEFGHJKMNP", data)) == repr(parsed("ABCDEFGHJKMNP", data))


def test_a_gathered_node_holds_what_msgspec_would_not_read_as_json_does() -> None:
    for payload in ([-0.0, 1e-320, 2.5e-308, 1.7976931348623157e308, 10**300, -(10**300)],
                    {"é": "\u2028\x00\"\\", "": [[[{}]]]}, 9007199254740993):
        data = compact_node("0123456789ABC", payload, 7)
        assert repr(gathered("ABCDEFGHJKMNP", data)) == repr(parsed("ABCDEFGHJKMNP", data))
