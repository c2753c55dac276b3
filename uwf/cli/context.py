"""What a handler gets besides its arguments: the global options and what they open.

A `Context` holds `--store`, `--json` and `--now` for one command. It opens the
store on first use (`Store.open(root, now=..., redact=...)`) and closes it in
`close()`, and builds the secret redactor once; nothing is written to the
process environment, so many commands can run in one process independently.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uwf.redact import Redact
    from uwf.store import Store

# The options every command accepts; no command argument may take these names.
GLOBAL_OPTIONS = ("store", "json", "format", "now")


def process_redactor() -> Redact | None:
    """The redactor for this process's secrets (its environment, the config's `.env`
    and providers), or None when there is nothing to hide."""
    from uwf.config.secrets import load_redactor

    return load_redactor(os.environ)


@dataclass
class Context:
    """The global options of one command; the store they name, opened lazily."""

    store_root: str | None = None  # --store; else UWF_HOME and the defaults
    json: bool = False  # --json
    now: str | None = None  # --now; else UWF_NOW
    # Shown while a read rebuilds absent views (the CLI passes a terminal progress bar).
    progress: Callable[[int, int], None] | None = None
    _store: Store | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        from uwf.engine.clock import clock_from

        clock_from(self.now, os.environ)  # a malformed --now / UWF_NOW: a usage error now

    @functools.cached_property
    def redact(self) -> Redact | None:
        """Masks secrets in the store (via `Store.open`) and in what the CLI prints."""
        return process_redactor()

    @property
    def store(self) -> Store:
        """The store, opened on first use."""
        if self._store is None:
            from uwf.store import Store

            store = Store.open(self.store_root, now=self.now, redact=self.redact)
            store.progress = self.progress
            self._store = store
        return self._store

    def close(self) -> None:
        """Close the store if it was opened; the context can open it again after."""
        if self._store is not None:
            store, self._store = self._store, None
            store.close()
