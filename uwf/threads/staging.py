"""A step's staging folder: what an agent process reads and writes instead of the store.

An agent never reopens the store: on PostgreSQL that would take the database's
credentials, and on a folder it would let any agent write anywhere in it. Before
an agent runs, `uwf thread step` makes a scratch folder and names it to the agent
in UWF_STEP_DIR:

    step.json   the step's context (`uwf agent context`'s payload), with the history
                its settings ask for (UWF_HISTORY, else the config's historyLimit,
                else 20)
    cas/        a json-cas folder store with the built-in schemas and the role's
                output schema, where the agent's output, detail and StepNode go

The agent kit and `uwf agent context|submit` read and write there when UWF_STEP_DIR
is set. The agent prints its StepNode's hash as ever; the parent then copies the
nodes that hash reaches and the store lacks out of the folder (each one checked
against its name and its type's schema), checks the step as before, and removes
the folder. One protocol for both backends. A step killed before it removes its
folder leaves it; the next `stage` in that temp folder sweeps it (`sweep`: its
OWNER is no longer locked).
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from uwf.cas.backends import FileBlobs
from uwf.cas.builtins import meta_hash
from uwf.cas.limits import MAX_NODE_BYTES
from uwf.cas.nodes import Node
from uwf.cas.store import Cas
from uwf.engine.clock import system_clock
from uwf.errors import Corrupt, NotFound, Rejected, UsageError
from uwf.redact import Redact
from uwf.threads.results import HistoryLimit, StepContext
from uwf.threads.stepnodes import StepFacts, write_step

STEP_DIR = "UWF_STEP_DIR"  # the variable naming the folder to an agent
CONTEXT_FILE = "step.json"
# What a parent reads back from an agent's folder: a node file (indented JSON of a
# payload of at most MAX_NODE_BYTES) and how many new nodes one step may bring.
MAX_FILE_BYTES = 4 * MAX_NODE_BYTES
MAX_NODES = 10_000


def _cas(folder: Path, clock: Callable[[], int], redact: Redact | None) -> Cas:
    # Not fsynced: the folder only has to outlive the agent; the parent's copy into
    # the store is the durable one.
    return Cas(FileBlobs(folder / "cas", durable=False, max_bytes=MAX_FILE_BYTES,
                         wall=system_clock), clock=clock, redact=redact)


# -- the parent's side ------------------------------------------------------------

# Each user's staging folders live in one folder of the temp folder (so that finding a
# killed step's leftovers lists a handful of names, not the whole temp folder); each
# holds OWNER, locked (flock) by the process that staged it for as long as it lives.
PARENT = "uwf-steps-{uid}"
PREFIX = "step-"
OWNER = ".owner"
# A folder without OWNER is being made (its maker names OWNER once it holds its lock),
# or its maker died in between; past this age it is taken for the latter.
UNOWNED_GRACE_MS = 24 * 3600 * 1000


class Staging(msgspec.Struct, frozen=True):
    """A staging folder, and the lock on its OWNER that says its step is alive."""

    folder: Path
    lock: int  # the open file descriptor holding OWNER's lock (not inherited by agents)


def stage(context: StepContext, store_cas: Cas, clock: Callable[[], int],
          environ: Mapping[str, str]) -> Staging:
    """A new staging folder for the step `context` describes (the caller `remove`s
    it), in the command's TMPDIR (`environ`, the settings' copy) when that is a folder,
    else the system's temp folder. The folders a killed step left there go first."""
    import tempfile  # the command's side only: a staged agent loads none of it

    from uwf.payload import to_payload

    chosen = environ.get("TMPDIR")
    base = chosen if chosen and os.path.isdir(chosen) else tempfile.gettempdir()
    parent = _parent(Path(base))
    if parent is not None:
        sweep(parent)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX if parent else "uwf-step-",
                                   dir=parent or base))
    staging = Staging(folder, _own(folder))
    try:
        staged = _cas(folder, clock, None)
        staged.ensure_builtins()
        _copy(store_cas, staged, [context.role["meta"]], limit=MAX_NODES)
        (folder / CONTEXT_FILE).write_bytes(msgspec.json.encode(to_payload(context)))
    except BaseException:
        remove(staging)
        raise
    return staging


