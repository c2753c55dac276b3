"""Fuzzing the CAS node files: one node of a real store (the meta-schema, a built-in
or custom schema, the workflow, a StartNode, a StepNode, an output, a detail, a
Text node) damaged byte by byte, re-encoded with another payload, type or
timestamp (any JSON value, numbers beyond float64 included), extra or missing
fields, replaced with garbage, emptied, removed or made a folder.

Every `json-cas` and `uwf` command that reads nodes then exits cleanly and changes
neither the log nor the CAS; `json-cas get` never prints a payload other than the
node's own (a file whose type or payload changed is refused), and `json-cas
verify` names the damage; a writer (`thread start`) refuses with nothing written
or writes a log that verifies. docs/fuzzing.md has the budgets.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests import fuzzkit
from tests.conftest import BIN, EXAMPLE
from tests.fuzzkit import Sandbox, fresh

TARGET = "CAS node files"
BINARY_TARGET = "CAS node files (real binary)"
MOCK = EXAMPLE.parent / "mock-solve-issue.yaml"
SCHEMA = {"title": "Note", "type": "object", "properties": {
    "text": {"type": "string"}, "see": {"type": "string", "format": "cas_ref"}}}


class Seeded:
    """The template's nodes by role, and the commands that read them."""

    def __init__(self, nodes: dict[str, str], thread: str) -> None:
        self.nodes = nodes  # role -> hash
        self.thread = thread

    def __repr__(self) -> str:
        return f"Seeded({sorted(self.nodes)})"

    def reads(self) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = [
            ("json-cas", "verify", "--all"), ("json-cas", "schema", "list"),
            ("json-cas", "gc", "--dry-run"), ("json-cas", "walk", self.nodes["step"]),
            ("uwf", "workflow", "show", "solve-issue"), ("uwf", "thread", "show", self.thread),
            ("uwf", "thread", "log", self.thread), ("uwf", "run", "show", self.thread),
            ("uwf", "agent", "context", self.thread, "developer"),
            ("uwf", "run", "resume", self.thread), ("uwf", "log", "verify")]
        return found


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sandbox, Seeded]:
    """A store with a thread stepped once (by uwf-mock) and a node of a custom schema."""
    sandbox = Sandbox.create(tmp_path_factory.mktemp("cas") / "template", path=str(BIN))
    # The older layout: a step's nodes as loose files, so each can be damaged alone (a
    # node record is damaged only by editing the log: tests/e2e/test_node_records.py).
    sandbox.env["UWF_NODES"] = "loose"

    def ok(prog: str, *argv: str, stdin: bytes = b"") -> str:
        done = fuzzkit.run_in_process(sandbox, prog, "--json", *argv, stdin=stdin)
        assert done.code == 0, done.describe()
        return done.out

    workflow = json.loads(ok("uwf", "workflow", "put", str(EXAMPLE)))["workflow"]
    thread = json.loads(ok("uwf", "thread", "start", "solve-issue", "-p", "Fix it"))["thread"]
    head = json.loads(ok("uwf", "thread", "step", thread, "--agent", f"uwf-mock {MOCK}"))["head"]
    step = json.loads(ok("json-cas", "get", head))["payload"]
    text = ok("json-cas", "put", "--type", "Text", "-", stdin=b'"a note"').strip()
    schema = ok("json-cas", "put", "--type", "meta", "-", stdin=json.dumps(SCHEMA).encode()
                ).strip()
    note = ok("json-cas", "put", "--type", schema, "-",
              stdin=json.dumps({"text": "n", "see": text}).encode()).strip()
    schemas = {entry["title"]: entry["hash"]
               for entry in json.loads(ok("json-cas", "schema", "list"))}
    sandbox.env["PATH"] = str(sandbox.root / "bin")
    nodes = {"workflow": workflow, "start": step["start"], "step": head,
             "output": step["output"], "detail": step["detail"], "text": text,
             "schema": schema, "note": note, "meta": schemas["meta-schema"],
             "StepNode": schemas["StepNode"], "Text": schemas["Text"]}
    return sandbox, Seeded(nodes, thread)


def node_file(sandbox: Sandbox, hash_: str) -> Path:
    return sandbox.home / "cas" / hash_[:2] / f"{hash_}.json"


# -- damage ------------------------------------------------------------------------------

ROLES = st.sampled_from(["workflow", "start", "step", "output", "detail", "text", "schema",
                         "note", "meta", "StepNode", "Text"])
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False,
                                                                 allow_infinity=False),
              st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)
# Raw JSON text a re-encoded field may hold: numbers JSON parsers disagree on.
RAW = st.one_of(JSON.map(json.dumps), st.sampled_from(
    ["1e400", "-1e400", "NaN", "Infinity", "1" * 400, "1.5", "-1", '"12"', "[1]", "{}",
     '"\\ud800"', "[" * 300 + "]" * 300, '"0123456789ABC"', '"56GP9CC0KVQF8"']))
OPS = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("overwrite"), st.integers(0, 10**6), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 50)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("field"), st.sampled_from(["type", "payload", "timestamp", "extra"]),
              RAW),
    st.tuples(st.just("drop-field"), st.sampled_from(["type", "payload", "timestamp"])),
    st.tuples(st.just("garbage"), st.binary(max_size=64)),
    st.tuples(st.just("whole"), RAW),
    st.tuples(st.just("remove")),
    st.tuples(st.just("folder")),
)


