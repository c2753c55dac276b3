"""Fuzzing `uwf queue add --batch FILE` (and `--batch -`): JSON-lines files of entries
that are valid, nearly valid (a field of the wrong type or out of range, an unknown
field, an unknown workflow or run, both or neither of workflow and run, a repo
path with a NUL), mutated as bytes (flipped, cut short), or garbage, with blank
lines, CRLF endings and a byte-order mark.

A batch is all or nothing: refused, it is one line naming the bad line (or saying
the file holds no entries) with exit 1 or 2, and the log and the CAS are as they
were; accepted, every non-blank line has an id, the entries added are one batch
of `queue.added` events in one write, and the log verifies. docs/fuzzing.md has
the budgets.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests import fuzzkit
from tests.conftest import EXAMPLE
from tests.fuzzkit import Sandbox, fresh

TARGET = "queue add --batch"
BINARY_TARGET = "queue add --batch (real binary)"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sandbox, str]:
    """A store with the example workflow, a thread and an entry keyed `k1`."""
    sandbox = Sandbox.create(tmp_path_factory.mktemp("batch") / "template")
    for argv in (("workflow", "put", str(EXAMPLE)),
                 ("queue", "add", "--workflow", "solve-issue", "--prompt", "x", "--key", "k1")):
        done = fuzzkit.run_in_process(sandbox, "uwf", *argv)
        assert done.code == 0, done.describe()
    started = fuzzkit.run_in_process(sandbox, "uwf", "--json", "thread", "start",
                                     "solve-issue", "-p", "Fix it")
    assert started.code == 0, started.describe()
    THREADS.append(json.loads(started.out)["thread"])
    return sandbox, THREADS[-1]


THREADS: list[str] = []


# -- generated lines ---------------------------------------------------------------------

ODD = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
                st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                     st.integers(), max_size=2))
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "prompt": st.one_of(st.text(max_size=30), st.just("  "), ODD),
    "repo": st.one_of(st.sampled_from(["work", ".", "~", "a\x00b", "", "sub/dir"]), ODD),
    "priority": st.one_of(st.integers(-1_000_000_001, 1_000_000_001), ODD),
    "note": st.one_of(st.text(max_size=30), ODD),
    "session": st.one_of(st.text(max_size=8), st.just("s" * 1001), ODD),
    "agent": st.one_of(st.text(max_size=8), ODD),
    "timeoutSec": st.one_of(st.integers(-1, 31_536_001), ODD),
    "idleTimeoutSec": st.one_of(st.integers(-1, 31_536_001), ODD),
    "expectedArtifacts": st.one_of(st.lists(st.text(max_size=8), max_size=3), ODD),
    "key": st.one_of(st.sampled_from(["k1", "k2", ""]), st.text(max_size=8), ODD),
    "unknownField": ODD,
    "timeout_sec": ODD,  # snake_case is not the batch's spelling
}


@st.composite
def entry(draw: st.DrawFn) -> dict[str, Any]:
    which = draw(st.sampled_from(["workflow", "workflow", "run", "both", "neither"]))
    found: dict[str, Any] = {}
    if which in ("workflow", "both"):
        found["workflow"] = draw(st.one_of(st.just("solve-issue"), st.text(max_size=8), ODD))
        found["prompt"] = draw(st.one_of(st.just("Do the task"), FIELDS["prompt"]))
    if which in ("run", "both"):
        found["run"] = draw(st.one_of(st.sampled_from(THREADS or ["x"]),
                                      st.just("01J7K9M2XNPQR5VWBCDF8G3H4T"),
                                      st.text(max_size=26), ODD))
    for name in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=3, unique=True)):
        found[name] = draw(FIELDS[name])
    return found


@st.composite
def valid_entry(draw: st.DrawFn) -> dict[str, Any]:
    """An entry `queue add` accepts: the workflow or the thread, and fields in range."""
    if draw(st.integers(0, 3)) == 0:
        found: dict[str, Any] = {"run": draw(st.sampled_from(THREADS or ["x"]))}
    else:
        found = {"workflow": "solve-issue",
                 "prompt": draw(st.text(min_size=1, max_size=30).filter(str.strip))}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "priority": st.integers(-1_000_000_000, 1_000_000_000),
        "note": st.text(max_size=30),
        "session": st.text(min_size=1, max_size=20),
        "agent": st.text(min_size=1, max_size=20),
        "timeoutSec": st.integers(1, 31_536_000),
        "idleTimeoutSec": st.integers(1, 31_536_000),
        "expectedArtifacts": st.lists(st.text(max_size=10), max_size=3),
        "key": st.one_of(st.sampled_from(["k1", "k2", "k3"]), st.text(min_size=1, max_size=8)),
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), max_size=4, unique=True)):
        found[name] = draw(optional[name])
    return found


@st.composite
def line(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["entry", "entry", "entry", "mutated", "value", "bytes",
                                 "blank"]))
    if kind == "blank":
        return draw(st.sampled_from([b"", b"   ", b"\t", b"\r"]))
    if kind == "bytes":
        return draw(st.binary(max_size=30)).replace(b"\n", b"")
    if kind == "value":
        value: Any = draw(ODD)
    else:
        value = draw(entry())
    text = json.dumps(value, ensure_ascii=draw(st.booleans()), allow_nan=True)
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    if kind == "mutated" and data:
        at = draw(st.integers(0, len(data) - 1))
        change = draw(st.sampled_from(["cut", "flip", "insert"]))
        if change == "cut":
            del data[at:]
        elif change == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        else:
            data[at:at] = draw(st.sampled_from([b",", b"}", b"\\", b'"', b"\xff", b"\x00"]))
    return bytes(data).replace(b"\n", b"")


@st.composite
def batch_file(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):  # valid entries, and perhaps one bad line among them
        lines = [json.dumps(found, ensure_ascii=draw(st.booleans())).encode("utf-8",
                                                                             "surrogatepass")
                 for found in draw(st.lists(valid_entry(), min_size=1, max_size=6))]
        if draw(st.booleans()):
            lines.insert(draw(st.integers(0, len(lines))), draw(line()))
    else:
        lines = draw(st.lists(line(), min_size=0, max_size=6))
    data = draw(st.sampled_from([b"\n", b"\r\n"])).join(lines)
    if draw(st.booleans()):
        data += b"\n"
    if draw(st.integers(0, 9)) == 0:
        data = "\ufeff".encode() + data
    return data


# -- the checks --------------------------------------------------------------------------

def add(sandbox: Sandbox, data: bytes, stdin: bool, target: str,
        run: fuzzkit.Runner = fuzzkit.run_in_process) -> fuzzkit.Outcome:
    path = sandbox.work / "entries.jsonl"
    path.write_bytes(data)
    before = sandbox.snapshot()
    log_before = _log(before)
    argv = ("--json", "queue", "add", "--batch", "-" if stdin else str(path))
    outcome = run(sandbox, "uwf", *argv, stdin=data if stdin else b"")
    kind = fuzzkit.accepted_or_unchanged(sandbox, target, before, outcome, run=run)
    # A byte order mark opens the file, not its first line: a line of it alone is blank.
    body = data.removeprefix("\ufeff".encode())
    lines = [raw for raw in body.split(b"\n") if raw.strip()]
    if kind == "refused":
        said = outcome.err
        numbered = re.search(r" line (\d+): ", said)
        assert (numbered and 1 <= int(numbered[1]) <= len(data.split(b"\n"))) or any(
            words in said for words in ("holds no entries", "no file")), said
        return outcome
    result = fuzzkit.payload(outcome)
    assert result["count"] == len(result["ids"]) == len(lines), (result, lines)
    assert result["added"] + result["existing"] == result["count"]
    new = _log(sandbox.snapshot())[len(log_before):]
    events = [json.loads(raw) for raw in new.splitlines()]
    added = [event for event in events if event["type"] == "queue.added"]
    assert len(added) == result["added"], events
    if added:  # one batch, one write: [1, n] ... [n, n]
        batches = [tuple(event["batch"]) for event in events if event["type"] != "store.created"]
        assert batches == [(k, len(batches)) for k in range(1, len(batches) + 1)], batches
    return outcome


def _log(files: dict[str, bytes]) -> bytes:
    return b"".join(data for name, data in sorted(files.items()) if name.startswith("events"))


@given(batch_file(), st.booleans())
@fuzzkit.fuzz_settings(150)
@example(b'{"workflow": "solve-issue", "prompt": "x"}\n{"run": "01J7K9M2XNPQR5VWBCDF8G3H4T"}\n',
         False)
@example(b'{"workflow": "solve-issue", "prompt": "x", "key": "k1"}\n', False)
@example(b"\n\n  \n", True)
# Found by the long run: a byte order mark on a line of its own is a blank line.
@example("\ufeff".encode() + b'\n{"workflow": "solve-issue", "prompt": "x"}', False)
# Found by this target: a repo path holding a NUL byte (ValueError: embedded null byte),
# or one too long for the file system (OSError), was an internal error.
@example(b'{"workflow": "solve-issue", "prompt": "x", "repo": "a\\u0000b"}\n', False)
@example(b'{"workflow": "solve-issue", "prompt": "x", "repo": "' + b"a/" * 3000 + b'"}', False)
def test_every_batch_is_added_whole_or_refused_in_one_line(template: tuple[Sandbox, str],
                                                           data: bytes, stdin: bool) -> None:
    sandbox_template, _ = template
    with fuzzkit.trying(TARGET), fresh(sandbox_template) as sandbox:
        add(sandbox, data, stdin, TARGET)


@given(batch_file(), st.booleans())
@fuzzkit.fuzz_settings(6, binary=True)
def test_the_real_binary_adds_as_main_does(template: tuple[Sandbox, str], data: bytes,
                                           stdin: bool) -> None:
    sandbox_template, _ = template
    with (fuzzkit.trying(BINARY_TARGET), fresh(sandbox_template) as first,
          fresh(sandbox_template) as second):
        inside = add(first, data, stdin, TARGET)
        outside = add(second, data, stdin, BINARY_TARGET, run=fuzzkit.run_binary)
        assert outside.code == inside.code, (inside.describe(), outside.describe())


@pytest.mark.parametrize("data", [b'{"workflow": "solve-issue", "prompt": "\xff"}\n',
                                  b'{"workflow": "solve-issue", "prompt": "x", "n\xc3": 1}'])
def test_a_line_with_bytes_that_are_not_utf8_is_refused_by_number(
        template: tuple[Sandbox, str], data: bytes) -> None:
    sandbox_template, _ = template
    with fresh(sandbox_template) as sandbox:
        add(sandbox, data, False, TARGET)
