"""Where uwf's `json-cas` must agree with the real json-cas (0.5.3), beyond its published
vectors: numbers hash as json-cas encodes them (its own answers), a store written
with uwf's old rule keeps working without a silent rehash, a hash never depends on
the environment, `hash` is a pure hash, empty `anyOf`/`oneOf`/`type` lists are
refused at put, and validation sees numbers as the hash does
(docs/json-cas.md#numbers, #old-stores).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import xxhash

from tests.conftest import Cli
from uwf.cas.backends import FileBlobs, MemoryBlobs, node_path
from uwf.cas.builtins import meta_hash
from uwf.cas.hashing import format_hash
from uwf.cas.store import Cas, encode_node
from uwf.cas.subset import schema_problems
from uwf.engine.clock import system_clock
from uwf.errors import Corrupt, Rejected
from uwf.store import Store

TS = 1_700_000_000_000


def xxh(data: bytes) -> str:
    """The text form of XXH64, computed here (not by uwf.cas.hashing.hash_bytes)."""
    return format_hash(xxhash.xxh64_intdigest(data, seed=0))


def f64(number: float) -> bytes:
    return b"\xfb" + struct.pack(">d", number)


def new_cas() -> Cas:
    return Cas(MemoryBlobs(wall=system_clock), clock=lambda: TS)


# -- numbers: json-cas's own answers, through the command ---------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("1.5", "A8N18B9280GNX"),  # the real json-cas 0.5.3; uwf's old rule gave 2H4Z5MY4R94HA
    ("9007199254740992", "FFFZ4SRDQDD7Y"),  # the real json-cas 0.5.3; old: A3B5XS9977FB1
    ("9007199254740993", "FFFZ4SRDQDD7Y"),  # JavaScript reads the same double
    ("-9007199254740992", xxh(f64(-(2.0**53)))),
    ("9007199254740991", xxh(bytes.fromhex("1b001fffffffffffff"))),  # the largest safe one
    ("-0", xxh(b"\x00")),  # -0 is a safe integer in JavaScript: the integer 0
    ("-0.0", xxh(b"\x00")),
    ("65504.0", xxh(bytes.fromhex("19ffe0"))),
    ("0.5", xxh(f64(0.5))),
    ("1e308", xxh(f64(1e308))),
    ("5e-324", xxh(f64(5e-324))),
    ("2.2250738585072014e-308", xxh(f64(2.2250738585072014e-308))),
    ("100000000000000000000", xxh(f64(1e20))),
    ("[1.5, 2]", xxh(b"\x82" + f64(1.5) + b"\x02")),
])
def test_json_cas_hash_self_gives_json_cas_s_answers(cli: Cli, text: str, expected: str) -> None:
    result = cli.cas("hash", "--self", stdin=text + "\n")
    assert (result.code, result.out.strip()) == (0, expected), result.err


def test_a_typed_hash_of_a_float_is_the_type_and_its_float64(cli: Cli) -> None:
    result = cli.cas("hash", "--type", "0000000000000", stdin='{"n": 1.5}')
    expected = xxh(b"0000000000000" + b"\xa1\x61n" + f64(1.5))
    assert (result.code, result.out.strip()) == (0, expected), result.err


# -- old stores: read under the old rule, written under json-cas's -------------------------

NUMBER_SCHEMA = {"type": "object", "properties": {"x": {"type": "number"}}}


def old_rule_hash(type_hash: str, cbor: bytes) -> str:
    return xxh(type_hash.encode("ascii") + cbor)


def write_like_old_uwf(cas_root: Path) -> tuple[str, str]:
    """An old store, written by hand as uwf wrote it before the rule was recorded: the
    meta-schema, a schema and a data node `{"x": 1.5}` named by the old rule (CBOR
    `a1 61 78 f9 3e00`, 1.5 as a half float); no record of the rule. (schema, node)."""
    cas = Cas(FileBlobs(cas_root, durable=False, wall=system_clock), clock=lambda: TS)
    cas.ensure_meta()
    schema = cas.put_schema(NUMBER_SCHEMA)  # no number in it: the same under both rules
    (cas_root / "hash-rule").unlink(missing_ok=True)  # as an older uwf left it: no record
    old_name = old_rule_hash(schema, bytes.fromhex("a16178f93e00"))
    path = Path(node_path(str(cas_root), old_name))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_node(schema, {"x": 1.5}, TS))
    return schema, old_name


def test_an_old_rule_store_still_reads_and_verifies_and_puts_by_json_cas_s_rule(
        tmp_path: Path) -> None:
    root = tmp_path / "store"
    schema, old_name = write_like_old_uwf(root / "cas")
    store = Store.open(root)
    try:
        cas = store.cas
        assert cas.get(old_name).payload == {"x": 1.5}
        assert cas.verify(old_name) == []
        assert cas.hash_rule() == "uwf-legacy"
        # New nodes are named by json-cas's rule, even for the payload the old node holds.
        new_name = cas.put(schema, {"x": 1.5})
        assert new_name == xxh(schema.encode() + b"\xa1\x61x" + f64(1.5)) != old_name
        assert cas.put(schema, {"x": 2.5}) == xxh(schema.encode() + b"\xa1\x61x" + f64(2.5))
        assert cas.verify(new_name) == []
        assert not (root / "cas" / "hash-rule").exists()  # it stays an old-rule store
    finally:
        store.close()


def test_an_old_rule_store_through_the_command(cli: Cli) -> None:
    schema, old_name = write_like_old_uwf(cli.home / "cas")
    got = cli.cas("--json", "get", old_name)
    assert got.code == 0, got.err
    assert json.loads(got.out)["payload"] == {"x": 1.5}
    verified = cli.cas("--json", "verify", "--all")
    assert verified.code == 0, verified.out
    assert json.loads(verified.out)["problems"] == []
    put = cli.cas("put", "--type", schema, stdin='{"x": 1.5}')
    assert put.out.strip() == xxh(schema.encode() + b"\xa1\x61x" + f64(1.5)), put.err


def test_a_new_store_records_json_cas_s_rule_and_refuses_an_old_rule_name(
        tmp_path: Path) -> None:
    cas_root = tmp_path / "store" / "cas"
    store = Store.open(tmp_path / "store")
    try:
        schema = store.cas.put_schema(NUMBER_SCHEMA)
        assert (cas_root / "hash-rule").read_text("utf-8") == "json-cas\n"
        assert store.cas.hash_rule() == "json-cas"
    finally:
        store.close()
    # A node named by the old rule in a store created with json-cas's: no writer made it.
    old_name = old_rule_hash(schema, bytes.fromhex("a16178f93e00"))
    path = Path(node_path(str(cas_root), old_name))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_node(schema, {"x": 1.5}, TS))
    store = Store.open(tmp_path / "store")
    try:
        with pytest.raises(Corrupt, match="does not hash to its name"):
            store.cas.get(old_name)
        (problem,) = store.cas.verify(old_name)
        assert "old hash rule" in problem, problem
    finally:
        store.close()


def test_a_rule_this_uwf_does_not_know_fails_closed() -> None:
    blobs = MemoryBlobs(wall=system_clock)
    blobs.record_hash_rule("json-cas-2")
    cas = Cas(blobs, clock=lambda: TS)
    with pytest.raises(Corrupt, match="does not know"):
        cas.put_text("x")
    assert list(blobs.hashes()) == []


def test_an_altered_node_is_still_refused_in_an_old_store(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _, old_name = write_like_old_uwf(root / "cas")
    path = Path(node_path(str(root / "cas"), old_name))
    path.write_bytes(encode_node(json.loads(path.read_bytes())["type"], {"x": 1.25}, TS))
    store = Store.open(root)
    try:
        with pytest.raises(Corrupt, match="does not hash to its name"):
            store.cas.get(old_name)
        assert store.cas.verify(old_name)[0].endswith("the node was altered")
    finally:
        store.close()


# -- a hash never depends on the environment ---------------------------------------------

def test_put_and_hash_ignore_secret_looking_environment_values(cli: Cli) -> None:
    payload = '{"x": "abcdef123456"}'
    schema = cli.cas("put", "--type", "meta", stdin='{"type": "object"}').out.strip()
    plain = {args: cli.cas(*args, stdin=payload).out.strip()
             for args in (("put", "--type", schema), ("hash", "--type", schema),
                          ("hash", "--self"))}
    node = Path(node_path(str(cli.home / "cas"), plain[("put", "--type", schema)]))
    stored = node.read_bytes()
    nodes = sorted((cli.home / "cas").rglob("*.json"))
    cli.env["CI_TOKEN"] = "abcdef123456"  # a secret by its name: masked in what uwf prints
    for args, expected in plain.items():
        result = cli.cas(*args, stdin=payload)
        assert (result.code, result.out.strip()) == (0, expected), (args, result.err)
    assert node.read_bytes() == stored
    assert json.loads(stored)["payload"] == {"x": "abcdef123456"}
    assert sorted((cli.home / "cas").rglob("*.json")) == nodes  # no second, masked node


# -- `json-cas hash` is a pure hash -----------------------------------------------------

def test_hash_with_a_type_hash_the_store_lacks_just_hashes(cli: Cli) -> None:
    absent = "0000000000000"
    result = cli.cas("hash", "--type", absent, stdin='"hello"')
    assert (result.code, result.out.strip()) == (0, xxh(absent.encode() + b"\x65hello"))
    assert not (cli.home / "cas").exists() or not any((cli.home / "cas").iterdir())


def test_hash_does_not_validate_the_payload(cli: Cli) -> None:
    text = cli.cas("hash", "--type", "Text", stdin="5")  # Text is a string: put refuses 5
    assert (text.code, text.out.strip()) == (0, xxh(b"478BZEA9KT9WQ\x05")), text.err
    refused = cli.cas("put", "--type", "Text", stdin="5")
    assert refused.code == 1
    assert "does not match" in refused.err


def test_hash_with_a_type_name_still_needs_the_name(cli: Cli) -> None:
    result = cli.cas("hash", "--type", "Nope", stdin="{}")
    assert result.code == 1
    assert "no schema named 'Nope'" in result.err


# -- empty anyOf / oneOf / type lists -----------------------------------------------------

@pytest.mark.parametrize(("schema", "problem"), [
    ({"anyOf": []}, "anyOf: an anyOf must list at least one schema"),
    ({"oneOf": []}, "oneOf: a oneOf must list at least one schema"),
    ({"type": []}, "type: a type list must name at least one type"),
    ({"properties": {"a": {"anyOf": []}}}, "properties.a.anyOf: an anyOf must list"),
    ({"items": {"oneOf": []}}, "items.oneOf: a oneOf must list"),
    ({"additionalProperties": {"type": []}}, "additionalProperties.type: a type list"),
    ({"anyOf": [{"oneOf": [{"type": []}]}]}, "anyOf[0].oneOf[0].type: a type list"),
])
def test_an_empty_anyof_oneof_or_type_list_is_refused_at_put(schema: Any, problem: str) -> None:
    assert [problem in found for found in schema_problems(schema)] == [True]
    cas = new_cas()
    with pytest.raises(Rejected, match="does not match type 56GP9CC0KVQF8"):
        cas.put_schema(schema)
    assert list(cas.blobs.hashes()) == [meta_hash()]


def test_verify_names_a_stored_schema_with_an_empty_list(cli: Cli) -> None:
    from uwf.cas.hashing import node_hash

    schema = {"type": "object", "properties": {"a": {"anyOf": []}}}
    name = node_hash(meta_hash(), schema)
    assert cli.cas("put", "--type", "meta", stdin="{}").code == 0  # the store and its meta
    path = Path(node_path(str(cli.home / "cas"), name))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_node(meta_hash(), schema, TS))  # written past the checks
    result = cli.cas("--json", "verify", name)
    assert result.code == 1
    (problem,) = json.loads(result.out)["problems"]
    assert "properties.a.anyOf: an anyOf must list at least one schema" in problem["problem"]


# -- validation sees numbers as the hash does ---------------------------------------------

@pytest.mark.parametrize(("schema", "payload", "same_as"), [
    ({"const": 9007199254740992}, 9007199254740993, 9007199254740992),
    ({"const": 9007199254740993}, 9007199254740992, 9007199254740992),
    ({"enum": [9007199254740992, "x"]}, 9007199254740993, 9007199254740992),
    ({"enum": [-9007199254740993]}, -9007199254740992, -9007199254740992),
    ({"const": 1e20}, 100000000000000000000, 1e20),
    ({"const": {"n": 2**64}}, {"n": 18446744073709551617}, {"n": 2**64}),
    ({"type": "integer", "const": 2**53}, 2**53 + 1, 2**53),
])
def test_validation_and_hashing_agree_on_big_integers(schema: Any, payload: Any,
                                                      same_as: Any) -> None:
    cas = new_cas()
    type_hash = cas.put_schema(schema)
    assert cas.problems(type_hash, payload) == []
    assert cas.put(type_hash, payload) == cas.put(type_hash, same_as)


def test_validation_still_tells_different_doubles_apart() -> None:
    cas = new_cas()
    type_hash = cas.put_schema({"const": 9007199254740992})
    with pytest.raises(Rejected, match="does not match"):
        cas.put(type_hash, 9007199254740994)  # 2^53 + 2 is a double of its own
    enum = cas.put_schema({"enum": [1.5, 2]})
    assert cas.problems(enum, 2.0) == []
    assert cas.problems(enum, 1.25) != []


# -- typed results -----------------------------------------------------------------------

def test_the_service_returns_typed_results_printed_as_the_command_prints_them(cli: Cli
                                                                             ) -> None:
    from contextlib import closing

    from uwf.config.settings import Settings
    from uwf.jsoncas import service
    from uwf.jsoncas.results import NodeShown, Walked
    from uwf.payload import to_payload

    stored = cli.cas("put", "--type", "Text", stdin='"hello"').out.strip()
    with closing(Store.open(settings=Settings.from_env(cli.env, None))) as store:
        node = service.get(store.cas, stored)
        walked = service.walk(store.cas, stored)
    assert isinstance(node, NodeShown)
    assert [type(entry) for entry in walked] == [Walked]
    assert to_payload(node) == json.loads(cli.cas("get", stored, "--json").out)
    assert to_payload(walked) == json.loads(cli.cas("walk", stored, "--json").out)
