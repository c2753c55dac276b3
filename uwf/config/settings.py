"""What the process environment and the working folder decide, resolved once at the edge.

An entry point (the CLI's `Context`, the agent kit, `uwf-subflow`) builds one
`Settings` from its environment, its working folder and its argv, and hands it
down: the `Store` carries it (`store.settings`), and nothing below the entry
points reads `os.environ` or the working folder (tests/e2e/test_layers.py checks it).
So `main(argv)` can run in many threads at once, each with its own answers.

`process_settings()` is the one place below the entry points that reads this
process's environment and working folder: `Store.open(root)` and `Store.memory()`
use it when given no settings, a convenience for tests, benchmarks and embedding.

Store root: `--store DIR` > `UWF_HOME` > `$XDG_STATE_HOME/uwf` > `~/.local/state/uwf`.
Config: `UWF_CONFIG` > `$XDG_CONFIG_HOME/uwf/config.yaml` > `~/.config/uwf/config.yaml`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import msgspec

from uwf.config.env import env_number
from uwf.engine.clock import Clock, fixed_clock, parse_instant, system_clock
from uwf.engine.dburl import is_database_url, shown
from uwf.errors import UsageError

DEFAULT_LOCK_TIMEOUT_S = 10.0


class Settings(msgspec.Struct, frozen=True):
    """One command's outside world: its environment and working folder, and what uwf
    reads from them, checked."""

    # A read-only copy of the environment; agents' environments are built from it.
    environ: Mapping[str, str]
    # The working folder (the default repo), or None when the process has none (it
    # was removed): `find_repo` then says so, as it did when it asked for one.
    cwd: Path | None
    store_root: Path
    durable: bool  # UWF_DURABILITY: fsync (True) or none
    # The fixed time (`--now`, else UWF_NOW) as given, for agents' UWF_NOW, and in ms.
    now: str | None
    now_ms: int | None
    segment_bytes: int  # UWF_SEGMENT_BYTES
    lock_timeout: float  # UWF_LOCK_TIMEOUT, in seconds
    config_path: Path
    # A store on a PostgreSQL server (`postgresql://...` as --store or UWF_HOME), else
    # None: the store is the folder `store_root`, which is then never a URL.
    store_url: str | None = None
    # UWF_NODES: where a step's new nodes go: records in the log (True, the default), or
    # loose files as an older uwf wrote them (`loose`: a store an older uwf still reads).
    node_records: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str], cwd: Path | None, *,
                 store: str | Path | None = None, now: str | None = None) -> Settings:
        """Resolve and check every setting from `environ`, `cwd` and the global
        options (`--store`, `--now`); a bad value is a usage error naming it. They are
        checked in the order opening a store always checked them."""
        from uwf.engine.filelog import DEFAULT_SEGMENT_BYTES  # not for `config_path` alone

        environ = MappingProxyType(dict(environ))
        now_ms = None
        if now:
            now_ms = parse_instant(now, "--now")
        elif fixed := environ.get("UWF_NOW"):
            now, now_ms = fixed, parse_instant(fixed, "UWF_NOW")
        given = str(store) if store is not None else environ.get("UWF_HOME") or None
        url = given if given is not None and is_database_url(given) else None
        if given is not None and url is None and "://" in given:
            raise UsageError(f"the store {shown(given)!r} is a URL uwf does not know",
                             "give a folder, or a postgresql:// URL")
        return cls(
            environ=environ,
            cwd=cwd,
            store_root=Path() if url else in_folder(store_root(
                str(store) if store is not None else None, environ), cwd),
            store_url=url,
            durable=durability(environ),
            now=now or None,
            now_ms=now_ms,
            segment_bytes=int(env_number("UWF_SEGMENT_BYTES", DEFAULT_SEGMENT_BYTES,
                                         integer=True, positive=True, environ=environ)),
            lock_timeout=env_number("UWF_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT_S,
                                    environ=environ),
            config_path=in_folder(config_path(environ), cwd),
            node_records=node_records(environ),
        )

    @property
    def clock(self) -> Clock:
        """The fixed clock of `now`, else the wall clock."""
        return fixed_clock(self.now_ms) if self.now_ms is not None else system_clock

    @property
    def env_file(self) -> Path:
        """The `.env` beside the config file (it may not exist)."""
        return self.config_path.parent / ".env"

    def path(self, given: str | Path) -> Path:
        """A path the user gave (`--repo`, a file, a folder), as this command's: `~`
        expanded with its HOME, a relative one taken from its working folder (if it has
        one). Every user-given path is resolved here, at the edge; nothing below calls
        `expanduser` or `abspath`, or reads the process's HOME or working folder."""
        return in_folder(expand_user(str(given), self.environ), self.cwd)

    def with_environ(self, **changes: str) -> Settings:
        """These settings with `changes` added to the environment its agents get."""
        return msgspec.structs.replace(self, environ=MappingProxyType({**self.environ, **changes}))


