"""The checks of a store: its format and hash rule, the writers' lock, the views against
the log, the log's tail and the anchors. Each looks at a fixed number of things (the
first line, the last segment's end, the views' checkpoints), never the whole log, so a
store of any size answers at once; and none writes (no lock taken for long, no view
made, no tail cut)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from uwf.doctor.results import Check, fail, ok, warn
from uwf.engine.clock import system_clock
from uwf.engine.events import FORMAT_VERSION
from uwf.engine.filelog import FileLog
from uwf.engine.spans import complete_end
from uwf.errors import UwfError
from uwf.store import Store

if TYPE_CHECKING:
    from uwf.config.settings import Settings
    from uwf.engine.journal import Journal
    from uwf.engine.log import EventLog


class _First(msgspec.Struct):
    type: str
    data: dict[str, object] = {}


class _Batch(msgspec.Struct):
    seq: int
    batch: tuple[int, int]


def store_format(store: Store) -> Check:
    """The format the store's first event says it was written with, and the hash rule
    its nodes are named by."""
    try:
        raw = store.log.line(1)
        rule = store.cas.hash_rule()
    except UwfError as error:
        return fail("format", error.what, error.next_action or "run `uwf log verify`")
    if raw is None:
        return ok("format", f"an empty log (the first write records format {FORMAT_VERSION}); "
                  f"hash rule {rule}")
    try:
        first = msgspec.json.decode(raw, type=_First)
    except msgspec.DecodeError:
        return fail("format", "the log's first line is not an event", "run `uwf log verify`")
    found = first.data.get("format")
    if first.type != "store.created" or not isinstance(found, int):
        return fail("format", f"the log's first event is {first.type}, not store.created",
                    "run `uwf log verify`")
    if found > FORMAT_VERSION:
        return fail("format", f"format {found}, written by a newer uwf (this one reads up "
                    f"to {FORMAT_VERSION})", "upgrade uwf")
    return ok("format", f"format {found}, hash rule {rule}")


def lock(root: Path) -> tuple[Check, bool]:
    """The writers' lock file: a regular file this user can write; and whether a writer
    holds it now (a shared lock tried without waiting, let go at once)."""
    path = root / "lock"
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ok("lock", f"{path} not made yet (the first write makes it)"), False
    except OSError as exc:
        return fail("lock", f"cannot look at {path}: {exc.strerror}",
                    "check the store folder's permissions"), False
    if not stat.S_ISREG(info.st_mode):
        return fail("lock", f"{path} is not a regular file",
                    "remove it (no writer runs while it is not a file), then retry"), False
    if not os.access(path, os.W_OK):
        return fail("lock", f"{path} is not writable by this user",
                    "run uwf as the store's owner, or fix the file's permissions"), False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        return fail("lock", f"cannot open {path}: {exc.strerror}",
                    "run uwf as the store's owner, or fix the file's permissions"), False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return ok("lock", f"{path}: held by a writer now"), True
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return ok("lock", f"{path}: free"), False


def views(journal: Journal) -> Check:
    """The views against the log (SPEC §5), as `uwf registry show` measures them."""
    try:
        fresh = journal.freshness()
    except UwfError as error:
        return fail("views", error.what, error.next_action or "run `uwf registry rebuild`")
    names = [name for name, view in fresh.views.items() if view.status == fresh.status]
    which = "every view" if len(names) == len(fresh.views) else ", ".join(names)
    if fresh.status == "valid":
        return ok("views", f"fresh at seq {fresh.log_seq}")
    if fresh.status == "stale":
        return warn("views", f"stale: {which} {fresh.behind} event"
                    f"{'' if fresh.behind == 1 else 's'} behind the log (seq {fresh.log_seq})",
                    "the next read catches them up, or run `uwf registry refresh`")
    if fresh.status == "absent":
        return warn("views", f"absent ({which}): the next read rebuilds them from the log's "
                    f"{fresh.log_seq} events", "run `uwf registry rebuild` now to not wait then")
    return fail("views", f"{fresh.status}: {which} do not match the log",
                "run `uwf registry rebuild` (views are rebuilt from the log; nothing is lost)")


def log_tail(log: FileLog, writing: bool) -> Check:
    """The last segment's end: bytes after its last newline (a torn tail), a last batch
    with fewer lines than it says, a repair cut short (its note still pending). A writer
    repairs each; `writing`: one holds the lock now, and may be mid-append."""
    segments = log.segments
    try:
        names = segments.names()
        if not names:
            return ok("log tail", "no segment yet")
        last = names[-1]
        size = segments.size(last)
        end = complete_end(segments, last)
        note = segments.pending()
        line = _last_line(log, last, end)
    except UwfError as error:
        return fail("log tail", error.what, error.next_action or "run `uwf log verify`")
    except OSError as exc:
        return fail("log tail", f"cannot read {segments.events_dir}: {exc.strerror}",
                    "check the store folder's permissions")
    repair = ("the next command that writes cuts it and records log.repaired "
              "(`uwf log verify` names it until then)")
    if note is not None and not writing:
        return warn("log tail", "a repair of the tail was cut short (its note is pending)",
                    "the next command that writes finishes it")
    if size > end and not writing:
        return warn("log tail", f"torn: {size - end} bytes without a newline at the end of "
                    f"{last} (a writer was cut off mid-write)", repair)
    if line is not None and line.batch[0] < line.batch[1] and not writing:
        return warn("log tail", f"the last batch is cut: seq {line.seq} is line "
                    f"{line.batch[0]} of {line.batch[1]} (a writer was cut off)", repair)
    if line is None:
        return ok("log tail", f"{last}: no complete line")
    return ok("log tail", f"whole at seq {line.seq} ({last})"
              + (", a writer appending now" if writing else ""))


def _last_line(log: FileLog, name: str, end: int) -> _Batch | None:
    if end == 0:
        return None
    window = 4096
    while True:
        start = max(0, end - 1 - window)
        chunk = log.segments.read(name, start, end - 1)
        newline = chunk.rfind(b"\n")
        if newline >= 0 or start == 0:
            raw = chunk[newline + 1:]
            break
        window *= 4
    try:
        return msgspec.json.decode(raw, type=_Batch)
    except msgspec.DecodeError:
        return None  # not ours to judge here: `uwf log verify` names it


def anchors(settings: Settings, log: EventLog, folder: str | None) -> Check:
    """The anchor key (UWF_ANCHOR_KEY, else beside the config) and, given the folder
    anchors go to (resolved by `settings`), the newest there: its seq against `log`'s
    head, and its age."""
    from uwf.audit.anchor import default_key_path

    key = default_key_path(settings.environ)
    if folder is None:
        if key.exists():
            return ok("anchors", f"key {key}; give --anchors DIR to see the newest anchor's "
                      "age")
        return ok("anchors", "none configured (optional: docs/audit.md#anchors)")
    path = settings.path(folder)
    if not path.is_dir():
        return fail("anchors", f"{path} is not a folder",
                    "give the folder `worker --anchors DIR` or `log anchor --out` writes to")
    named = sorted((entry for entry in path.glob("*.json") if entry.stem.isdigit()),
                   key=lambda entry: int(entry.stem))
    files = named or sorted(path.glob("*.json"), key=_mtime)
    if not files:
        return warn("anchors", f"no anchor in {path}",
                    "make one: `uwf log anchor --out DIR/FILE.json`, or run a worker with "
                    "--anchors DIR")
    newest = files[-1]
    try:
        made = msgspec.json.decode(newest.read_bytes(), type=_Anchored)
    except (OSError, msgspec.DecodeError):
        return fail("anchors", f"{newest} is not an anchor",
                    f"move it out of {path}, or check it with `uwf log verify --anchor`")
    head = log.head().seq
    if made.seq > head:
        return fail("anchors", f"the newest anchor, {newest}, is of seq {made.seq}, past the "
                    f"log's end at seq {head}: this log lost lines, or it is another log's",
                    f"run `uwf log verify --anchor {newest}`")
    # The wall clock (a file's mtime is one), not the store's: a fixed --now says
    # nothing of when the anchor was written.
    age = _age(system_clock() / 1000 - _mtime(newest))
    behind = head - made.seq
    return ok("anchors", f"newest {newest.name}: seq {made.seq}, {behind} event"
              f"{'' if behind == 1 else 's'} and {age} behind the log")


class _Anchored(msgspec.Struct):
    seq: int


def _mtime(path: Path) -> float:
    with contextlib.suppress(OSError):
        return path.stat().st_mtime
    return 0.0


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"
