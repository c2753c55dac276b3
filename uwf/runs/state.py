"""A run's whole state (SPEC §7): what `uwf.runs.rules.evolve` folds, what the `runs`
view stores, what `log verify` follows and what the run commands' deciders read.

A run is a thread: its record holds the thread's state (`uwf.threads.state`, folded by
the threads' `evolve`) and what operators filed on it (archive, rerun provenance), with
its title, the steps an incremental rerun took over, the usage its steps reported and
the record's running digest. Pure: no store, no clock, no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from uwf.engine.events import GENESIS_PREV
from uwf.threads.events import Usage
from uwf.threads.state import ThreadState

TITLE_CHARS = 80


class RunPhase(NamedTuple):
    """A run as its transition table sees it: its overlay and whether a rerun's link
    names it."""

    overlay: str = "unarchived"
    linked: bool = False


class Provenance(msgspec.Struct, frozen=True, rename="camel"):
    rerun_of: str
    rerun_of_repo: str
    origin_run_id: str
    generation: int
    reason: str
    incremental: bool = False


class RunUsage(msgspec.Struct, frozen=True, rename="camel"):
    """The usage the run's accepted steps reported, summed: a field stays None until
    a step reports it (unknown is not 0)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    reported_steps: int = 0  # accepted steps that reported any usage


class RunState(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    thread: ThreadState
    title: str
    inputs_digest: str
    archived: bool = False
    archived_at: str | None = None
    archive_reason: str | None = None
    provenance: Provenance | None = None
    reused_steps: int = 0  # steps an incremental rerun took over from its original
    usage: RunUsage | None = None  # None until a step reports usage
    # A running digest of every event folded into this record, in log order (see
    # `fingerprint`): the record's sourceFingerprint.
    source_fingerprint: str = GENESIS_PREV

    @property
    def phase(self) -> RunPhase:
        """The run as its transition table (uwf/runs/rules.py) sees it."""
        return RunPhase("archived" if self.archived else "unarchived",
                        self.provenance is not None)


def add_usage(total: RunUsage | None, step: Usage) -> RunUsage:
    """`total` with one more step's reported usage."""
    total = total or RunUsage()

    def plus(have: float | None, more: float | None) -> float | None:
        return have if more is None else more if have is None else have + more

    tokens_in = plus(total.input_tokens, step.input_tokens)
    tokens_out = plus(total.output_tokens, step.output_tokens)
    return RunUsage(None if tokens_in is None else int(tokens_in),
                    None if tokens_out is None else int(tokens_out),
                    plus(total.cost, step.cost), total.reported_steps + 1)


def title_of(prompt: str) -> str:
    """The first non-empty line of the prompt, at most 80 characters."""
    for line in prompt.splitlines():
        if line.strip():
            return line.strip()[:TITLE_CHARS]
    return ""
