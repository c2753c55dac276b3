"""The `steps` view: one row per step attempt of every thread, keyed
`<thread>/<stepId>`: the role, the agent uwf resolved for it, the edge prompt,
and how it ended (the StepNode it produced, or why it failed).

What a StepNode cannot say (it is written by the agent) is here: which agent
uwf chose. An incremental rerun compares it, found by the StepNode's hash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import msgspec

from uwf.engine.events import Envelope
from uwf.engine.projection import StructProjection
from uwf.threads.events import (
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
    Usage,
)


class StepState(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    thread: str
    step_id: str
    role: str
    agent: str | None = None  # None for a step taken over by an incremental rerun
    edge_prompt: str | None = None
    started_at: str | None = None
    outcome: str = "running"  # running | stepped | reused | failed
    head: str | None = None  # the StepNode it produced
    status: str | None = None
    reason: str | None = None  # why it failed
    ended_at: str | None = None  # when its `thread.stepped` or `thread.step_failed` came
    message: str | None = None  # a failure's message, its agent's exit status and stderr
    exit_status: int | None = None
    stderr: str | None = None
    reused: str | None = None  # the original StepNode an incremental rerun took over
    usage: Usage | None = None  # what the agent reported it spent (from its detail)
    node: str | None = None  # a failed attempt's StepNode, refused (ThreadStepFailed.node)


_replace = msgspec.structs.replace


class StepsProjection(StructProjection):
    name: ClassVar[str] = "steps"
    # 3: when it ended, and a failure's message and stderr; 4: a refused StepNode; 5: no
    # `thread` column (a thread's steps are a range of the key, `<thread>/`: `key_range`),
    # `head` a sparse column (a step in flight or failed has none: no index entry)
    version: ClassVar[int] = 5
    event_types: ClassVar[frozenset[str]] = frozenset(
        t.type for t in (ThreadStepStarted, ThreadStepped, ThreadStepFailed))
    state_type: ClassVar[type[msgspec.Struct]] = StepState
    columns: ClassVar[tuple[str, ...]] = ("head",)
    types: ClassVar[tuple[str, ...]] = ("text",)
    indexes: ClassVar[tuple[tuple[str, ...], ...]] = (("head", "key"),)
    sparse: ClassVar[tuple[str, ...]] = ("head",)
    # `head`'s index is read by a rerun's and a fork's lookup of a StepNode's step, both
    # before their write: made by the first (uwf/engine/readindex.py)
    indexes_on_read: ClassVar[bool] = True

    def key(self, event: Envelope) -> str:
        data: ThreadStepStarted | ThreadStepped | ThreadStepFailed = event.data
        return f"{event.subject.removeprefix('thread/')}/{data.step_id}"

    def apply(self, state: StepState | None, event: Envelope) -> StepState | None:
        fold = _PLANNED.get(event.type)
        return state if fold is None else fold(state, event)

    def planned(self, event_type: str) -> Callable[[StepState | None, Envelope],
                                                   StepState | None] | None:
        """`apply` for events of one type, for a full replay (uwf/engine/bulkfold.py):
        the same function, without the lookup of the event's type."""
        return _PLANNED.get(event_type)


def _started(state: StepState | None, event: Envelope) -> StepState | None:
    data: ThreadStepStarted = event.data
    return StepState(event.subject.removeprefix("thread/"), data.step_id, data.role,
                     data.agent, data.edge_prompt, event.ts)


def _stepped(state: StepState | None, event: Envelope) -> StepState | None:
    data: ThreadStepped = event.data
    base = state or StepState(event.subject.removeprefix("thread/"), data.step_id, data.role)
    return _replace(base, outcome="reused" if data.reused else "stepped", head=data.head,
                    status=data.status, reused=data.reused, usage=data.usage,
                    ended_at=event.ts)


def _failed(state: StepState | None, event: Envelope) -> StepState | None:
    data: ThreadStepFailed = event.data
    base = state or StepState(event.subject.removeprefix("thread/"), data.step_id, data.role)
    return _replace(base, outcome="failed", reason=data.reason, ended_at=event.ts,
                    message=data.message, exit_status=data.exit_status, stderr=data.stderr,
                    node=data.node)


_PLANNED = {ThreadStepStarted.type: _started, ThreadStepped.type: _stepped,
            ThreadStepFailed.type: _failed}


def thread_steps(thread: str) -> tuple[tuple[str, str, str], ...]:
    """The `where` of a thread's rows in the steps view: its keys, `<thread>/<stepId>`,
    are the range from `<thread>/` up to `<thread>0` (`0` follows `/`), one range of
    the key's own index. (A thread id holds no `/`: uwf mints them as ULIDs.)"""
    return (("key", ">", f"{thread}/"), ("key", "<", f"{thread}0"))
