"""The per-run archive's lines (archive-directory-layout seed), mapped from thread events.

A run is a thread. Its `transitions.jsonl` holds six kinds of line, each naming
the log line it came from (`seq`, `event_id`) so an auditor can go back to the log:

- `run_start` (`thread.started`), always the first line;
- `transition`: a node (a role) changes state: `to: running` when a step starts,
  then `done`, `failed` or `blocked`;
- `node_attempt`: one finished attempt of a node, numbered per role (the role's
  first step is attempt 1, its next one attempt 2, ...);
- `question` (`thread.asked`): a role asks a person, and `answer` (`thread.answered`,
  or `thread.timed_out` with `timed_out`): the archive keeps both;
- `run_end` (`thread.ended`, reason `end` or `killed`), the last line.

Everything here is pure: `lines_for(state, event)` maps one event given the run's
state so far, `fold(state, line)` is that state's next value, `summary(state)` the
seed's `summary.json`. Rebuilding a run's state is `fold` over its own lines, so a
sync needs nothing beyond the archive folder and the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal, TypedDict

import msgspec

from uwf.engine.clock import format_ts, parse_instant
from uwf.engine.events import Envelope
from uwf.errors import UsageError
from uwf.threads.events import (
    ThreadAnswered,
    ThreadAsked,
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
    ThreadTimedOut,
)
from uwf.threads.rules import kind_of, outside_life

# The seed's partition key: what a run id must be before it becomes a folder name.
RUN_ID_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$"
_RUN_ID = re.compile(RUN_ID_PATTERN)
# The event types an archive maps; every other event (run.*, queue.*, ...) is not
# part of a run's execution and leaves no line.
MAPPED_TYPES = frozenset(t.type for t in (ThreadStarted, ThreadStepStarted, ThreadStepped,
                                          ThreadStepFailed, ThreadBlocked, ThreadEnded,
                                          ThreadAsked, ThreadAnswered, ThreadTimedOut))
# summary.json's `outcome`: the first two for a run that reached $END, the others for
# a killed one (by what it was doing when killed).
OUTCOMES = ("clean", "clean_with_flake", "blocked", "failed", "cancelled")
START = "$START"

NodeState = Literal["pending", "running", "done", "failed", "blocked"]
Target = Literal["running", "done", "failed", "blocked"]


def check_run_id(run_id: str) -> None:
    """Refuse what cannot be a run folder's name (the seed's pattern): a usage error."""
    if not _RUN_ID.match(run_id):
        raise UsageError(f"{run_id!r} is not a run id (the archive's pattern is "
                         f"{RUN_ID_PATTERN})", "give a thread's id")


def is_run_id(name: str) -> bool:
    return _RUN_ID.match(name) is not None


class _Line(msgspec.Struct, frozen=True, forbid_unknown_fields=True,
            tag_field="event", omit_defaults=True):
    """What every line starts with: when, which log line, which run."""

    ts: str
    seq: int
    event_id: str
    run_id: str


class RunStart(_Line, frozen=True, tag="run_start"):
    workflow: str
    name: str
    repo: str
    fork_of: str | None
    head: str | None


class Transition(_Line, frozen=True, tag="transition"):
    """A node's state change; the fields after `step` depend on `to` (docs/archive.md)."""

    node: str
    from_: NodeState = msgspec.field(name="from")
    to: Target
    attempt: int
    step: str | None
    agent: str | None = None  # to running
    status: str | None = None  # to done
    head: str | None = None  # to done
    reason: str | None = None  # to failed, blocked
    message: str | None = None  # to failed, blocked


class NodeAttempt(_Line, frozen=True, tag="node_attempt"):
    """One finished attempt: its result, when it started and how long it took."""

    node: str
    attempt: int
    step: str
    result: Literal["done", "failed"]
    started: str
    duration_ms: int
    agent: str | None = None
    reason: str | None = None  # failed
    reused: str | None = None  # an incremental rerun took the step over: no agent ran


class Question(_Line, frozen=True, tag="question"):
    """A role's question to a person: the step that asked, the question, its answer's
    schema node and when it is due (docs/threads.md#a-human-in-the-loop)."""

    node: str
    step: str
    question: str
    answer_schema: str
    due: str | None = None


