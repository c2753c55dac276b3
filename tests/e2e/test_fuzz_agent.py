"""Fuzzing what an agent prints, through `uwf thread step`: a stand-in agent (a shell
that prints a prepared stdout and stderr and exits with a prepared code) prints
garbage, bytes that are not UTF-8, blank lines, CRLF endings, a megabyte of
text, hashes of nodes that exist but are not this step (a Text node, the
workflow, a StepNode of another role), well-formed hashes of nothing, and the
StepNode submitted for this very step, alone or after other lines.

An agent's hash is the last non-empty line of its stdout (SPEC §6). Every step
either moves the head to that StepNode (exit 0) or fails the step cleanly: one
`uwf: error: step failed (...)` line, exit 1, the head where it was, the log
grown by the step's start and failure and verifying, and the CAS untouched; a
secret of `.env` never shows in the error. docs/fuzzing.md has the budgets.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from tests import fuzzkit
from tests.conftest import EXAMPLE
from tests.fuzzkit import Sandbox, fresh

TARGET = "agent stdout"
BINARY_TARGET = "agent stdout (real binary)"
SECRET = "sk-agent-4c1b9e7d2a"
# The stand-in agent: what FUZZ_AGENT_DIR holds, printed as it is (no PATH needed).
SCRIPT = ('/bin/cat "$FUZZ_AGENT_DIR/stdout"; /bin/cat "$FUZZ_AGENT_DIR/stderr" >&2; '
          'exit "$(/bin/cat "$FUZZ_AGENT_DIR/code")"')


class Seeded:
    """The thread, and the hashes an agent might print."""

    def __init__(self, thread: str, start: str, hashes: dict[str, str]) -> None:
        self.thread = thread
        self.start = start
        self.hashes = hashes  # "step" (this step's StepNode), "developer", "text", ...

    def __repr__(self) -> str:
        return f"Seeded({self.thread})"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sandbox, Seeded]:
    sandbox = Sandbox.create(tmp_path_factory.mktemp("agent") / "template")
    sandbox.env["FUZZ_AGENT_DIR"] = str(sandbox.root / "agent")
    (sandbox.root / "agent").mkdir()
    sandbox.write_config(yaml.safe_dump({
        "agents": {"fuzz": {"command": "/bin/sh", "args": ["-c", SCRIPT]}},
        "defaultAgent": "fuzz"}))
    sandbox.write_env_file(f"FUZZ_TOKEN={SECRET}\n".encode())

    def ok(prog: str, *argv: str, stdin: bytes = b"") -> str:
        done = fuzzkit.run_in_process(sandbox, prog, "--json", *argv, stdin=stdin)
        assert done.code == 0, done.describe()
        return done.out.strip()

    workflow = json.loads(ok("uwf", "workflow", "put", str(EXAMPLE)))["workflow"]
    started = json.loads(ok("uwf", "thread", "start", "solve-issue", "-p", "Fix it"))
    thread = started["thread"]
    start = json.loads(ok("uwf", "thread", "show", thread))["head"]
    step = ok("uwf", "agent", "submit", thread, "planner", "--output", "-",
              stdin=b'{"status": "ready", "plan": "Guard the login"}')
    developer = ok("uwf", "agent", "submit", thread, "developer", "--output", "-",
                   stdin=b'{"status": "done", "files": []}')
    bad_output = ok("json-cas", "put", "--type", "StepNode", "-", stdin=json.dumps({
        "start": start, "prev": None, "role": "planner", "agent": "x",
        "output": json.loads(ok("json-cas", "get", developer))["payload"]["output"],
        "detail": json.loads(ok("json-cas", "get", developer))["payload"]["detail"],
    }).encode())
    text = ok("json-cas", "put", "--type", "Text", "-", stdin=b'"not a step"')
    hashes = {"step": step, "developer": developer, "bad-output": bad_output, "text": text,
              "workflow": workflow, "start": start, "missing": "0123456789ABC"}
    return sandbox, Seeded(thread, start, hashes)


# -- generated stdout ----------------------------------------------------------------------

HASH_KEYS = ["step", "developer", "bad-output", "text", "workflow", "start", "missing"]


Output = tuple[list[Any], str, str, bytes, int]  # parts, separator, trailer, stderr, code


@st.composite
def agent_output(draw: st.DrawFn) -> Output:
    """What the stand-in agent does: stdout parts (bytes, or ("hash", key, how it is
    dressed)) joined by a separator and followed by a trailer, stderr, an exit code."""
    part = st.one_of(
        st.binary(max_size=40),
        st.text(max_size=40).map(lambda text: text.encode("utf-8", "surrogatepass")),
        st.sampled_from([b"", b"   ", b"\t", b"\x00", b"\xff\xfe", b"\x1e", b"\x0b",
                         "\u2028".encode(), b"Done.", b"```json", b"{}", b"null"]),
        st.tuples(st.just("hash"), st.sampled_from(HASH_KEYS),
                  st.sampled_from(["plain", "spaced", "lower", "quoted", "longer", "cr"])),
    )
    parts = draw(st.lists(part, max_size=6))
    if draw(st.booleans()):  # most agents end with a hash
        parts.append(("hash", draw(st.sampled_from(["step", "step", *HASH_KEYS])), "plain"))
    if draw(st.integers(0, 19)) == 0:
        parts.insert(0, b"x" * (1 << 20))  # a megabyte of progress output first
    separator = draw(st.sampled_from(["\n", "\r\n"]))
    trailer = draw(st.sampled_from(["", "\n", "\n\n", "  \n", "\r\n", " "]))
    stderr = draw(st.one_of(st.binary(max_size=60), st.just(f"failed: {SECRET}".encode())))
    code = draw(st.sampled_from([0, 0, 0, 0, 1, 2, 127, 255]))
    return parts, separator, trailer, stderr, code


def rendered(seeded: Seeded, output: Output) -> bytes:
    parts, separator, trailer, _, _ = output
    chunks = []
    for part in parts:
        if isinstance(part, tuple):
            _, key, dress = part
            hash_ = seeded.hashes[key]
            chunks.append({"plain": hash_, "spaced": f"  {hash_}\t", "lower": hash_.lower(),
                           "quoted": f'"{hash_}"', "longer": hash_ + "0",
                           "cr": hash_ + "\r"}[dress].encode())
        else:
            chunks.append(part)
    return separator.encode().join(chunks) + trailer.encode()


def honest(output: Output) -> bool:
    """Whether the agent plainly succeeded: exit 0, and this step's hash on the last
    line, with only blanks after it (a step must accept that)."""
    parts, _, _, _, code = output
    if code != 0 or not parts or not isinstance(parts[-1], tuple):
        return False
    _, key, dress = parts[-1]
    return key == "step" and dress in ("plain", "spaced", "cr")


# -- the checks ----------------------------------------------------------------------------

def step(sandbox: Sandbox, seeded: Seeded, output: Output, target: str, *,
         run: fuzzkit.Runner = fuzzkit.run_in_process) -> int:
    _, _, _, stderr, code = output
    stdout = rendered(seeded, output)
    folder = sandbox.root / "agent"
    (folder / "stdout").write_bytes(stdout)
    (folder / "stderr").write_bytes(stderr)
    (folder / "code").write_text(str(code))
    before = sandbox.snapshot()
    stepped = run(sandbox, "uwf", "--json", "thread", "step", seeded.thread, "--timeout", "20")
    kind = fuzzkit.verdict(stepped, target)
    after = sandbox.snapshot()
    if {k: v for k, v in after.items() if k.startswith("cas")} != {
            k: v for k, v in before.items() if k.startswith("cas")}:
        raise fuzzkit.DataChanged(f"a step changed the CAS\n{stepped.describe()}")
    fuzzkit.log_verifies(sandbox, run)
    shown = run(sandbox, "uwf", "--json", "thread", "show", seeded.thread)
    head = fuzzkit.payload(shown)["head"]
    if kind == "accepted":
        assert code == 0, ("a step accepted an agent that failed", stepped.describe())
        assert head == seeded.hashes["step"], stepped.describe()
        assert seeded.hashes["step"].encode() in stdout
    else:
        assert stepped.code == 1, stepped.describe()
        assert stepped.err.startswith("uwf: error: step failed ("), stepped.describe()
        assert head == seeded.start, ("a failed step moved the head", shown.describe())
        assert not honest(output), ("the step refused its own StepNode", stepped.describe())
        events = [json.loads(raw) for raw in _log(after)[len(_log(before)):].splitlines()]
        assert [e["type"] for e in events] == ["thread.step_started", "thread.step_failed"]
    assert SECRET not in stepped.out + stepped.err
    return stepped.code


def _log(files: dict[str, bytes]) -> bytes:
    return b"".join(data for name, data in sorted(files.items()) if name.startswith("events"))


@given(agent_output())
@fuzzkit.fuzz_settings(80)
@example(([("hash", "step", "plain")], "\n", "", b"", 0))
@example(([b"thinking...", b"", ("hash", "step", "spaced")], "\r\n", "  \n", b"", 0))
@example(([("hash", "step", "plain")], "\n", "\n", f"failed: {SECRET}".encode(), 1))
@example(([("hash", "bad-output", "plain")], "\n", "", b"", 0))
@example(([b"\xff\xfe"], "\n", "", b"", 0))
@example(([], "\n", "", b"", 0))
def test_every_agent_stdout_moves_the_head_or_fails_the_step_cleanly(
        template: tuple[Sandbox, Seeded], output: Output) -> None:
    sandbox_template, seeded = template
    with fuzzkit.trying(TARGET), fresh(sandbox_template) as sandbox:
        step(sandbox, seeded, output, TARGET)


@given(agent_output())
@fuzzkit.fuzz_settings(4, binary=True)
def test_the_real_binary_steps_as_main_does(template: tuple[Sandbox, Seeded],
                                            output: Output) -> None:
    sandbox_template, seeded = template
    with (fuzzkit.trying(BINARY_TARGET), fresh(sandbox_template) as first,
          fresh(sandbox_template) as second):
        inside = step(first, seeded, output, TARGET)
        assert step(second, seeded, output, BINARY_TARGET, run=fuzzkit.run_binary) == inside