def damage(path: Path, op: tuple[Any, ...]) -> None:
    kind = op[0]
    data = bytearray(path.read_bytes()) if path.is_file() else bytearray()
    if kind in ("flip", "overwrite", "delete", "truncate") and data:
        at = op[1] % len(data)
        if kind == "flip":
            data[at] ^= 1 << op[2]
        elif kind == "overwrite":
            data[at:at + len(op[2])] = op[2]
        elif kind == "delete":
            del data[at:at + op[2]]
        else:
            del data[at:]
    elif kind == "field":
        data = bytearray(_with_field(bytes(data), op[1], op[2]))
    elif kind == "drop-field":
        try:
            node = json.loads(data)
            del node[op[1]]
            data = bytearray(json.dumps(node).encode())
        except (ValueError, KeyError, TypeError):
            pass
    elif kind == "garbage":
        data = bytearray(op[1])
    elif kind == "whole":
        data = bytearray(op[1].encode("utf-8", "surrogatepass"))
    elif kind == "remove":
        _clear(path)
        return
    elif kind == "folder":
        _clear(path)
        path.mkdir(parents=True)
        return
    _clear(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(data))


def _clear(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _with_field(data: bytes, name: str, raw: str) -> bytes:
    """The node file with one field's JSON text replaced by `raw` (kept verbatim, so a
    number beyond float64 reaches the reader as written)."""
    try:
        node = json.loads(data)
    except ValueError:
        return data
    if not isinstance(node, dict):
        return data
    node[name] = "\x00MARK\x00"
    return json.dumps(node, indent=2).replace('"\\u0000MARK\\u0000"', raw).encode(
        "utf-8", "surrogatepass")


# -- the checks ----------------------------------------------------------------------------

def same_content(original: bytes, path: Path) -> bool:
    """Whether the damaged file still holds the node's type and payload (only layout or
    the timestamp changed): then reads may succeed."""
    if not path.is_file():
        return False
    try:
        before, after = json.loads(original), json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        return False
    return (isinstance(after, dict) and after.get("type") == before["type"]
            and "payload" in after and after["payload"] == before["payload"])


def check(sandbox: Sandbox, seeded: Seeded, role: str, ops: list[tuple[Any, ...]],
          target: str, *, run: fuzzkit.Runner = fuzzkit.run_in_process) -> list[int]:
    hash_ = seeded.nodes[role]
    path = node_file(sandbox, hash_)
    original = path.read_bytes()
    for op in ops:
        damage(path, op)
    codes = []
    verified = True
    for prog, *argv in [("json-cas", "get", hash_), ("json-cas", "verify", hash_),
                        ("json-cas", "has", hash_), *seeded.reads()]:
        before = sandbox.snapshot()
        outcome = run(sandbox, prog, "--json", *argv)
        fuzzkit.verdict(outcome, target)
        fuzzkit.unchanged(before, sandbox, outcome)
        codes.append(outcome.code)
        if argv == ["log", "verify"]:
            verified = outcome.code == 0
        if argv[0] == "get" and outcome.code == 0:
            assert fuzzkit.payload(outcome)["payload"] == json.loads(original)["payload"], (
                "get printed a payload that is not the node's", outcome.describe())
        if argv in (["get", hash_], ["verify", hash_]) and not same_content(original, path):
            assert outcome.code == 1, (f"{argv[0]} passed a damaged node", outcome.describe())
    before = sandbox.snapshot()
    wrote = run(sandbox, "uwf", "--json", "thread", "start", "solve-issue", "-p", "again")
    fuzzkit.accepted_or_unchanged(sandbox, target, before, wrote, run=run, verified=verified)
    codes.append(wrote.code)
    return codes


@given(ROLES, st.lists(OPS, min_size=1, max_size=2))
@fuzzkit.fuzz_settings(60)
# Found by this target: a timestamp of 1e400 (inf to json.loads) was an internal error
# (OverflowError from int()) in get, verify and every reader of the node.
@example("text", [("field", "timestamp", "1e400")])
@example("step", [("field", "payload", "[" * 300 + "]" * 300)])
@example("workflow", [("whole", "[]")])
# Found by this target: a folder in place of a node file was an internal error
# (IsADirectoryError from fdopen) where it is "not a regular file".
@example("meta", [("folder",)])
@example("StepNode", [("remove",)])
def test_every_damaged_node_file_is_refused_in_one_line(template: tuple[Sandbox, Seeded],
                                                        role: str,
                                                        ops: list[tuple[Any, ...]]) -> None:
    sandbox_template, seeded = template
    with fuzzkit.trying(TARGET), fresh(sandbox_template) as sandbox:
        check(sandbox, seeded, role, ops, TARGET)


@given(ROLES, st.lists(OPS, min_size=1, max_size=2))
@fuzzkit.fuzz_settings(3, binary=True)
def test_the_real_binaries_read_damaged_nodes_as_main_does(
        template: tuple[Sandbox, Seeded], role: str, ops: list[tuple[Any, ...]]) -> None:
    sandbox_template, seeded = template
    with (fuzzkit.trying(BINARY_TARGET), fresh(sandbox_template) as first,
          fresh(sandbox_template) as second):
        inside = check(first, seeded, role, ops, TARGET)
        outside = check(second, seeded, role, ops, BINARY_TARGET, run=fuzzkit.run_binary)
        assert outside == inside