class Answer(_Line, frozen=True, tag="answer"):
    """The answer to step `step`'s question (its node, who gave it), or `timed_out`."""

    step: str
    answer: str | None = None
    by: str | None = None
    timed_out: bool = False


class RunEnd(_Line, frozen=True, tag="run_end"):
    reason: str
    note: str
    outcome: str
    exit_code: int


Line = RunStart | Transition | NodeAttempt | Question | Answer | RunEnd
_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[Line] = msgspec.json.Decoder(Line)


def encode(line: Line) -> bytes:
    """One line of transitions.jsonl, with its newline."""
    return _encoder.encode(line) + b"\n"


def decode(raw: bytes) -> Line:
    """A line (without newline); msgspec.ValidationError / DecodeError when it is not one."""
    return _decoder.decode(raw)


# -- a run's state, folded from its lines --------------------------------------------

class InFlight(msgspec.Struct, frozen=True):
    """An attempt that started and has not finished."""

    node: str
    attempt: int
    started: str
    agent: str | None


class RunFold(msgspec.Struct, frozen=True):
    """What the lines so far say about a run: enough to map its next event and to
    write its summary."""

    run_id: str
    started: str
    last_seq: int
    lines: int = 0
    nodes: dict[str, NodeState] = {}  # node -> state, in first-seen order
    attempts: dict[str, int] = {}  # node -> attempts, in first-attempt order
    flake_retries: int = 0
    failed_attempts: int = 0
    in_flight: dict[str, InFlight] = {}  # step id -> its attempt
    end: RunEnd | None = None

    @property
    def ended(self) -> bool:
        return self.end is not None


_replace = msgspec.structs.replace


def fold(state: RunFold | None, line: Line) -> RunFold:
    """The run's state after `line`; a line before `run_start` is a ValueError."""
    if isinstance(line, RunStart):
        if state is not None:
            raise ValueError("a second run_start")
        return RunFold(line.run_id, line.ts, line.seq, lines=1)
    if state is None:
        raise ValueError(f"{type(line).__name__} before run_start")
    state = _replace(state, last_seq=line.seq, lines=state.lines + 1)
    if isinstance(line, Transition):
        nodes = {**state.nodes, line.node: line.to}
        if line.to != "running":
            flights = {step: f for step, f in state.in_flight.items() if step != line.step}
            return _replace(state, nodes=nodes, in_flight=flights)
        attempts = {**state.attempts, line.node: line.attempt}
        flights = {**state.in_flight, line.step or "": InFlight(line.node, line.attempt,
                                                                line.ts, line.agent)}
        retried = state.flake_retries + (line.from_ == "failed")
        return _replace(state, nodes=nodes, attempts=attempts, in_flight=flights,
                        flake_retries=retried)
    if isinstance(line, NodeAttempt):
        return _replace(state, failed_attempts=state.failed_attempts
                        + (line.result == "failed"))
    if isinstance(line, Question | Answer):
        return state
    return _replace(state, end=line)


def fold_all(lines: Iterable[Line], state: RunFold | None = None) -> RunFold | None:
    for line in lines:
        state = fold(state, line)
    return state


# -- thread events -> lines ----------------------------------------------------------

class _Where(TypedDict):
    """The fields every line takes from its event."""

    ts: str
    seq: int
    event_id: str
    run_id: str


