"""Fuzzing the log's lines: a real log of several segments, tampered with byte by
byte (bits flipped, bytes overwritten, deleted, inserted, a segment cut short or
extended with garbage), line by line (lines repeated, dropped, swapped, a field of
one rewritten), file by file (a segment removed or renamed, stray files and
folders, a garbage repair note), or extended with forged lines that chain
correctly but leave a batch incomplete or a line torn.

Then every read (`log verify`, `log tail`, the lists, `registry show|verify`)
exits cleanly and changes neither the log nor the CAS; `log verify` fails, naming
a problem, whenever the log is not a prefix of the original at a batch boundary
(or the original with only its last line changed, which no chain can notice); and
a writer (`queue add`) either refuses with the log untouched (at most an
unacknowledged tail cut, as recovery does) or repairs per SPEC §3: what it cut is
recorded by `log.repaired`, and a log that was whole but for its unacknowledged
tail verifies afterwards. docs/fuzzing.md has the budgets.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests import fuzzkit
from tests.conftest import BIN, EXAMPLE
from tests.fuzzkit import Sandbox, fresh
from uwf.engine.segments import is_segment_name

TARGET = "log lines"
BINARY_TARGET = "log lines (real binary)"
MOCK = EXAMPLE.parent / "mock-solve-issue.yaml"
READS: tuple[tuple[str, ...], ...] = (
    ("log", "verify"), ("log", "tail", "-n", "3"), ("log", "tail", "--type", "thread."),
    ("log", "tail", "--since", "5"), ("workflow", "list"), ("thread", "list", "--all"),
    ("queue", "list"), ("run", "search"), ("registry", "show"), ("registry", "verify"),
)
WRITE = ("queue", "add", "--workflow", "solve-issue", "--prompt", "after the tamper")


class Original:
    """The template's log: its lines, and where a prefix of it is a whole log."""

    def __init__(self, log: bytes, names: list[str], boundaries: frozenset[int],
                 last_line_start: int) -> None:
        self.log = log
        self.names = names
        self.boundaries = boundaries  # offsets just after a line that ends its batch
        self.last_line_start = last_line_start

    def __repr__(self) -> str:  # hypothesis prints the fixture with a failing input
        return f"Original({len(self.log)} bytes, {len(self.boundaries) - 1} batches)"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sandbox, Original]:
    """A store whose log spans several segments: a workflow, a thread run to its end by
    uwf-mock, another started, queue entries, a lease and a policy."""
    sandbox = Sandbox.create(tmp_path_factory.mktemp("log") / "template", path=str(BIN))
    sandbox.env["UWF_SEGMENT_BYTES"] = "3000"
    run = fuzzkit.run_in_process

    def ok(*argv: str) -> Any:
        done = run(sandbox, "uwf", "--json", *argv)
        assert done.code == 0, done.describe()
        return json.loads(done.out)

    ok("workflow", "put", str(EXAMPLE))
    thread = ok("thread", "start", "solve-issue", "-p", "Fix the bug")["thread"]
    ok("thread", "run", thread, "--agent", f"uwf-mock {MOCK}")
    ok("thread", "start", "solve-issue", "-p", "Another")
    ok("queue", "add", "--workflow", "solve-issue", "--prompt", "one", "--key", "k1")
    ok("queue", "add", "--workflow", "solve-issue", "--prompt", "two")
    ok("sched", "lease", "--limit", "1")
    ok("sched", "policy", "set", "--maxConcurrent", "2")
    sandbox.env["PATH"] = str(sandbox.root / "bin")
    assert len(segments(sandbox)) >= 3
    log = joined(sandbox)
    boundaries = {0}
    offset = 0
    for raw in log.split(b"\n")[:-1]:
        offset += len(raw) + 1
        k, n = json.loads(raw)["batch"]
        if k == n:
            boundaries.add(offset)
    last_start = log.rstrip(b"\n").rfind(b"\n") + 1
    names = [path.name for path in segments(sandbox)]
    return sandbox, Original(log, names, frozenset(boundaries), last_start)


def segments(sandbox: Sandbox) -> list[Path]:
    folder = sandbox.home / "events"
    return sorted(path for path in folder.iterdir() if is_segment_name(path.name)
                  and path.is_file())


def joined(sandbox: Sandbox) -> bytes:
    return b"".join(path.read_bytes() for path in segments(sandbox))


