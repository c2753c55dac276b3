"""The CAS under hostile input and tampering (issue 7).

Schemas refer only inside themselves (no URL is fetched, no file read); a read
checks that a node hashes to its name and never follows a link out of the
store; a node has a size, a depth and number limits; `walk` has no recursion
limit; node files honour the umask; and no input, from Python or through the
real `json-cas`, ends in a traceback or "internal error". The limits are in
docs/json-cas.md#limits.
"""

from __future__ import annotations

import json
import math
import os
import stat
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import base32_crockford
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.conftest import EXAMPLE, Cli, Result, run_bytes, snapshot
from uwf.cas.backends import Blobs, FileBlobs, MemoryBlobs
from uwf.cas.builtins import builtin_hash, meta_hash
from uwf.cas.hashing import format_hash, node_hash
from uwf.cas.limits import MAX_DEPTH, MAX_NODE_BYTES
from uwf.cas.store import Cas, WalkEntry, encode_node
from uwf.engine.clock import system_clock
from uwf.errors import Corrupt, Rejected, UwfError
from uwf.jsoncas import service as jsoncas
from uwf.store import Store

ANY_SCHEMA = {"title": "Any"}
ANY = node_hash(meta_hash(), ANY_SCHEMA)
ONLY_INSIDE = "is not a keyword of json-cas's schema subset"
OUTSIDE_SUBSET = f"{ONLY_INSIDE}|is not of type"  # a `$ref` key, or an array where a schema goes


def new_cas(blobs: Blobs | None = None) -> Cas:
    cas = Cas(blobs if blobs is not None else MemoryBlobs(wall=system_clock),
              clock=lambda: 1_700_000_000_000)
    cas.ensure_builtins()
    cas.put_schema(ANY_SCHEMA)
    return cas


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def stored_by_old_code(cas: Cas, type_hash: str, payload: Any) -> str:
    """A node written past today's checks, as an older uwf (or a hand) could have."""
    hash_ = node_hash(type_hash, payload)
    cas.blobs.write(hash_, encode_node(type_hash, payload, 1))
    return hash_


def one_line(result: Result, codes: tuple[int, ...], *fragments: str) -> str:
    """Assert a clean refusal by `json-cas`; return its one line."""
    assert result.code in codes, result
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("json-cas: error: "), lines[0]
    assert "internal error" not in lines[0]
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]



def node_file(home: Path, hash_: str) -> Path:
    return home / "cas" / hash_[:2] / f"{hash_}.json"


# -- 1. a schema refers only inside itself: no URL fetched, no file read -----------------

