"""Hash compatibility with json-cas: its published vectors, its meta-schema byte for
byte, its closed schema subset, its `cas_ref` marker, and a store written with the
old draft-07 bootstrap refused (docs/json-cas.md#compatibility-with-json-cas).

The vectors are a copy of the spec's `json-cas-vectors.json` (tests ship their data).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cbor2
import pytest

from tests.conftest import Cli, snapshot
from uwf.cas.backends import MemoryBlobs
from uwf.cas.builtins import BUILTIN_NAMES, builtin_hash, builtin_schema, meta_hash
from uwf.cas.hashing import deterministic_cbor, hash_bytes, node_hash, self_hash
from uwf.cas.store import Cas, encode_node
from uwf.cas.subset import DRAFT07_BOOTSTRAP, META_HASH, keywords, meta_schema, schema_problems
from uwf.engine.clock import system_clock
from uwf.errors import Rejected

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "data" / "json-cas-vectors.json").read_text("utf-8"))
PERSON = VECTORS["vectors"][3]["payload"]


def new_cas() -> Cas:
    return Cas(MemoryBlobs(wall=system_clock), clock=lambda: 1_700_000_000_000)


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: v["what"])
def test_every_published_vector_hashes_the_same(vector: dict[str, Any]) -> None:
    if "bytes" in vector:
        assert hash_bytes(vector["bytes"].encode("utf-8")) == vector["hash"]
    elif vector.get("self"):
        assert self_hash(vector["payload"]) == vector["hash"]
    else:
        assert node_hash(vector["type"], vector["payload"]) == vector["hash"]


def test_the_meta_schema_is_json_cas_s_byte_for_byte() -> None:
    published = VECTORS["metaSchema"]
    assert meta_schema() == published["payload"]
    assert deterministic_cbor(meta_schema()) == cbor2.dumps(published["payload"], canonical=True)
    assert meta_hash() == published["selfHash"] == META_HASH == "56GP9CC0KVQF8"
    assert keywords() == tuple(sorted(published["payload"]["properties"]))


def test_the_published_schema_and_data_node_are_stored_under_the_same_hashes() -> None:
    cas = new_cas()
    schema_vector, data_vector = VECTORS["vectors"][3], VECTORS["vectors"][4]
    assert cas.put_schema(schema_vector["payload"]) == schema_vector["hash"]
    assert cas.put(schema_vector["hash"], data_vector["payload"]) == data_vector["hash"]
    assert cas.get(meta_hash()).type == meta_hash()  # the bootstrap is self-typed
    assert cas.verify(meta_hash()) == []
    with pytest.raises(Rejected, match="does not match"):
        cas.put(schema_vector["hash"], {"age": 30})  # `name` is required


def test_the_json_cas_command_reproduces_the_vectors(cli: Cli, tmp_path: Path) -> None:
    """The transcript of docs/json-cas.md#compatibility-with-json-cas."""
    meta_file = tmp_path / "meta.json"
    meta_file.write_text(json.dumps(VECTORS["metaSchema"]["payload"]), "utf-8")
    assert cli.cas("hash", "--self", str(meta_file)).out.strip() == "56GP9CC0KVQF8"
    put = cli.cas("put", "--type", "meta", stdin=json.dumps(PERSON))
    assert (put.code, put.out.strip()) == (0, "7XX5H51CVD9H0"), put.err
    data = cli.cas("put", "--type", "7XX5H51CVD9H0", stdin='{"name":"Alice","age":30}')
    assert (data.code, data.out.strip()) == (0, "ERARPP19YJT05"), data.err
    self_hashed = cli.cas("hash", "--self", stdin="{}")
    assert self_hashed.out.strip() == "1SRF30HCDXS2F"


@pytest.mark.parametrize(("schema", "problem"), [
    ({"$ref": "#"}, "(root): '$ref' is not a keyword of json-cas's schema subset"),
    ({"enum": []}, "enum: an enum must list at least one value"),
    ({"properties": {"a": {"enum": []}}}, "properties.a.enum: an enum must list at least"),
    ({"properties": {"a": {"type": "string", "pattern": "x"}}},
     "properties.a: 'pattern' is not a keyword"),
    ({"items": {"anyOf": [{"not": {}}]}}, "items.anyOf[0]: 'not' is not a keyword"),
    ({"definitions": {"x": {}}}, "'definitions' is not a keyword"),
    ({"$schema": "http://json-schema.org/draft-07/schema#"}, "'$schema' is not a keyword"),
    ({"type": "text"}, "type:"),
    ({"required": "name"}, "required:"),
    ({"additionalProperties": 1}, "additionalProperties:"),
    ({"anyOf": [1]}, "anyOf[0]"),
    (True, "a schema must be a JSON object"),
])
def test_a_schema_outside_the_subset_is_refused_naming_where(schema: Any, problem: str) -> None:
    found = schema_problems(schema)
    assert len(found) == 1, found
    assert problem in found[0], found
    with pytest.raises(Rejected, match="does not match type 56GP9CC0KVQF8"):
        new_cas().put_schema(schema)


@pytest.mark.parametrize("schema", [
    {},
    {"type": ["string", "null"], "format": "cas_ref"},
    {"type": "object", "additionalProperties": {"type": "array", "items": {"const": 1}}},
    {"oneOf": [{"type": "string"}, {"enum": [1, "a", None]}], "title": "t", "description": "d"},
    {"properties": {"$ref": {"type": "string"}}},  # a property may be named anything
    {"const": {"$ref": "http://example.com"}},  # a value, not a reference
])
def test_a_schema_of_the_subset_is_accepted(schema: Any) -> None:
    assert schema_problems(schema) == []


def test_the_built_in_schemas_are_schemas_of_the_subset() -> None:
    for name in BUILTIN_NAMES:
        assert new_cas().put_schema(builtin_schema(name)) == builtin_hash(name)


def test_cas_ref_fields_are_walked_and_kept_by_gc() -> None:
    cas = new_cas()
    text = cas.put_text("kept only through a cas_ref")
    unrelated = cas.put_text("unreachable")
    schema = cas.put_schema({"type": "object", "properties": {
        "notes": {"type": "array", "items": {"type": "string", "format": "cas_ref"}},
        "plain": {"type": "string"}}})
    node = cas.put(schema, {"notes": [text], "plain": unrelated})
    assert [entry.hash for entry in cas.walk(node)] == [node, text]
    garbage = cas.garbage([node], grace_seconds=0)
    assert not {text, schema, node} & set(garbage)
    assert unrelated in garbage
    with pytest.raises(Rejected, match="cas_ref"):
        cas.put(schema, {"notes": ["not a hash"]})


def test_a_store_with_the_draft07_bootstrap_is_refused_by_every_command(
        cli: Cli, tmp_path: Path) -> None:
    assert cli.run("workflow", "list").code == 0  # creates the store
    old_meta = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "old"}
    folder = cli.home / "cas" / DRAFT07_BOOTSTRAP[:2]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{DRAFT07_BOOTSTRAP}.json").write_bytes(
        encode_node(DRAFT07_BOOTSTRAP, old_meta, 1))
    before = snapshot(cli.home)
    for result in (cli.run("workflow", "list"), cli.run("thread", "list"),
                   cli.run("registry", "show"), cli.cas("schema", "list"),
                   cli.cas("put", "--type", "Text", stdin='"x"')):
        lines = result.err.splitlines()
        assert result.code == 1, result
        assert len(lines) == 1, result
        assert DRAFT07_BOOTSTRAP in lines[0], lines[0]
        assert "re-create it" in lines[0], lines[0]
        assert "Traceback" not in result.err
    assert snapshot(cli.home) == before