def _parent(base: Path) -> Path | None:
    """This user's folder of staging folders in `base`, made if need be; None when
    the name is taken by something this user cannot trust (a link, another owner's,
    open to others): the folder is then made in `base` itself, and never swept."""
    uid = os.getuid()
    parent = base / PARENT.format(uid=uid)
    try:
        os.mkdir(parent, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        found = os.lstat(parent)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != uid or found.st_mode & 0o077:
        return None
    return parent


def _own(folder: Path) -> int:
    """Lock a new OWNER in `folder`: made under another name, locked, then renamed,
    so that a sweep never finds OWNER unlocked while its maker lives."""
    making = folder / (OWNER + ".new")
    lock = os.open(making, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.rename(making, folder / OWNER)
    except BaseException:
        os.close(lock)
        raise
    return lock


def sweep(parent: Path, wall: Callable[[], int] = system_clock) -> int:
    """Remove the staging folders in `parent` whose maker is gone (a step killed, so
    its `remove` never ran): OWNER no longer locked, or never made and older than a
    day by the `wall` clock (epoch ms; never the store's clock, which may be fixed,
    while a folder's age is the file system's). How many were removed."""
    import shutil

    removed = 0
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        if _abandoned(Path(entry.path), wall):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed


def _abandoned(folder: Path, wall: Callable[[], int]) -> bool:
    try:
        lock = os.open(folder / OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        try:
            return wall() - os.lstat(folder).st_mtime * 1000 > UNOWNED_GRACE_MS
        except OSError:
            return False
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its step is alive
        return False
    finally:
        os.close(lock)
    return True


def bring_in(folder: Path, store_cas: Cas, hash_: str) -> None:
    """Copy into the store the nodes `hash_` reaches that it lacks, from `folder`: each
    checked against its name (Corrupt) and its type's schema (Rejected). What is in
    neither is left for the step's checks to name."""
    staged = _cas(folder, store_cas.clock, None)
    _copy(staged, store_cas, [hash_], limit=MAX_NODES, fallback=store_cas)


def remove(staging: Staging) -> None:
    """Remove the folder, then let its lock go (so no sweep takes it meanwhile)."""
    import shutil

    shutil.rmtree(staging.folder, ignore_errors=True)
    os.close(staging.lock)


def _copy(src: Cas, dst: Cas, roots: Iterable[str], *, limit: int,
          fallback: Cas | None = None) -> None:
    """Every node reachable from `roots` in `src` that `dst` lacks, put into `dst`
    (schemas first, so each node is validated against its type there). A type or
    reference `src` lacks is looked for in `fallback`."""
    seen: set[str] = set()
    todo = list(roots)
    found: list[Node] = []
    while todo:
        hash_ = todo.pop()
        if hash_ in seen:
            continue
        seen.add(hash_)
        if dst.has(hash_) or not src.has(hash_):
            continue
        if len(found) >= limit:
            raise Rejected(f"more than {limit:,} new nodes to copy", "write fewer nodes")
        node = src.get(hash_)
        found.append(node)
        todo.append(node.type)
        typed_by = src if src.has(node.type) or fallback is None else fallback
        todo.extend(ref for _, ref in typed_by.refs(node))
    for node in sorted(found, key=lambda node: node.type != meta_hash()):
        if node.type == node.hash:  # the self-typed meta-schema: the store has its own
            dst.ensure_meta()
        else:
            dst.put(node.type, node.payload, redact=False)


# -- the agent's side -------------------------------------------------------------

@dataclass(frozen=True)
class Staged:
    """An agent's view of its step: the context its parent wrote, and the folder's CAS."""

    folder: Path
    context: dict[str, Any]
    cas: Cas

    def check(self, thread: str, role: str) -> None:
        if (thread, role) != (self.context["thread"], self.context["role"]["name"]):
            raise UsageError(
                f"this agent's step ({STEP_DIR}) is thread "
                f"{self.context['thread']} as {self.context['role']['name']}, not "
                f"{thread} as {role}", f"unset {STEP_DIR} to work on the store itself")


def open_staged(env: Mapping[str, str], clock: Callable[[], int],
                redact: Redact | None) -> Staged | None:
    """The step `env`'s UWF_STEP_DIR names, or None when it names none."""
    given = env.get(STEP_DIR, "")
    if not given:
        return None
    folder = Path(given)
    try:
        with open(folder / CONTEXT_FILE, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        context = msgspec.json.decode(raw)
    except FileNotFoundError:
        raise NotFound(f"{STEP_DIR} names {folder}, which holds no step",
                       "run the agent through `uwf thread step`, or unset "
                       f"{STEP_DIR}") from None
    except (OSError, msgspec.DecodeError) as exc:
        raise Corrupt(f"the step in {folder} cannot be read: {exc}",
                      "run the step again") from None
    if len(raw) > MAX_FILE_BYTES or not isinstance(context, dict):
        raise Corrupt(f"the step in {folder} is not a step's context", "run the step again")
    return Staged(folder, context, _cas(folder, clock, redact))


def staged_context(staged: Staged, thread: str, role: str,
                   history_limit: HistoryLimit = None) -> dict[str, Any]:
    """The context the parent wrote, its history cut to the last `history_limit` steps
    (None or "all": all the parent gave)."""
    staged.check(thread, role)
    context = dict(staged.context)
    history = list(context.get("history") or [])
    if isinstance(history_limit, int) and not isinstance(history_limit, bool):
        if history_limit < 0:
            raise UsageError(f"history limit must be 0 or more, not {history_limit}",
                             "give a number or 'all'")
        history = history[len(history) - history_limit:] if history_limit else []
    context["history"] = history
    context["historyTruncated"] = len(history) < int(context.get("steps") or 0)
    return context


def staged_submit(staged: Staged, thread: str, role: str, output: Any,
                  detail: str | None = None, *, detail_ref: str | None = None,
                  agent: str, started_at_ms: int | None, completed_at_ms: int,
                  usage: Any = None) -> str:
    """`submit_step` into the staging folder: the StepNode's hash."""
    staged.check(thread, role)
    context = staged.context
    facts = StepFacts(context["start"], context["head"], role, context["role"]["meta"],
                      context.get("edgePrompt") or None,
                      tuple(context.get("previousAttempts") or ()))
    return write_step(staged.cas, facts, output, detail, detail_ref=detail_ref, agent=agent,
                      started_at_ms=started_at_ms, completed_at_ms=completed_at_ms,
                      usage=usage, refs_checked_later=True)