# -- tampering -----------------------------------------------------------------------------

Op = tuple[Any, ...]
INDEX = st.integers(0, 10**6)  # taken modulo what it indexes, so an op fits any log
JUNK = st.one_of(st.binary(max_size=12), st.sampled_from(
    [b"\n", b"{", b"}", b'"', b"\x00", b"\xff", b'{"seq":', b"\n\n", b"null\n",
     b'{"seq":1}\n', b"\r\n", b" "]))
FIELDS = ["seq", "id", "ts", "type", "subject", "batch", "data", "prev", "extra"]
FIELD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 10**20), st.text(max_size=10),
    st.sampled_from(["thread.stepped", "no.such.type", "store.created", "log.repaired",
                     "0" * 32, "2026-13-45T99:99:99.999Z", "01JD0000000000000000000000"]),
    st.lists(st.integers(-1, 3), max_size=3), st.dictionaries(st.text(max_size=4),
                                                               st.integers(), max_size=2))
OPS = st.one_of(
    st.tuples(st.just("flip"), INDEX, INDEX, st.integers(0, 7)),
    st.tuples(st.just("overwrite"), INDEX, INDEX, JUNK),
    st.tuples(st.just("delete"), INDEX, INDEX, st.integers(1, 300)),
    st.tuples(st.just("insert"), INDEX, INDEX, JUNK),
    st.tuples(st.just("truncate"), INDEX, INDEX),
    st.tuples(st.just("append"), INDEX, JUNK),
    st.tuples(st.just("repeat-line"), INDEX, INDEX),
    st.tuples(st.just("drop-line"), INDEX, INDEX),
    st.tuples(st.just("swap-lines"), INDEX, INDEX, INDEX),
    st.tuples(st.just("edit-line"), INDEX, INDEX, st.sampled_from(FIELDS), FIELD_VALUES),
    st.tuples(st.just("remove-segment"), INDEX),
    st.tuples(st.just("rename-segment"), INDEX, st.integers(0, 200)),
    # Stray files; a damaged repair.pending and a folder where a segment or the note goes
    # have tests of their own at the end.
    st.tuples(st.just("stray"), st.sampled_from(
        ["00000000000000000999.jsonl", "00000000000000000000.jsonl", "notes.txt",
         "repair.pending.tmp", "0000000000000000001.jsonl"]), JUNK),
    st.tuples(st.just("forge"), st.integers(0, 3), st.integers(0, 2), INDEX),
)


def tamper(sandbox: Sandbox, op: Op) -> None:
    """Apply one op to the store's events folder."""
    kind = op[0]
    folder = sandbox.home / "events"
    files = segments(sandbox)
    if kind == "stray":
        (folder / op[1]).write_bytes(op[2])
        return
    if kind == "folder":
        (folder / op[1]).mkdir()
        return
    if kind == "forge":
        forge(sandbox, complete=op[1], partial=op[2], source=op[3])
        return
    if not files:
        return
    path = files[op[1] % len(files)]
    data = bytearray(path.read_bytes())
    size = max(len(data), 1)
    lines = bytes(data).split(b"\n")[:-1] if data.endswith(b"\n") else bytes(data).split(b"\n")
    if kind == "flip" and data:
        data[op[2] % len(data)] ^= 1 << op[3]
    elif kind == "overwrite":
        at = op[2] % size
        data[at:at + len(op[3])] = op[3]
    elif kind == "delete":
        at = op[2] % size
        del data[at:at + op[3]]
    elif kind == "insert":
        at = op[2] % (len(data) + 1)
        data[at:at] = op[3]
    elif kind == "truncate":
        del data[op[2] % size:]
    elif kind == "append":
        data += op[2]
    elif kind in ("repeat-line", "drop-line", "swap-lines", "edit-line") and lines:
        at = op[2] % len(lines)
        if kind == "repeat-line":
            lines.insert(at, lines[at])
        elif kind == "drop-line":
            del lines[at]
        elif kind == "swap-lines":
            other = op[3] % len(lines)
            lines[at], lines[other] = lines[other], lines[at]
        else:
            lines[at] = edited(lines[at], op[3], op[4])
        data = bytearray(b"".join(line + b"\n" for line in lines))
    elif kind == "remove-segment":
        path.unlink()
        return
    elif kind == "rename-segment":
        path.rename(folder / f"{op[2]:020d}.jsonl")
        return
    path.write_bytes(bytes(data))


