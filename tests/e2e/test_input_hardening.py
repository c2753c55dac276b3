"""Hostile and extreme input is refused with one line, before anything is written.

A fuzz corpus of inputs that once ended in "internal error" (or cost seconds and
gigabytes): YAML alias bombs, nesting thousands deep, numbers beyond float64,
non-UTF-8 bytes, YAML values JSON has no word for (dates, `!!binary`, `!!set`),
and clock or timeout values whose dates do not exist. Each runs through the
real console scripts against a temporary store; each must exit 1 or 2 with one
`<prog>: error:` line, and leave the log and the CAS byte for byte as they were.
The limits are in docs/cli.md#limits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.conftest import EXAMPLE, Cli, refused, run_bytes, snapshot
from uwf.engine.clock import MAX_INSTANT_MS, format_ts

THREAD = "01J7K9M2XNPQR5VWBCDF8G3H4T"




def workflow(meta: str = "{type: object}", *, name: str = "x", extra: str = "") -> str:
    return f"name: {name}\n{extra}roles:\n  a:\n    meta: {meta}\ngraph: {{$START: {{_: a}}}}\n"


def nested(depth: int, opening: str = "[", closing: str = "]") -> str:
    return opening * depth + closing * depth


def nested_schema(depth: int) -> str:
    text = "{}"
    for _ in range(depth):
        text = "{items: " + text + "}"
    return text


def billion_laughs() -> str:
    """Nine strings, then seven levels of nine aliases each to the level below:
    about 500 bytes that expand to 9**8 (43 million) strings."""
    levels = ["      l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, 8):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        levels.append(f"      l{level}: &l{level} [{refs}]")
    return ("name: lol\nroles:\n  a:\n    meta:\n      type: object\n"
            + "\n".join(levels) + "\ngraph: {$START: {_: a}}\n")


@pytest.fixture
def seeded(cli: Cli) -> Cli:
    """A store holding one workflow, so the CAS has builtins and a workflow to keep."""
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    return cli


# -- 1. YAML alias expansion and file size ---------------------------------------------

def test_billion_laughs_is_refused_at_once_and_writes_nothing(seeded: Cli,
                                                             tmp_path: Path) -> None:
    path = tmp_path / "lol.yaml"
    path.write_text(billion_laughs())
    assert path.stat().st_size < 600
    before = snapshot(seeded.home)
    result = seeded.run("workflow", "put", str(path), timeout=30)
    line = refused(result, (1,), "lol.yaml", "more than 100,000 nodes once aliases are expanded",
                   "docs/cli.md#limits")
    assert snapshot(seeded.home) == before, line


def test_a_self_referring_alias_is_refused(seeded: Cli, tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text(workflow("{type: object, default: &me [*me]}"))
    before = snapshot(seeded.home)
    refused(seeded.run("workflow", "put", str(path)), (1,), "alias")
    assert snapshot(seeded.home) == before


def test_a_file_over_one_mib_is_refused_before_parsing(seeded: Cli, tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    # Valid YAML, a real workflow, just padded with a long comment.
    path.write_text(EXAMPLE.read_text() + "#" + "x" * (1 << 20) + "\n")
    before = snapshot(seeded.home)
    # A file given on the command line beyond its limit is a usage error (exit 2).
    refused(seeded.run("workflow", "put", str(path)), (2,), "more than 1 MiB")
    assert snapshot(seeded.home) == before


def test_a_workflow_with_aliases_within_the_limits_is_accepted(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "shared.yaml"
    path.write_text("name: shared\nroles:\n  a: &role {goal: Do it., meta: {type: object}}\n"
                    "  b: *role\n  c: {<<: *role, goal: Check it.}\n"
                    "graph: {$START: {_: a}, a: {_: b}, b: {_: c}}\n")
    result = cli.run("workflow", "put", str(path))
    assert result.code == 0, result.err
    shown = json.loads(cli.run("workflow", "show", "shared").out)["definition"]
    assert shown["roles"]["c"]["goal"] == "Check it."
    assert shown["roles"]["b"] == shown["roles"]["a"]


def test_nesting_at_the_limit_is_accepted(cli: Cli, tmp_path: Path) -> None:
    # The document, roles and role a are 3 mappings; nested_schema(n) is n + 1 more.
    path = tmp_path / "deep.yaml"
    path.write_text(workflow(nested_schema(196)))
    assert cli.run("workflow", "put", str(path)).code == 0
    path.write_text(workflow(nested_schema(197)))
    refused(cli.run("workflow", "put", str(path)), (1,), "nested more than 200 deep")
    assert cli.cas("hash", "--self", "-", stdin=nested(200)).code == 0
    refused(cli.cas("hash", "--self", "-", stdin=nested(201)), (2,), "nested more than 200",
            prog="json-cas")


# -- 2. the fuzz corpus: every input is refused in one line, nothing written ----------------

@dataclass(frozen=True)
class Case:
    prog: str
    args: tuple[str, ...]
    stdin: bytes = b""
    file: bytes | None = None  # written to a file whose path replaces "FILE" in args
    codes: tuple[int, ...] = (1, 2)
    says: str = ""


def put(text: str, says: str = "") -> Case:
    return Case("uwf", ("workflow", "put", "FILE"), file=text.encode(), codes=(1,), says=says)


def cas_put(data: bytes, says: str = "") -> Case:
    return Case("json-cas", ("put", "--type", "Text", "-"), stdin=data, codes=(2,), says=says)


def cas_self(data: bytes, says: str = "") -> Case:
    return Case("json-cas", ("hash", "--self", "-"), stdin=data, codes=(2,), says=says)


def submit(data: bytes, says: str = "") -> Case:
    return Case("uwf", ("agent", "submit", THREAD, "planner", "--output", "-"), stdin=data,
                codes=(2,), says=says)


DEEP_JSON = nested(5000).encode()
BIG_INT = b"1" * 5000
CORPUS: dict[str, Case] = {
    # JSON on stdin or from a file: nesting, numbers, encodings.
    "json-5000-deep-put": cas_put(DEEP_JSON, "nested more than 200 deep"),
    "json-5000-deep-hash": cas_self(DEEP_JSON, "nested more than 200 deep"),
    "json-600-deep-hash": cas_self(nested(600).encode(), "nested more than 200 deep"),
    "json-600-deep-objects": cas_self(b'{"a":' * 600 + b"1" + b"}" * 600,
                                      "nested more than 200 deep"),
    "json-5000-deep-submit": submit(DEEP_JSON, "nested more than 200 deep"),
    "json-5000-digit-int": cas_self(BIG_INT, "out of range"),
    "json-5000-digit-int-file": Case("json-cas", ("hash", "--self", "FILE"), file=BIG_INT,
                                     codes=(2,), says="out of range"),
    "json-400-digit-int": cas_self(b"9" * 400, "out of range"),
    "json-1e400": cas_self(b"[1e400]", "out of range"),
    "json-minus-1e400": cas_self(b'{"x": -1e400}', "out of range"),
    "json-NaN": cas_self(b"NaN", "NaN"),
    "json-Infinity": cas_self(b"[Infinity]", "Infinity"),
    "json-big-int-submit": submit(b'{"status": ' + BIG_INT + b"}", "out of range"),
    "json-nan-submit": submit(b'{"status": NaN}', "NaN"),
    "stdin-not-utf8-put": cas_put(b'"\xff\xfe"', "not UTF-8"),
    "stdin-not-utf8-hash": cas_self(b'"caf\xe9"', "not UTF-8"),
    "stdin-not-utf8-submit": submit(b'{"status": "\xc3"}', "not UTF-8"),
    "json-lone-surrogate": cas_put(b'"\\ud800"', "surrogate"),
    # Workflow YAML: nesting, numbers, YAML-only types, encodings.
    "yaml-5000-deep": put(workflow(nested(5000))),
    "yaml-meta-500-deep": put(workflow(nested_schema(500)), "nested more than 200 deep"),
    "yaml-meta-250-deep": put(workflow(nested_schema(250)), "nested more than 200 deep"),
    "yaml-5000-digit-int": put(workflow("{type: object, default: " + "1" * 5000 + "}"),
                               "out of range"),
    "yaml-400-digit-int": put(workflow("{type: integer, maximum: " + "9" * 400 + "}"),
                              "out of range"),
    "yaml-1e400": put(workflow("{type: number, maximum: 1.0e+400}"), "out of range"),
    "yaml-inf": put(workflow("{type: number, maximum: .inf}"), "out of range"),
    "yaml-nan": put(workflow("{type: number, default: .nan}"), "out of range"),
    "yaml-date-in-meta": put(workflow("{type: string, default: 2024-01-01}"), "date"),
    "yaml-datetime-in-meta": put(workflow("{type: string, default: 2024-01-01T10:00:00Z}"),
                                 "date"),
    "yaml-binary-in-meta": put(workflow("{type: object, default: !!binary aGVsbG8=}"),
                               "binary"),
    "yaml-set-in-meta": put(workflow("{type: object, default: !!set {a, b}}"), "set"),
    "yaml-omap-in-meta": put(workflow("{type: object, default: !!omap [a: 1]}"), "omap"),
    "yaml-date-description": put(workflow(extra="description: 2024-01-01\n"), "date"),
    "yaml-int-key-in-meta": put(workflow("{type: object, properties: {1: {type: string}}}"),
                                "roles.a.meta.properties: key 1 is not a string"),
    "yaml-lone-surrogate": put(workflow(extra='description: "\\ud800"\n'), "Unicode"),
    "yaml-not-utf8": Case("uwf", ("workflow", "put", "FILE"), file=b"name: caf\xe9\n",
                          codes=(2,), says="UTF-8"),
    "yaml-unknown-tag": put(workflow("!foo {type: object}"), "!foo"),
}


@pytest.mark.parametrize("case", CORPUS.values(), ids=CORPUS.keys())
def test_the_fuzz_corpus_is_refused_in_one_line(seeded: Cli, tmp_path: Path,
                                                 case: Case) -> None:
    args = list(case.args)
    if case.file is not None:
        path = tmp_path / "input"
        path.write_bytes(case.file)
        args = [str(path) if arg == "FILE" else arg for arg in args]
    before = snapshot(seeded.home)
    result = run_bytes(seeded, case.prog, *args, stdin=case.stdin)
    refused(result, case.codes, case.says, prog=case.prog)
    assert snapshot(seeded.home) == before


# -- 3. extreme numbers on the command line and in the environment -------------------------

@pytest.mark.parametrize(("argv", "says"), [
    (["thread", "step", THREAD, "--timeout", "nan"], "31,536,000"),
    (["thread", "step", THREAD, "--timeout", "inf"], "31,536,000"),
    (["thread", "step", THREAD, "--timeout", "1e12"], "31,536,000"),
    (["thread", "run", THREAD, "--timeout", "31536001"], "31,536,000"),
    (["--now", "99999999999999999", "workflow", "list"], "between 1970-01-01 and 9999-12-31"),
    (["--now", "-99999999999999", "workflow", "list"], "between 1970-01-01 and 9999-12-31"),
    (["--now", "-1", "workflow", "list"], "between 1970-01-01 and 9999-12-31"),
    (["--now", "1" * 5000, "workflow", "list"], "between 1970-01-01 and 9999-12-31"),
    (["--now", "1969-12-31T23:59:59Z", "workflow", "list"], "between 1970-01-01"),
    (["--now", "9999-12-31T23:00:00-05:00", "workflow", "list"], "9999-12-31"),
    (["--now", "\u00b2", "workflow", "list"], "invalid time"),
])
def test_out_of_range_numbers_are_usage_errors(seeded: Cli, argv: list[str], says: str) -> None:
    before = snapshot(seeded.home)
    refused(seeded.run(*argv), (2,), says)
    assert snapshot(seeded.home) == before


@pytest.mark.parametrize(("name", "value", "says"), [
    ("UWF_NOW", "99999999999999999", "between 1970-01-01 and 9999-12-31"),
    ("UWF_LOCK_TIMEOUT", "nan", "a finite number from 0 to 3,600"),
    ("UWF_LOCK_TIMEOUT", "inf", "a finite number from 0 to 3,600"),
    ("UWF_LOCK_TIMEOUT", "1e400", "a finite number from 0 to 3,600"),
    ("UWF_LOCK_TIMEOUT", "3601", "a finite number from 0 to 3,600"),
    ("UWF_SEGMENT_BYTES", "1" * 5000, "UWF_SEGMENT_BYTES"),
])
def test_out_of_range_environment_values_are_usage_errors(seeded: Cli, name: str, value: str,
                                                          says: str) -> None:
    before = snapshot(seeded.home)
    seeded.env[name] = value
    refused(seeded.run("workflow", "put", str(EXAMPLE)), (2,), name, says)
    assert snapshot(seeded.home) == before


def test_the_largest_values_accepted_still_work(cli: Cli) -> None:
    cli.env["UWF_LOCK_TIMEOUT"] = "3600"
    last = "9999-12-31T23:59:59.999Z"
    put = cli.run("--now", last, "workflow", "put", str(EXAMPLE))
    assert put.code == 0, put.err
    assert json.loads(cli.run("log", "tail", "-n", "1").out)["ts"] == last
    start = cli.run("--now", "0", "thread", "start", "solve-issue", "-p", "x")
    assert start.code == 0, start.err


@given(st.integers(min_value=0, max_value=MAX_INSTANT_MS))
@example(0)
@example(MAX_INSTANT_MS)
@example(951_782_400_000)  # 2000-02-29
def test_format_ts_is_rfc3339_for_every_instant_in_range(ms: int) -> None:
    expected = datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert format_ts(ms) == f"{expected}.{ms % 1000:03d}Z"


ERA_MS = 146_097 * 86_400_000  # 400 Gregorian years: the calendar repeats


@given(st.integers(min_value=0, max_value=MAX_INSTANT_MS), st.integers(1, 100))
@example(MAX_INSTANT_MS, 1)  # now + a year's timeout lands in year 10000
def test_format_ts_never_raises_past_year_9999(ms: int, eras: int) -> None:
    year, rest = format_ts(ms).split("-", 1)
    assert format_ts(ms + eras * ERA_MS) == f"{int(year) + 400 * eras}-{rest}"


@pytest.mark.parametrize(("ms", "text"), [
    # A deadline one year (plus grace) after the last instant --now accepts.
    (MAX_INSTANT_MS + 31_536_000_000 + 30_000, "10000-12-31T00:00:29.999Z"),
    # What `--timeout 1e12` once stored: a deadline in year 33658.
    (1_000_000_000_000_000, "33658-09-27T01:46:40.000Z"),
    (-1, "1969-12-31T23:59:59.999Z"),
])
def test_format_ts_extremes(ms: int, text: str) -> None:
    assert format_ts(ms) == text


def test_a_deadline_stored_out_of_range_by_old_code_is_taken_over(cli: Cli) -> None:
    from uwf.engine.events import NewEvent
    from uwf.engine.journal import Outcome
    from uwf.store import Store
    from uwf.threads.events import ThreadStepStarted

    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    thread = json.loads(cli.run("thread", "start", "solve-issue", "-p", "x").out)["thread"]
    store = Store.open(cli.home)
    try:  # what `--timeout 1e12` recorded before timeouts were bounded
        store.journal.write(lambda views: Outcome([NewEvent(f"thread/{thread}", ThreadStepStarted(
            "01J7K9M2XNPQR5VWBCDF8G3H4V", "planner", "x", "mock", 10**15))], None))
    finally:
        store.close()
    # No step could ever meet that deadline: the next step takes it over at once.
    mock = f"uwf-mock {EXAMPLE.parent / 'mock-solve-issue.yaml'}"
    stepped = cli.run("thread", "step", thread, "--agent", mock)
    assert stepped.code == 0, stepped.err
    tail = [json.loads(line) for line in
            cli.run("log", "tail", "-n", "3", "--subject", f"thread/{thread}").out.splitlines()]
    assert [event["type"] for event in tail] == [
        "thread.step_failed", "thread.step_started", "thread.stepped"]
    assert tail[0]["data"]["reason"] == "abandoned"
    assert "33658-09-27T01:46:40.000Z" in tail[0]["data"]["message"]


# -- 4. workflow put validates everything before its first write ---------------------------

@pytest.mark.parametrize("name", ["café", "x\u00b2", "\u0661\u0662"])
def test_a_name_the_schema_refuses_is_refused_before_any_write(cli: Cli, tmp_path: Path,
                                                                name: str) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(workflow(name=json.dumps(name)), "utf-8")
    refused(cli.run("workflow", "put", str(path)), (1,), "is not a valid name")
    assert not (cli.home / "cas").exists()  # not even the built-in schemas
    assert cli.log_bytes() == b""
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    before = snapshot(cli.home)
    refused(cli.run("workflow", "put", str(path)), (1,), "is not a valid name")
    assert snapshot(cli.home) == before


def test_a_payload_the_workflow_schema_refuses_writes_nothing(
        cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should compile and the schemas ever disagree, put refuses with the schemas'
    words before writing a node."""
    from uwf.cas.store import Cas
    from uwf.errors import Rejected
    from uwf.language.compile import compile_workflow as original
    from uwf.store import Store
    from uwf.workflows import service as workflows

    def lax(cas: Cas, document: Any) -> tuple[dict[str, Any], list[Any]]:
        payload, schemas = original(cas, document)
        return {**payload, "extra": True}, [*schemas, {"type": "objekt"}]

    store = Store.open(cli.home)
    try:
        workflows.put_workflow(store, EXAMPLE)
        before = snapshot(cli.home)
        # (put imports the compiler when it runs: patched where it is defined)
        monkeypatch.setattr("uwf.language.compile.compile_workflow", lax)
        with pytest.raises(Rejected, match="Workflow schema") as caught:
            workflows.put_workflow(store, EXAMPLE)
        assert "'extra' was unexpected" in caught.value.what
        assert "role schema" in caught.value.what
        assert snapshot(cli.home) == before
    finally:
        store.close()


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 0.0, -1.0, 1e12])
def test_step_thread_refuses_a_timeout_out_of_range_from_python(timeout: float) -> None:
    from uwf.errors import UsageError
    from uwf.store import Store
    from uwf.threads.stepping import step_thread

    store = Store.memory()
    with pytest.raises(UsageError, match="timeout must be more than 0 and at most 31,536,000"):
        step_thread(store, "01J7K9M2XNPQR5VWBCDF8G3H4V", timeout=timeout, settings=store.settings)