@pytest.fixture
def http_server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on 127.0.0.1 serving a schema; the paths it was asked for."""
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            requests.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def secret_file(tmp_path: Path) -> tuple[str, str]:
    """(file:// URI, the secret in it): a JSON Schema whose content must never show."""
    secret = "TOPSECRET-3f9c1e"
    path = tmp_path / "secret.json"
    path.write_text(json.dumps({"const": secret, "description": secret}))
    return path.as_uri(), secret


def foreign_schemas(base: str) -> list[Any]:
    return [
        {"$ref": f"{base}/x"},
        {"type": "object", "properties": {"a": {"$ref": f"{base}/x"}}},
        {"items": [{"$ref": f"{base}/x#/definitions/y"}]},
        {"$id": f"{base}/base/", "properties": {"a": {"$ref": "y.json"}}},  # relative
        {"properties": {"a": {"$ref": "other.json"}}},
        {"$schema": f"{base}/meta"},
        {"definitions": {"d": {"$schema": f"{base}/meta", "type": "string"}}},
        {"$schema": "https://json-schema.org/draft/2020-12/schema",
         "$dynamicRef": f"{base}/d"},
    ]


def test_a_schema_referring_to_a_url_is_refused_and_nothing_is_fetched(
        http_server: tuple[str, list[str]]) -> None:
    base, requests = http_server
    cas = new_cas()
    for schema in foreign_schemas(base):
        with pytest.raises(Rejected, match=OUTSIDE_SUBSET):
            cas.put_schema(schema)
    assert requests == []
    with urllib.request.urlopen(f"{base}/probe", timeout=10) as response:  # it does count
        assert json.load(response) == {"type": "string"}
    assert requests == ["/probe"]


def test_a_stored_schema_referring_to_a_url_fetches_nothing_when_used(
        http_server: tuple[str, list[str]]) -> None:
    base, requests = http_server
    cas = new_cas()
    for schema in foreign_schemas(base):
        legacy = stored_by_old_code(cas, meta_hash(), schema)
        for payload in ("text", 5, {"a": 1}):
            with pytest.raises(Rejected, match=OUTSIDE_SUBSET):
                cas.put(legacy, payload)
        assert cas.verify(legacy)
    assert requests == []


def test_json_cas_refuses_a_schema_with_a_url_in_one_line(
        cli: Cli, http_server: tuple[str, list[str]]) -> None:
    base, requests = http_server
    for schema in ({"$ref": f"{base}/x"}, {"$schema": f"{base}/meta"}):
        result = cli.cas("put", "--type", "meta", stdin=json.dumps(schema))
        one_line(result, (1,), ONLY_INSIDE)
    assert requests == []


def test_a_schema_never_reads_a_file_nor_shows_its_content(
        secret_file: tuple[str, str], tmp_path: Path) -> None:
    uri, secret = secret_file
    cas = new_cas()
    for schema in ({"$ref": uri}, {"$schema": uri},
                   {"$id": tmp_path.as_uri() + "/", "$ref": "secret.json"}):
        with pytest.raises(Rejected, match=ONLY_INSIDE) as refused:
            cas.put_schema(schema)
        assert secret not in refused.value.line()
        legacy = stored_by_old_code(cas, meta_hash(), schema)
        for payload in (secret, 5):  # the file's `const` must not decide anything
            with pytest.raises(Rejected, match=ONLY_INSIDE) as caught:
                cas.put(legacy, payload)
            assert secret not in caught.value.line()
        assert all(secret not in problem for problem in cas.verify(legacy))


def test_json_cas_never_shows_a_file_a_schema_names(cli: Cli,
                                                     secret_file: tuple[str, str]) -> None:
    uri, secret = secret_file
    for schema in ({"$ref": uri}, {"$schema": uri}):
        line = one_line(cli.cas("put", "--type", "meta", stdin=json.dumps(schema)), (1,),
                        ONLY_INSIDE)
        assert secret not in line


@pytest.mark.parametrize("schema", [
    {"definitions": {"x": {"type": "string"}}, "properties": {"a": {"$ref": "#/definitions/x"}}},
    {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"},
    {"$id": "http://example.com/s.json", "type": "string"},
    {"$defs": {"x": {"type": "string"}}},
    {"$ref": "#/definitions/missing"},
])
def test_references_are_refused_as_json_cas_refuses_them(schema: Any) -> None:
    cas = new_cas()
    with pytest.raises(Rejected, match=ONLY_INSIDE):
        cas.put_schema(schema)
    legacy = stored_by_old_code(cas, meta_hash(), schema)
    with pytest.raises(Rejected, match="cannot be used"):
        cas.put(legacy, 1)


@pytest.mark.parametrize(("schema", "good", "bad"), [
    # "$ref" as a property's name, and inside a literal: data, not references.
    ({"properties": {"$ref": {"type": "string"}}}, {"$ref": "http://x"}, {"$ref": 1}),
    ({"const": {"$ref": "http://127.0.0.1:9/x"}}, {"$ref": "http://127.0.0.1:9/x"}, {}),
    ({"enum": [{"$schema": "x"}, 2]}, 2, 3),
])
def test_a_ref_that_is_data_is_not_a_reference(schema: Any, good: Any, bad: Any) -> None:
    cas = new_cas()
    type_hash = cas.put_schema(schema)
    assert cas.put(type_hash, good)
    with pytest.raises(Rejected, match="does not match"):
        cas.put(type_hash, bad)


# -- 2. a read checks the hash, and never follows a link out of the store ----------------

@pytest.fixture(params=["memory", "file"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Blobs:
    if request.param == "memory":
        return MemoryBlobs(wall=system_clock)
    return FileBlobs(tmp_path / "cas", durable=False, wall=system_clock)


def alter(blobs: Blobs, hash_: str, change: Any) -> None:
    node = json.loads(blobs.read(hash_) or b"")
    node["payload"] = change(node["payload"])
    data = encode_node(node["type"], node["payload"], node["timestamp"])
    if isinstance(blobs, MemoryBlobs):
        blobs._nodes[hash_] = data
    else:
        assert isinstance(blobs, FileBlobs)
        Path(blobs.root / hash_[:2] / f"{hash_}.json").write_bytes(data)


def test_get_fails_closed_on_a_node_that_does_not_hash_to_its_name(blobs: Blobs) -> None:
    cas = new_cas(blobs)
    hash_ = cas.put(builtin_hash("Text"), "original")
    alter(blobs, hash_, lambda _: "altered")
    with pytest.raises(Corrupt) as caught:
        Cas(blobs, clock=lambda: 2).get(hash_)
    assert caught.value.line() == (f"node {hash_} does not hash to its name: the file was "
                                   "altered; run `json-cas verify`")
    with pytest.raises(Corrupt, match="does not hash to its name"):
        cas.get(hash_, fresh=True)
    assert cas.verify(hash_) == [f"content hashes to {node_hash(builtin_hash('Text'), 'altered')}"
                                 ": the node was altered"]


def test_the_hash_is_checked_once_per_process(blobs: Blobs,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    hash_ = new_cas(blobs).put(builtin_hash("Text"), "once")
    calls: list[str] = []

    def counting(type_hash: str, payload: Any) -> str:
        calls.append(type_hash)
        return node_hash(type_hash, payload)

    monkeypatch.setattr("uwf.cas.nodes.node_hash", counting)  # what `get` checks with
    cas = Cas(blobs, clock=lambda: 2)
    for _ in range(3):
        assert cas.get(hash_).payload == "once"
    assert len(calls) == 1


@pytest.mark.parametrize("payload", [
    "[" * 5000 + "]" * 5000, "[" * 900 + "]" * 900, "[NaN]", '{"a": 1' + "0" * 400 + "}",
    '"\\ud800"', '{"\\udc80": 1}'])
def test_get_of_a_hostile_node_file_is_corrupt_never_a_crash(tmp_path: Path,
                                                             payload: str) -> None:
    cas = new_cas(FileBlobs(tmp_path / "cas", durable=False, wall=system_clock))
    hash_ = "0123456789ABC"
    path = tmp_path / "cas" / hash_[:2] / f"{hash_}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'{{"type": "{ANY}", "payload": {payload}, "timestamp": 1}}')
    with pytest.raises(Corrupt, match=hash_):
        cas.get(hash_)
    assert cas.verify(hash_)  # a problem, named


def test_json_cas_get_and_workflow_show_fail_closed_on_an_edited_node(cli: Cli) -> None:
    put = cli.run("workflow", "put", str(EXAMPLE))
    assert put.code == 0, put.err
    workflow = json.loads(put.out)["workflow"]
    text = cli.cas("put", "--type", "Text", stdin='"kept"').out.strip()
    for hash_ in (workflow, text):
        path = node_file(cli.home, hash_)
        node = json.loads(path.read_text())
        if isinstance(node["payload"], dict):
            node["payload"]["description"] = "edited by hand"
        else:
            node["payload"] = "edited by hand"
        path.write_text(json.dumps(node, indent=2) + "\n")
    expected = "does not hash to its name: the file was altered; run `json-cas verify`"
    for hash_ in (workflow, text):
        one_line(cli.cas("get", hash_), (1,), f"node {hash_} {expected}")
    before = snapshot(cli.home)
    for argv in (("workflow", "show", "solve-issue"), ("workflow", "show", workflow),
                 ("thread", "start", "solve-issue", "-p", "x")):
        shown = cli.run(*argv)
        assert shown.code == 1, shown
        assert shown.err.splitlines() == [f"uwf: error: node {workflow} {expected}"], shown.err
    assert snapshot(cli.home) == before


def foreign_store(tmp_path: Path) -> tuple[Path, str]:
    """A store outside ours holding one valid Text node: (its cas folder, the hash)."""
    outside = tmp_path / "outside" / "cas"
    hash_ = new_cas(FileBlobs(outside, durable=False, wall=system_clock)).put(
        builtin_hash("Text"), "foreign")
    return outside, hash_


def test_a_symlinked_fanout_folder_is_not_served(tmp_path: Path) -> None:
    outside, hash_ = foreign_store(tmp_path)
    root = tmp_path / "store" / "cas"
    cas = new_cas(FileBlobs(root, durable=False, wall=system_clock))
    (root / hash_[:2]).symlink_to(outside / hash_[:2], target_is_directory=True)
    with pytest.raises(Corrupt, match="symbolic link"):
        cas.get(hash_)
    with pytest.raises(Corrupt, match="symbolic link"):
        cas.has(hash_)
    with pytest.raises(Corrupt, match="symbolic link"):
        cas.put(builtin_hash("Text"), "foreign")  # nor written through
    with pytest.raises(Corrupt, match="symbolic link"):
        list(cas.blobs.hashes())  # so `verify --all` and gc fail closed, naming it
    with pytest.raises(Corrupt):
        cas.remove(hash_)  # gc never deletes a file outside the store
    assert (outside / hash_[:2] / f"{hash_}.json").exists()


def test_a_symlinked_node_file_is_not_served(tmp_path: Path) -> None:
    outside, hash_ = foreign_store(tmp_path)
    root = tmp_path / "store" / "cas"
    cas = new_cas(FileBlobs(root, durable=False, wall=system_clock))
    (root / hash_[:2]).mkdir(exist_ok=True)
    (root / hash_[:2] / f"{hash_}.json").symlink_to(outside / hash_[:2] / f"{hash_}.json")
    with pytest.raises(Corrupt, match="symbolic link"):
        cas.get(hash_)
    assert not cas.has(hash_)
    assert hash_ in set(cas.blobs.hashes())  # listed, so verify names it
    assert any("symbolic link" in problem for problem in cas.verify(hash_))
    cas.remove(hash_)  # the link alone
    assert (outside / hash_[:2] / f"{hash_}.json").exists()
    assert cas.get(cas.put(builtin_hash("Text"), "foreign")).payload == "foreign"


def test_json_cas_get_refuses_a_symlinked_folder_in_one_line(cli: Cli, tmp_path: Path) -> None:
    outside, hash_ = foreign_store(tmp_path)
    assert cli.cas("put", "--type", "Text", stdin='"ours"').code == 0
    (cli.home / "cas" / hash_[:2]).symlink_to(outside / hash_[:2], target_is_directory=True)
    line = one_line(cli.cas("get", hash_), (1,), "symbolic link")
    assert "foreign" not in line
    one_line(cli.cas("verify", "--all"), (1,), "symbolic link")


@given(st.integers(min_value=0, max_value=2**64 - 1))
@example(0)
@example(2**64 - 1)
@example(0xEF46DB3751D8E999)
def test_the_table_driven_text_form_is_crockford_base32(value: int) -> None:
    # Every read hashes its node, so the text form is built from a table; the
    # base32-crockford package is the reference it must agree with.
    assert format_hash(value) == str(base32_crockford.encode(value)).rjust(13, "0")


# -- 3. size, depth and number limits -------------------------------------------------

def test_a_payload_at_the_size_limit_is_stored_and_one_byte_more_is_refused() -> None:
    cas = new_cas()
    assert MAX_NODE_BYTES == 16 * 1024 * 1024
    at_limit = "a" * (MAX_NODE_BYTES - 2)  # and its two quotes
    assert cas.get(cas.put(builtin_hash("Text"), at_limit)).payload == at_limit
    with pytest.raises(Rejected, match=r"16 MiB \(16,777,216 bytes\)"):
        cas.put(builtin_hash("Text"), at_limit + "é")  # two bytes of UTF-8


def test_nesting_at_the_depth_limit_is_stored_and_one_more_is_refused() -> None:
    cas = new_cas()
    assert MAX_DEPTH == 200
    assert cas.get(cas.put(ANY, nested(200))).payload == nested(200)
    with pytest.raises(Rejected, match="nested more than 200 deep"):
        cas.put(ANY, nested(201))
    with pytest.raises(Rejected, match="nested more than 200 deep"):
        cas.put(ANY, {"a": nested(200)})


def test_large_integers_within_float64_are_stored_as_doubles() -> None:
    cas = new_cas()
    assert cas.put(ANY, 2**64 + 1) == node_hash(ANY, float(2**64))
    assert cas.put(ANY, -(10**308)) == node_hash(ANY, -1e308)


HOSTILE: dict[str, Any] = {
    "nan": [math.nan],
    "infinity": {"a": math.inf},
    "minus-infinity": -math.inf,
    "int-400-digits": 10**400,
    "int-minus-400-digits": [-(10**400)],
    "int-5000-digits": 10**5000,  # str() of it raises, and so would json.dumps
    "nested-201": nested(201),
    "nested-5000": nested(5000),
    "nested-5000-dicts": {"a": nested(5000)},
    "lone-surrogate": "\ud800",
    "lone-surrogate-key": {"\udc80": 1},
    "int-key": {1: "a"},
    "bytes": b"x",
    "set": [{1, 2}],
    "oversize": "a" * MAX_NODE_BYTES,
}


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_values_are_refused_by_every_entry_point(value: Any) -> None:
    def redact(text: str) -> str:
        return text.replace("password", "***")

    for store in (Store.memory(clock=lambda: 1), Store.memory(clock=lambda: 1, redact=redact)):
        store.cas.ensure_builtins()
        store.cas.put_schema(ANY_SCHEMA)
        before = list(store.cas.blobs.hashes())
        attempts: list[Callable[[], object]] = [
            partial(store.cas.put, ANY, value),
            partial(store.cas.put_node, {"type": ANY, "payload": value}),
            partial(store.cas.put_node, {"type": meta_hash(), "payload": value}),
            partial(jsoncas.put, store.cas, value, "Any"),
            partial(jsoncas.put, store.cas, {"type": ANY, "payload": value}),
            partial(jsoncas.hash_typed, store.cas, "Any", value),
            partial(jsoncas.hash_self, value),
        ]
        for attempt in attempts:
            with pytest.raises(UwfError) as caught:
                attempt()
            assert "\n" not in caught.value.line()
            assert len(caught.value.line()) < 400
        assert list(store.cas.blobs.hashes()) == before


def test_a_schema_nested_5000_deep_is_refused() -> None:
    cas = new_cas()
    schema: Any = {}
    for _ in range(5000):
        schema = {"not": schema}
    with pytest.raises(Rejected, match="nested more than 200 deep"):
        cas.put_schema(schema)


# -- 4. walk has no recursion limit ---------------------------------------------------

def step_chain(cas: Cas, length: int) -> tuple[str, list[str], str]:
    """(start, steps oldest first, output): a thread's StepNode chain of `length`."""
    start = cas.put(builtin_hash("StartNode"), {"workflow": builtin_hash("Text"), "prompt": "p"})
    output = cas.put_text("out")
    steps: list[str] = []
    prev: str | None = None
    for index in range(length):
        prev = cas.put(builtin_hash("StepNode"), {
            "start": start, "prev": prev, "role": f"r{index}", "output": output,
            "detail": output, "agent": "mock"})
        steps.append(prev)
    return start, steps, output


def test_walk_follows_a_chain_of_3000_steps_depth_first() -> None:
    cas = new_cas()
    start, steps, output = step_chain(cas, 3000)
    entries = cas.walk(steps[-1])
    expected = [
        WalkEntry(steps[-1], builtin_hash("StepNode"), 0, ""),
        WalkEntry(start, builtin_hash("StartNode"), 1, "start"),
        WalkEntry(builtin_hash("Text"), meta_hash(), 2, "workflow"),
        *(WalkEntry(steps[-1 - level], builtin_hash("StepNode"), level, "prev")
          for level in range(1, 3000)),
        WalkEntry(output, builtin_hash("Text"), 3000, "output"),
    ]
    assert entries == expected
    assert [e.hash for e in cas.walk(steps[-1], depth=1)] == [steps[-1], start, steps[-2],
                                                              output]


def recursive_walk(cas: Cas, hash_: str, depth: int | None) -> list[WalkEntry]:
    """`Cas.walk` as it was written before (recursive): the order to keep."""
    seen: set[str] = set()
    entries: list[WalkEntry] = []

    def visit(current: str, level: int, path: str) -> None:
        if current in seen:
            return
        seen.add(current)
        node = cas.get(current)
        entries.append(WalkEntry(current, node.type, level, path))
        if depth is not None and level >= depth:
            return
        for sub_path, ref in cas.refs(node):
            if cas.has(ref):
                visit(ref, level + 1, sub_path)
            elif ref not in seen:
                seen.add(ref)
                entries.append(WalkEntry(ref, "", level + 1, sub_path, missing=True))

    visit(hash_, 0, "")
    return entries


def test_walk_keeps_the_order_of_the_recursive_walk() -> None:
    cas = new_cas()
    tree = cas.put_schema({"title": "Tree", "type": "object", "properties": {
        "kids": {"type": "array", "items": {"type": "string", "format": "cas_ref"}},
        "by": {"type": "object", "additionalProperties": {"type": "string",
                                                           "format": "cas_ref"}}}})
    leaf = cas.put_text("leaf")
    missing = "0000000000000"
    shared = cas.put(tree, {"kids": [leaf, missing]})
    left = cas.put(tree, {"kids": [shared, leaf], "by": {"z": missing}})
    right = cas.put(tree, {"by": {"b": shared, "a": left}, "kids": [missing]})
    root = cas.put(tree, {"kids": [right, left, shared], "by": {"x": leaf}})
    for depth in (None, 0, 1, 2, 3, 4):
        assert cas.walk(root, depth) == recursive_walk(cas, root, depth), depth


def test_json_cas_walks_a_chain_of_3000_steps(cli: Cli) -> None:
    assert cli.cas("schema", "list").code == 0  # the store exists
    cas = new_cas(FileBlobs(cli.home / "cas", durable=False, wall=system_clock))
    _, steps, _ = step_chain(cas, 3000)
    walked = cli.cas("--json", "walk", steps[-1])
    assert walked.code == 0, walked.err
    entries = json.loads(walked.out)
    assert len(entries) == 3000 + 3
    assert max(entry["depth"] for entry in entries) == 3000


# -- 5. node files honour the umask ---------------------------------------------------

@pytest.mark.parametrize(("umask", "mode"), [(0o077, 0o600), (0o022, 0o644), (0o002, 0o664)])
def test_node_files_honour_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        cas = new_cas(FileBlobs(tmp_path / "cas", durable=False, wall=system_clock))
        hash_ = cas.put_text("private")
    finally:
        os.umask(old)
    path = tmp_path / "cas" / hash_[:2] / f"{hash_}.json"
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o777 & ~umask
    assert not list(path.parent.glob(".tmp-*"))


# -- 6. the fuzz corpus, through the real json-cas ---------------------------------------------

@dataclass(frozen=True)
class Input:
    data: bytes
    env: tuple[tuple[str, str], ...] = ()


def text(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


CORPUS: dict[str, Input] = {
    "NaN": Input(b"[NaN]"),
    "Infinity": Input(b'{"a": Infinity}'),
    "-Infinity": Input(b"-Infinity"),
    "1e400": Input(b"[1e400]"),
    "-1e400": Input(b'{"x": -1e400}'),
    "int-400-digits": Input(b"9" * 400),
    "int-4301-digits": Input(b"1" * 4301),
    "nested-201": Input(text(201)),
    "nested-5000": Input(text(5000)),
    "not-utf8-strict": Input(b'"caf\xe9"', (("PYTHONIOENCODING", "utf-8:strict"),)),
    "not-utf8-surrogateescape": Input(b'"\xff\xfe"',
                                      (("PYTHONIOENCODING", "utf-8:surrogateescape"),)),
    "lone-surrogate": Input(b'"\\ud800"'),
    "lone-surrogate-key": Input(b'{"\\udc80": 1}'),
}
COMMANDS: dict[str, tuple[str, ...]] = {
    "put": ("put", "--type", "Any", "-"),
    "put-node": ("put", "-"),
    "hash": ("hash", "--type", "Any", "-"),
}


@pytest.fixture
def any_store(cli: Cli) -> Cli:
    assert cli.cas("put", "--type", "meta", stdin=json.dumps(ANY_SCHEMA)).out.strip() == ANY
    return cli


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
@pytest.mark.parametrize("given", CORPUS.values(), ids=CORPUS.keys())
def test_the_fuzz_corpus_is_refused_in_one_line(any_store: Cli, given: Input,
                                                command: tuple[str, ...]) -> None:
    data = given.data
    if command == COMMANDS["put-node"]:
        data = b'{"type": "' + ANY.encode() + b'", "payload": ' + data + b"}"
    before = snapshot(any_store.home)
    result = run_bytes(any_store, "json-cas", *command, stdin=data, env=dict(given.env))
    one_line(result, (1, 2))
    assert snapshot(any_store.home) == before


def test_an_oversize_payload_is_refused_in_one_line(any_store: Cli) -> None:
    before = snapshot(any_store.home)
    data = b'"' + b"a" * MAX_NODE_BYTES + b'"'
    one_line(run_bytes(any_store, "json-cas", "put", "--type", "Any", "-", stdin=data), (1,),
             "16 MiB")
    assert snapshot(any_store.home) == before