def edited(raw: bytes, name: str, value: Any) -> bytes:
    """The line with one field set to `value` (added when absent), as compact JSON."""
    try:
        event = json.loads(raw)
    except ValueError:
        return raw + b"x"
    if not isinstance(event, dict):
        return raw + b"x"
    event[name] = value
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()


def forge(sandbox: Sandbox, complete: int, partial: int, source: int) -> None:
    """Append lines chained to the log's last line, all of one batch left incomplete:
    `complete` whole lines of a batch of complete + 1 + partial, then `partial` bytes
    torn off the next one (as a writer killed mid-batch leaves them)."""
    files = segments(sandbox)
    if not files:
        return
    log = joined(sandbox)
    lines = log.split(b"\n")[:-1]
    if not lines or not log.endswith(b"\n"):
        return
    try:
        model = json.loads(lines[source % len(lines)])
        last = json.loads(lines[-1])
    except ValueError:
        return
    if not isinstance(model, dict) or not isinstance(last, dict) or not isinstance(
            last.get("seq"), int):
        return
    total = complete + 1 + partial
    prev = hashlib.sha256(lines[-1]).hexdigest()[:32]
    forged = b""
    for index in range(complete + 1):
        event = {**model, "seq": last["seq"] + index + 1, "batch": [index + 1, total],
                 "prev": prev}
        raw = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
        prev = hashlib.sha256(raw).hexdigest()[:32]
        forged += raw + b"\n" if index < complete else raw[:max(1, len(raw) * partial // 3)]
    with files[-1].open("ab") as handle:
        handle.write(forged)


# -- the checks ----------------------------------------------------------------------------

def may_verify(original: Original, tampered: bytes) -> bool:
    """Whether `log verify` may pass: the log is a prefix of the original ending at a
    batch boundary, or the original with at most its last line changed."""
    if tampered in (original.log[:offset] for offset in original.boundaries):
        return True
    if tampered == original.log:
        return True
    head = original.log[:original.last_line_start]
    return tampered.startswith(head) and tampered[len(head):].rstrip(b"\n").count(b"\n") == 0


def check(sandbox: Sandbox, original: Original, target: str,
          run: fuzzkit.Runner = fuzzkit.run_in_process) -> list[int]:
    """Every read, then the writer; the exit codes, in order."""
    tampered = joined(sandbox)
    names = [path.name for path in segments(sandbox)]
    codes = []
    verified = True
    for argv in READS:
        before = sandbox.snapshot()
        outcome = run(sandbox, "uwf", "--json", *argv)
        fuzzkit.verdict(outcome, target)
        fuzzkit.unchanged(before, sandbox, outcome)
        codes.append(outcome.code)
        if argv == ("log", "verify"):
            verified = outcome.code == 0
            if not may_verify(original, tampered):
                assert outcome.code == 1, ("verify passed a tampered log", outcome.describe())
            if outcome.code == 1 and outcome.out:
                assert fuzzkit.payload(outcome)["problems"], outcome.describe()
    before = sandbox.snapshot()
    cas_before = {k: v for k, v in before.items() if k.startswith("cas")}
    wrote = run(sandbox, "uwf", "--json", *WRITE)
    fuzzkit.verdict(wrote, target)
    codes.append(wrote.code)
    after = joined(sandbox)
    if {k: v for k, v in sandbox.snapshot().items() if k.startswith("cas")} != cas_before:
        raise fuzzkit.DataChanged(f"the writer changed the CAS\n{wrote.describe()}")
    if wrote.code != 0:
        # Refused: untouched, or only an unacknowledged tail cut (recovery's first step).
        if not (after == tampered or (tampered.startswith(after)
                                      and (not after or after.endswith(b"\n")))):
            raise fuzzkit.DataChanged(f"a refused write changed the log\n{wrote.describe()}")
        return codes
    repaired = [json.loads(raw) for raw in after.split(b"\n")[:-1]
                if b'"type":"log.repaired"' in raw and raw not in tampered]
    dropped = sum(event["data"]["droppedBytes"] for event in repaired)
    kept = tampered[:len(tampered) - dropped]
    if not (after.startswith(kept) and (not kept or kept.endswith(b"\n"))):
        raise fuzzkit.DataChanged(f"the writer changed more than the torn tail it recorded "
                                  f"({dropped} bytes)\n{wrote.describe()}")
    # A log that verified, or the original plus a tail the writer cut, verifies after.
    if verified or (kept == original.log and names == original.names):
        fuzzkit.log_verifies(sandbox, run)
    return codes


@given(st.lists(OPS, min_size=1, max_size=3))
@fuzzkit.fuzz_settings(100)
@example([("append", 0, b'{"seq":')])
# Found by this target: a byte that is not UTF-8 inside a string of a line was an internal
# error (msgspec raises UnicodeDecodeError, not DecodeError) in every read and verify.
@example([("overwrite", 0, 2, b"\x80")])
@example([("forge", 1, 1, 3)])
@example([("forge", 0, 0, 0)])
@example([("edit-line", 0, 1, "type", "no.such.type")])
@example([("truncate", 10**6 - 1, 5)])
def test_every_tampered_log_is_read_and_written_cleanly(
        template: tuple[Sandbox, Original], ops: list[Op]) -> None:
    sandbox_template, original = template
    with fuzzkit.trying(TARGET), fresh(sandbox_template) as sandbox:
        for op in ops:
            tamper(sandbox, op)
        check(sandbox, original, TARGET)


@given(st.lists(OPS, min_size=1, max_size=3))
@fuzzkit.fuzz_settings(3, binary=True)
def test_the_real_binary_reads_a_tampered_log_as_main_does(
        template: tuple[Sandbox, Original], ops: list[Op]) -> None:
    sandbox_template, original = template
    with (fuzzkit.trying(BINARY_TARGET), fresh(sandbox_template) as first,
          fresh(sandbox_template) as second):
        for op in ops:
            tamper(first, op)
            tamper(second, op)
        inside = check(first, original, TARGET)
        assert check(second, original, BINARY_TARGET, run=fuzzkit.run_binary) == inside


def test_registry_show_names_a_bad_line_after_the_views_checkpoint(
        template: tuple[Sandbox, Original]) -> None:
    """Found by this target: `registry show` read the lines after a stale checkpoint
    without a guard, and one that was not JSON was an internal error (DecodeError)."""
    sandbox_template, original = template
    with fresh(sandbox_template) as sandbox:
        forge(sandbox, complete=2, partial=0, source=0)
        last = segments(sandbox)[-1]
        data = bytearray(last.read_bytes())
        *_, first, second, torn = bytes(data).split(b"\n")  # two forged lines, a torn one
        data[len(data) - len(torn) - len(second) - len(first) - 2] = ord("x")  # not JSON
        last.write_bytes(bytes(data))
        shown = fuzzkit.run_in_process(sandbox, "uwf", "--json", "registry", "show")
        assert fuzzkit.verdict(shown, TARGET) == "refused"
        assert shown.err.endswith("is not a valid event; run `uwf log verify`\n")
        check(sandbox, original, TARGET)


def test_a_forged_incomplete_batch_is_cut_and_recorded(template: tuple[Sandbox, Original]
                                                        ) -> None:
    """The writer's repair, which the fuzzing leans on, seen once plainly."""
    sandbox_template, original = template
    with fresh(sandbox_template) as sandbox:
        forge(sandbox, complete=2, partial=1, source=5)
        assert joined(sandbox).startswith(original.log)
        check(sandbox, original, TARGET)
        lines = [json.loads(raw) for raw in joined(sandbox).splitlines()]
        repair = lines[len(original.log.splitlines())]
        assert repair["type"] == "log.repaired"
        assert repair["data"]["droppedLines"] == 3


@pytest.mark.parametrize("note", [b"\xff", b"{}", b'[{"segment": 1}]'])
def test_a_damaged_repair_note_is_a_one_line_error(template: tuple[Sandbox, Original],
                                                   note: bytes) -> None:
    sandbox_template, original = template
    with fresh(sandbox_template) as sandbox:
        tamper(sandbox, ("stray", "repair.pending", note))
        check(sandbox, original, TARGET)


@pytest.mark.parametrize("name", ["00000000000000000999.jsonl", "repair.pending"])
def test_a_folder_among_the_segments_is_a_one_line_error(template: tuple[Sandbox, Original],
                                                         name: str) -> None:
    sandbox_template, original = template
    with fresh(sandbox_template) as sandbox:
        tamper(sandbox, ("folder", name))
        check(sandbox, original, TARGET)
