"""The checks of this machine: Python, the extras installed and what they enable, the
config file and each agent it names, and the disk space under the store."""

from __future__ import annotations

import os
import shutil
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.config.settings import Settings
from uwf.doctor.results import Check, fail, ok, warn
from uwf.errors import UwfError

if TYPE_CHECKING:
    from uwf.config.configfile import Config

# Each extra: the modules it installs, and the commands they enable (pyproject.toml).
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "mcp": (("mcp",), "uwf mcp"),
    "mqtt": (("paho",), "--broker, queue subscribe|publish, bridge mqtt"),
    "postgres": (("psycopg", "psycopg_pool"), "a postgresql:// store"),
    "dashboard": (("starlette", "uvicorn", "jinja2"), "uwf dashboard"),
}
LOW_DISK_BYTES = 64 << 20  # below this a write may fail part way: a failure
SPARE_DISK_BYTES = 1 << 30  # below this (or 5% of the disk) a warning
MIN_PYTHON = (3, 11)


def installed(extra: str) -> bool:
    """Whether every module of `extra` can be imported (found, not imported: cheap)."""
    return all(find_spec(module) is not None for module in EXTRAS[extra][0])


def python() -> Check:
    version = ".".join(str(part) for part in sys.version_info[:3])
    if sys.version_info[:2] < MIN_PYTHON:
        return fail("python", f"Python {version} ({sys.executable}) is older than 3.11",
                    "install uwf under Python 3.11 or newer")
    return ok("python", f"Python {version} ({sys.executable})")


def extras() -> Check:
    """The optional extras, each with what it enables; a missing one is not a fault."""
    have = [name for name in EXTRAS if installed(name)]
    missing = [name for name in EXTRAS if name not in have]
    if not missing:
        return ok("extras", f"{', '.join(have)} installed")
    without = "; ".join(f"{name} ({EXTRAS[name][1]})" for name in missing)
    return ok("extras", f"{', '.join(have) or 'none'} installed; without {without}: "
              f"pip install 'uwf[{','.join(missing)}]' to enable them")


def disk(settings: Settings) -> Check:
    """Free space on the file system the store is (or will be) on."""
    folder = _existing(settings.store_root)
    try:
        usage = shutil.disk_usage(folder)
    except OSError as exc:
        return fail("disk", f"cannot read the free space under {folder}: {exc.strerror}",
                    "check the folder and its permissions")
    free = f"{_size(usage.free)} free of {_size(usage.total)} under {folder}"
    if usage.free < LOW_DISK_BYTES:
        return fail("disk", free, "free some space: a write may fail part way")
    if usage.free < SPARE_DISK_BYTES or usage.free < usage.total // 20:
        return warn("disk", free, "free some space before the store grows")
    return ok("disk", free)


def config(settings: Settings) -> tuple[list[Check], Config | None]:
    """The config file's check and, when it loads, the config (for the agents')."""
    from uwf.config.configfile import load_config

    path = settings.config_path
    try:
        loaded = load_config(path)
    except UwfError as error:
        return [fail("config", error.what, error.next_action or "fix it")], None
    except OSError as exc:
        return [fail("config", f"cannot read {path}: {exc.strerror}",
                     "check the file and its permissions")], None
    if loaded.path is None:
        return [ok("config", f"no config file at {path}: agents are given with --agent "
                   "(docs/agents.md)")], loaded
    count = len(loaded.settings.agents)
    return [ok("config", f"{path}: {count} agent{'' if count == 1 else 's'}")], loaded


def agents(settings: Settings, loaded: Config | None) -> list[Check]:
    """Each agent alias of the config: its command found (on the PATH agents get, or as
    a path from the working folder) and executable."""
    if loaded is None:
        return []
    return [agent(name, spec.command, settings)
            for name, spec in loaded.settings.agents.items()]


def agent(name: str, command: str, settings: Settings) -> Check:
    label = f"agent {name}"
    fix = f"install it, or fix agents.{name}.command in {settings.config_path}"
    if "/" in command:
        path = settings.path(command)
        if not path.exists():
            return fail(label, f"its command {command} does not exist", fix)
        if path.is_dir() or not os.access(path, os.X_OK):
            return fail(label, f"its command {command} is not executable",
                        f"chmod +x {path}, or {fix}")
        return ok(label, f"{command}")
    search = settings.environ.get("PATH", os.defpath)
    found = shutil.which(command, path=search)
    if found is None:
        on_path = shutil.which(command, mode=os.F_OK, path=search)
        if on_path is not None:
            return fail(label, f"its command {command} ({on_path}) is not executable",
                        f"chmod +x {on_path}, or {fix}")
        return fail(label, f"its command {command} is not found on PATH", fix)
    return ok(label, f"{command} -> {found}")


def _existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}" if unit != "B" else f"{count} B"
        size /= 1024
    return f"{size:.1f} TiB"
