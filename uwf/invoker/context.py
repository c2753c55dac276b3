"""What a handler gets besides its arguments: the global options and what they open.

A `Context` holds `--store`, `--json` and `--now` for one command (and whether its
result is read on a terminal), with the environment and working folder it runs in
(the entry point's: the CLI gives its process's, `uwf.cli.process`), and the commands
it was called among (`commands`: a server it starts serves them). From them it resolves
the command's `Settings` once, on first use, opens the store with them
(`Store.open(settings=..., redact=..., features=...)`, with the features the entry
point listed: by default `uwf.features.FEATURES`) and closes it in `close()`, and
builds the secret redactor once. Nothing below reads the process environment or writes it, so
many commands can run in one process independently, in threads at once, each with
its own environment.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from typing import Protocol

    from uwf.config.settings import Settings
    from uwf.engine.feature import Feature
    from uwf.invoker.spec import Group
    from uwf.redact import Redact
    from uwf.store import Store

    class Meter(Protocol):
        """One progress bar: told (done, total or 0); a line printed `aside` it."""

        def __call__(self, done: int, total: int) -> None: ...

        def aside(self) -> AbstractContextManager[None]: ...

    class Bars(Protocol):
        """Where a long command draws its bars (the CLI's, on a terminal's stderr:
        `uwf.cli.progress.Bars`)."""

        def bar(self, label: str, unit: str = "events", leave: bool = True) -> Meter: ...

# The options every command accepts; no command argument may take these names.
GLOBAL_OPTIONS = ("store", "json", "format", "now")


def redactor_for(environ: Mapping[str, str]) -> Redact | None:
    """The redactor for the secrets of `environ` (its values, the config's `.env` and
    providers), or None when there is nothing to hide."""
    from uwf.config.secrets import load_redactor
    from uwf.config.settings import config_path

    return load_redactor(environ, config_path(environ))


class Context:
    """The global options of one command; the settings and store they name, lazily.

    A plain class (not a dataclass: making one compiles its methods, a cost every
    command would pay at start-up)."""

    def __init__(self, *, store_root: str | None = None, json: bool = False,
                 now: str | None = None, terminal: bool = False,
                 progress: Callable[[int, int], None] | None = None,
                 bars: Bars | None = None, environ: Mapping[str, str],
                 cwd: Path | None,
                 features: Sequence[Feature] | None = None,
                 commands: Group | None = None) -> None:
        from uwf.engine.clock import clock_from

        self.store_root = store_root  # --store; else UWF_HOME and the defaults
        self.json = json  # --json
        self.now = now  # --now; else UWF_NOW
        # The result is read on a terminal (stdout is one, without --json): a list pages
        # by default, a stream prints lines for people (docs/cli.md#output).
        self.terminal = terminal
        # Shown while a read rebuilds absent views (the CLI passes a terminal progress bar).
        self.progress = progress
        # Where a long command draws more bars (`thread run`'s steps, `log verify`'s
        # events): the CLI's when stderr is a terminal; None draws nothing (piped, MCP).
        self.bars = bars
        # The environment and working folder the command runs in (the entry point's:
        # the CLI gives its process's, copied; a cwd of None: it has none).
        self.environ: Mapping[str, str] = environ
        self.cwd: Path | None = cwd
        # The features of the store (None: uwf's, `uwf.features.FEATURES`, loaded when the
        # store is opened, so a command that opens none does not import them).
        self._features = None if features is None else tuple(features)
        self._store: Store | None = None
        # The commands this one was called among (the binary's), which a server it
        # starts offers: `uwf mcp`'s tools, the dashboard's reads and actions.
        self.commands = commands
        clock_from(self.now, self.environ)  # a malformed --now / UWF_NOW: a usage error now

    def __repr__(self) -> str:
        return (f"Context(store_root={self.store_root!r}, json={self.json!r}, "
                f"now={self.now!r}, terminal={self.terminal!r}, cwd={self.cwd!r})")

    @functools.cached_property
    def settings(self) -> Settings:
        """What the environment, working folder and global options decide, resolved on
        first use (a bad UWF_* value is a usage error then, as opening the store was)."""
        from uwf.config.settings import Settings

        return Settings.from_env(self.environ, self.cwd, store=self.store_root, now=self.now)

    @functools.cached_property
    def redact(self) -> Redact | None:
        """Masks secrets in the store (via `Store.open`) and in what the CLI prints."""
        return redactor_for(self.environ)

    @property
    def features(self) -> tuple[Feature, ...]:
        """The features of the store this context opens, as the entry point listed them."""
        if self._features is None:
            from uwf.features import FEATURES

            self._features = FEATURES
        return self._features

    @property
    def store(self) -> Store:
        """The store, opened on first use."""
        if self._store is None:
            from uwf.store import Store

            redact = self.redact
            store = Store.open(settings=self.settings, redact=redact, features=self.features)
            store.progress = self.progress
            self._store = store
        return self._store

    def close(self) -> None:
        """Close the store if it was opened; the context can open it again after."""
        if self._store is not None:
            store, self._store = self._store, None
            store.close()