def process_settings(store: str | Path | None = None, now: str | None = None) -> Settings:
    """This process's settings: the one reader of `os.environ` and the working folder
    below the entry points (for `Store.open` and `Store.memory` given none)."""
    try:
        cwd: Path | None = Path.cwd()
    except OSError:
        cwd = None
    return Settings.from_env(os.environ, cwd, store=store, now=now)


def in_folder(path: Path, cwd: Path | None) -> Path:
    """`path` taken from the working folder `cwd` when it is relative (as is without
    one)."""
    return cwd / path if cwd is not None else path


def store_root(explicit: str | None, environ: Mapping[str, str]) -> Path:
    """Where the store lives, by the precedence above."""
    if explicit:
        return expand_user(explicit, environ)
    if home := environ.get("UWF_HOME"):
        return expand_user(home, environ)
    if state := environ.get("XDG_STATE_HOME"):
        return expand_user(state, environ) / "uwf"
    return home_folder(environ) / ".local" / "state" / "uwf"


def durability(environ: Mapping[str, str]) -> bool:
    """`UWF_DURABILITY=none` skips fsync (bulk loads, tests); default is fsync."""
    mode = environ.get("UWF_DURABILITY", "fsync")
    if mode not in ("fsync", "none"):
        raise UsageError(f"UWF_DURABILITY must be fsync or none, not {mode!r}", "fix or unset it")
    return mode == "fsync"


def node_records(environ: Mapping[str, str]) -> bool:
    """`UWF_NODES=loose` writes a step's nodes as loose files, as an older uwf did (one
    file and two fsyncs each), so a store an older uwf shares stays readable to it; the
    default, `log`, writes them as records with the step's events (docs/format.md)."""
    mode = environ.get("UWF_NODES", "log")
    if mode not in ("log", "loose"):
        raise UsageError(f"UWF_NODES must be log or loose, not {mode!r}", "fix or unset it")
    return mode == "log"


def config_path(environ: Mapping[str, str]) -> Path:
    """The config file, by the precedence above (it may not exist)."""
    if explicit := environ.get("UWF_CONFIG"):
        return expand_user(explicit, environ)
    if xdg := environ.get("XDG_CONFIG_HOME"):
        return expand_user(xdg, environ) / "uwf" / "config.yaml"
    return home_folder(environ) / ".config" / "uwf" / "config.yaml"


def home_folder(environ: Mapping[str, str]) -> Path:
    """`environ`'s HOME, else the user's home in the password database: `Path.home()`
    for that environment."""
    return expand_user("~", environ)


def expand_user(path: str, environ: Mapping[str, str]) -> Path:
    """`Path(path).expanduser()` with `~` standing for `environ`'s HOME rather than
    this process's (`~user` is looked up in the password database, as there)."""
    if path != "~" and not path.startswith("~/"):
        return Path(path).expanduser()  # `~user/...`, or no `~`: no HOME is read
    if "HOME" in environ:
        home = environ["HOME"]
    else:
        import pwd

        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            raise RuntimeError("Could not determine home directory.") from None
    # As posixpath.expanduser: a trailing slash of HOME dropped, "/" for an empty one.
    return Path((home.rstrip("/") + path[1:]) or "/")