def lines_for(state: RunFold | None, event: Envelope) -> list[Line]:
    """The lines one thread event adds to its run, given the run's lines so far. An
    event outside the thread's life in the transition table (uwf/threads/rules.py:
    before the start, a second start, after the end; `uwf log verify` names it) adds
    none."""
    data = event.data
    kind = kind_of(data)
    if kind is None or outside_life(kind, started=state is not None,
                                    done=state is not None and state.ended):
        return []
    run_id = event.subject.removeprefix("thread/")
    where = _Where(ts=event.ts, seq=event.seq, event_id=event.id, run_id=run_id)
    if isinstance(data, ThreadStarted):
        return [RunStart(**where, workflow=data.workflow, name=data.name, repo=data.repo,
                         fork_of=data.fork_of, head=data.head)]
    assert state is not None  # outside_life lets nothing else in before the start
    if isinstance(data, ThreadStepStarted):
        return [_running(state, where, data.role, data.step_id, data.agent)]
    if isinstance(data, ThreadStepped):
        if kind == "reused":
            # An incremental rerun took the step over: an attempt that started and
            # finished at once, with no agent.
            started = _running(state, where, data.role, data.step_id, None)
            state = fold(state, started)
            return [started, *_finished(state, where, data)]
        return _finished(state, where, data)
    if isinstance(data, ThreadStepFailed):
        return _finished(state, where, data)
    if isinstance(data, ThreadBlocked):
        node = data.role or START
        return [Transition(**where, node=node, from_=_state_of(state, node), to="blocked",
                           attempt=state.attempts.get(node, 0), step=None,
                           reason=data.reason, message=data.message)]
    if isinstance(data, ThreadAsked):
        due = None if data.deadline_ms is None else format_ts(data.deadline_ms)
        return [Question(**where, node=data.role, step=data.step_id, question=data.question,
                         answer_schema=data.answer_schema, due=due)]
    if isinstance(data, ThreadAnswered):
        return [Answer(**where, step=data.step_id, answer=data.answer, by=data.by or None)]
    if isinstance(data, ThreadTimedOut):
        return [Answer(**where, step=data.step_id, timed_out=True)]
    if isinstance(data, ThreadEnded):
        outcome = outcome_of(state, data.reason)
        return [RunEnd(**where, reason=data.reason, note=data.note, outcome=outcome,
                       exit_code=0 if outcome.startswith("clean") else 1)]
    return []


def _state_of(state: RunFold, node: str) -> NodeState:
    return state.nodes.get(node, "pending")


def _running(state: RunFold, where: _Where, node: str, step: str,
             agent: str | None) -> Transition:
    return Transition(**where, node=node, from_=_state_of(state, node), to="running",
                      attempt=state.attempts.get(node, 0) + 1, step=step, agent=agent)


def _finished(state: RunFold, where: _Where,
              data: ThreadStepped | ThreadStepFailed) -> list[Line]:
    """The attempt's record, then the node's new state."""
    node = data.role
    flight = state.in_flight.get(data.step_id)
    attempt = flight.attempt if flight is not None else state.attempts.get(node, 0)
    started = flight.started if flight is not None else where["ts"]
    agent = flight.agent if flight is not None else None
    duration = max(0, parse_instant(where["ts"]) - parse_instant(started))
    if isinstance(data, ThreadStepped):
        return [NodeAttempt(**where, node=node, attempt=attempt, step=data.step_id,
                            result="done", started=started, duration_ms=duration,
                            agent=agent, reused=data.reused),
                Transition(**where, node=node, from_=_state_of(state, node), to="done",
                           attempt=attempt, step=data.step_id, status=data.status,
                           head=data.head)]
    return [NodeAttempt(**where, node=node, attempt=attempt, step=data.step_id,
                        result="failed", started=started, duration_ms=duration, agent=agent,
                        reason=data.reason),
            Transition(**where, node=node, from_=_state_of(state, node), to="failed",
                       attempt=attempt, step=data.step_id, reason=data.reason,
                       message=data.message)]


def outcome_of(state: RunFold, reason: str) -> str:
    """`clean` / `clean_with_flake` for a run that reached $END (with no failed attempt /
    with some); a killed run is `blocked`, `failed` or `cancelled` by where it stood."""
    if reason == "end":
        return "clean_with_flake" if state.failed_attempts else "clean"
    if "blocked" in state.nodes.values():
        return "blocked"
    if "failed" in state.nodes.values():
        return "failed"
    return "cancelled"


def summary(state: RunFold) -> dict[str, Any]:
    """summary.json: the seed's row of history_index.json, in its key order."""
    end = state.end
    if end is None:
        raise ValueError(f"run {state.run_id} has not ended")
    finals = list(state.nodes.values())
    return {
        "run_id": state.run_id,
        "started": state.started,
        "ended": end.ts,
        "duration_s": max(0, parse_instant(end.ts) - parse_instant(state.started)) / 1000,
        "outcome": end.outcome,
        "total_nodes": len(state.nodes),
        "done": finals.count("done"),
        "failed": finals.count("failed"),
        "blocked": finals.count("blocked"),
        "total_attempts": sum(state.attempts.values()),
        "flake_retries": state.flake_retries,
        "exit_code": end.exit_code,
        "failed_nodes": [node for node, final in state.nodes.items() if final == "failed"],
        "node_attempts": dict(state.attempts),
    }
