"""The queue's words and bounds, declared once: the statuses, the job registry's words
for them, and the priority range. It imports nothing of uwf's, so the CLI declares its
arguments from it without loading the engine (`uwf --help` stays cheap)."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

import msgspec

# `waiting`: its run waits for an answer to a question (docs/queue.md#waiting).
Status = Literal["ready", "leased", "drained", "parked", "cancelled", "waiting"]
STATUSES: tuple[str, ...] = get_args(Status)
# The job registry's words for the same states.
JOB_WORDS = {"ready": "pending", "leased": "running", "drained": "completed",
             "parked": "error", "cancelled": "cancelled", "waiting": "waiting"}
ALIASES = {job: status for status, job in JOB_WORDS.items()}
# A status or its job word, as a command accepts one (tests/e2e/test_layers.py checks the
# two lists agree).
StatusWord = Literal["ready", "leased", "drained", "parked", "cancelled", "waiting",
                     "pending", "running", "completed", "error"]

# Priorities are integers in this range (lower runs first): they are SQLite integers,
# and a range this wide leaves room for any scheme an operator has in mind.
MIN_PRIORITY = -1_000_000_000
MAX_PRIORITY = 1_000_000_000
Priority = Annotated[int, msgspec.Meta(ge=MIN_PRIORITY, le=MAX_PRIORITY)]
