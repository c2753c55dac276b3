"""The run registry's words, declared once: the lifecycles a run is derived to, and the
two the clock and the archive overlay add. It imports nothing of uwf's, so the CLI
declares its choices from it without loading the engine."""

from __future__ import annotations

from typing import Literal, get_args

Derived = Literal["running", "waiting", "blocked", "failed", "completed", "cancelled",
                  "queued"]
DERIVED: tuple[str, ...] = get_args(Derived)
Lifecycle = Literal["running", "waiting", "blocked", "failed", "completed", "cancelled",
                    "queued", "stalled", "archived"]
LIFECYCLES: tuple[str, ...] = get_args(Lifecycle)
# Which repos a read covers: every repo (home, the default) or the current one.
Scope = Literal["home", "repo"]
SCOPES: tuple[str, ...] = get_args(Scope)

# Pages: the runs `run search|list` and `history` show, the steps `run resume` shows.
DEFAULT_LIMIT = 50
DEFAULT_RECENT = 5
