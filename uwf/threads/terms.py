"""A thread's words, declared once: its states (`waiting`: for an answer to a role's
question), and `active` (idle or running) as
`thread list --status` accepts it. It imports nothing of uwf's, so the CLI declares
its choices from it without loading the engine."""

from __future__ import annotations

from typing import Literal, get_args

State = Literal["idle", "running", "waiting", "blocked", "ended", "killed"]
STATES: tuple[str, ...] = get_args(State)
OPEN_STATES = ("idle", "running")  # what `thread list --status active` means
DONE_STATES = ("ended", "killed")
StatusFilter = Literal["idle", "running", "active", "waiting", "blocked", "ended", "killed"]
