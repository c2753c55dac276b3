"""`uwf workflow show NAME` without msgspec, when the store's views are current.

The console script (`uwf.cli.entry`) tries this first. It answers only the plainest
case, a registered name read from a folder store whose views are caught up with its
log, and prints what the ordinary path prints, byte for byte; for anything else it
declines (None), having written nothing, and the ordinary path runs. It declines on:
any command line but `[--store DIR] workflow show NAME` (NAME a workflow name that is
no hash and no file name); stdout a terminal (a panel); any `UWF_*` variable but
UWF_HOME; a config file or its `.env` (their secrets are masked in the output); a
secret of the environment (a variable named like one, of 8 characters or more, as
uwf.config.secrets has them) that the output holds, or that JSON would escape; a
store on a server; a workflow file of that
name in the repo's `.workflows/` or `.workflow/` folders (from the working folder up
to the repo's top); a log whose last line is torn or whose folder holds anything but
segments; views whose checkpoint rows are not all at the log's last line, at the
signatures this uwf's views have (`SIGNATURES`); a name with no row; a node that is
not a loose file, a store with another hash rule, a node that does not hash to its
name or is not a Workflow (`WORKFLOW_TYPE`); any error at all.

What it knows that other modules own is pinned by tests/e2e/test_fastshow.py: the
views' signatures and the Workflow type hash against the store's, the repo layouts
against `uwf.workflows.discovery`'s, and its output against the ordinary path's.
Imports: the standard library and `uwf.cas.hashing` (re, struct, xxhash): no msgspec,
which the ordinary path needs (90 million instructions of 250).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

# builtin_hash("Workflow") (uwf.cas.builtins): a node of another type is not shown here.
WORKFLOW_TYPE = "31YTRWH1Z3EGC"
# The draft-07 bootstrap node an older uwf wrote (uwf.cas.subset): such a store is refused.
DRAFT07_BOOTSTRAP = "CWJJZYAQ8BA62"
# Where a repo keeps its workflow files (uwf.workflows.discovery).
REPO_FOLDERS = (".workflows", ".workflow")
REPO_LAYOUTS = ("{name}.yaml", "{name}.yml", "{name}/index.yaml", "{name}/index.yml")
FILE_SUFFIXES = (".yaml", ".yml", ".json")
SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")  # uwf.config.secrets
MIN_SECRET = 8  # a shorter value is not masked (uwf.config.secrets.MIN_LENGTH)
# Each view's signature and the stream index's, as this uwf's views store them (the
# `checkpoints` table): a store whose rows say otherwise is caught up the ordinary way.
SIGNATURES = {
    "": "",
    "store": "[1, [], [], [], false]",
    "workflows": "[1, [], [], [], false]",
    "queue": '[6, ["status", "priority", "enqueued_at", "session", "repo", "live_key", '
             '"lease_expires", "eligible_at", "ready_pool"], [["priority", "enqueued_at", '
             '"key"], ["status", "priority", "enqueued_at", "key"], ["ready_pool", '
             '"priority", "enqueued_at", "key"], ["status", "lease_expires"], ["status", '
             '"eligible_at"], ["live_key"]], ["status", "ready_pool"], false, ["ready_pool",'
             ' "lease_expires", "eligible_at", "live_key"]]',
    "sched": "[1, [], [], [], false]",
    "steps": '[5, ["head"], [["head", "key"]], [], false, ["head"]]',
    "streams": '["streams", 1]',
    "runs": '[6, ["derived", "archived", "deadline", "created_at", "updated_at", "repo", '
            '"workflow", "workflow_hash"], [["created_at", "key"], ["derived", '
            '"created_at", "key"], ["derived", "deadline"], ["archived", "created_at", '
            '"key"], ["repo", "created_at", "key"], ["workflow", "created_at", "key"], '
            '["workflow_hash", "created_at", "key"]], ["derived", "archived", "repo"], true]',
    "nodes": "[1, [], [], [], false]",
    "threads": '[7, ["state", "open", "name", "workflow"], [["open", "key"], ["state", '
               '"key"], ["name", "key"], ["workflow", "key"]], ["state"], false]',
}
_TAIL = 1 << 16  # the log's last line is looked for in its last 64 KiB


def workflow_show(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The text `uwf workflow show NAME` prints for `argv` (without its final newline),
    or None: the ordinary path is to run."""
    try:
        return _show(argv, environ)
    except Exception:  # anything unexpected: the ordinary path says what is wrong
        return None


def _show(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    parsed = _command_line(argv)
    secrets = _secrets(environ)
    if parsed is None or sys.stdout.isatty() or secrets is None:
        return None
    store, name = parsed
    root = _store_root(store, environ)
    if root is None or _in_repo(name):
        return None
    head = _log_head(os.path.join(root, "events"))
    node_name = None if head is None else _registered(root, name, head)
    if node_name is None:
        return None
    import json

    from uwf.cas.hashing import node_hash

    cas = os.path.join(root, "cas")
    if os.path.lexists(os.path.join(cas, DRAFT07_BOOTSTRAP[:2], DRAFT07_BOOTSTRAP + ".json")):
        return None
    with open(os.path.join(cas, "hash-rule"), "rb") as rule:
        if rule.read() != b"json-cas\n":
            return None
    with open(os.path.join(cas, node_name[:2], node_name + ".json"), "rb") as file:
        node = json.loads(file.read())
    payload = node["payload"]
    if (node["type"] != WORKFLOW_TYPE or not isinstance(payload, dict)
            or node_hash(node["type"], payload) != node_name
            or not isinstance(payload.get("name"), str)):
        return None
    int(node["timestamp"])  # a node file the ordinary path reads (else: it says why)
    shown = {"workflow": node_name, "name": payload["name"], "definition": payload}
    text = json.dumps(shown, ensure_ascii=False, indent=2)
    # A secret JSON writes as it is (no quote, backslash or control character) that the
    # text does not hold is in none of its strings either: nothing would be masked.
    if any(secret in text or _escaped(secret) for secret in secrets):
        return None
    return text


def _escaped(text: str) -> bool:
    """Whether `json.dumps(ensure_ascii=False)` writes `text` otherwise than as it is."""
    return any(char in '"\\' or char < " " for char in text)


def _command_line(argv: Sequence[str]) -> tuple[str | None, str] | None:
    """(--store's value or None, NAME) of `[--store DIR] workflow show NAME`."""
    args = list(argv)
    store = None
    if args and args[0].startswith("--store="):
        store = args.pop(0)[len("--store="):]
    elif len(args) >= 2 and args[0] == "--store" and not args[1].startswith("-"):
        store = args[1]
        args = args[2:]
    if len(args) != 3 or args[:2] != ["workflow", "show"] or store == "":
        return None
    name = args[2]
    plain = (name[:1].isascii() and name[:1].isalnum() and name.isascii()
             and all(char.isalnum() or char in "._-" for char in name))
    if not plain or name.lower().endswith(FILE_SUFFIXES):
        return None
    return store, name


def _secrets(environ: Mapping[str, str]) -> list[str] | None:
    """The environment's secrets the output would be masked for (uwf.config.secrets:
    a variable named like one, 8 characters or more), or None when a setting changes the
    read or its text: a UWF_* variable but UWF_HOME, a config file or its `.env`."""
    secrets = []
    for key, value in environ.items():
        if key.startswith("UWF_") and key != "UWF_HOME":
            return None
        if key.upper().endswith(SECRET_SUFFIXES) and len(value) >= MIN_SECRET:
            secrets.append(value)
    if "HOME" not in environ:
        return None
    home = environ["HOME"]
    xdg = environ.get("XDG_CONFIG_HOME")
    folder = (os.path.join(_user(xdg, home), "uwf") if xdg
              else os.path.join(home, ".config", "uwf"))
    if (os.path.lexists(os.path.join(folder, "config.yaml"))
            or os.path.lexists(os.path.join(folder, ".env"))):
        return None
    return secrets


def _user(path: str, home: str) -> str:
    """`path` with a leading `~` as `home` (uwf.config.settings.expand_user)."""
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    return os.path.expanduser(path) if path.startswith("~") else path


def _store_root(store: str | None, environ: Mapping[str, str]) -> str | None:
    """The store's folder (uwf.config.settings.store_root), None for a server's URL."""
    home = environ["HOME"]
    if store:
        root = _user(store, home)
    elif environ.get("UWF_HOME"):
        root = _user(environ["UWF_HOME"], home)
    elif environ.get("XDG_STATE_HOME"):
        root = os.path.join(_user(environ["XDG_STATE_HOME"], home), "uwf")
    else:
        root = os.path.join(home, ".local", "state", "uwf")
    if "://" in root or root.startswith(("postgres", "postgresql")):
        return None
    return os.path.abspath(root)


def _in_repo(name: str) -> bool:
    """A file that may hold `name` in a `.workflows/` or `.workflow/` folder of the working
    folder or a parent, up to the repo's top (or the root: more than the ordinary path
    looks at, so never fewer)."""
    here = os.getcwd()
    while True:
        for kept in REPO_FOLDERS:
            if os.path.lexists(os.path.join(here, kept)):
                return True
        parent = os.path.dirname(here)
        if os.path.lexists(os.path.join(here, ".git")) or parent == here:
            return False
        here = parent


def _log_head(events: str) -> tuple[int, str] | None:
    """The seq and digest of the log's last line (uwf.engine.events.digest), or None for
    an empty log, a torn tail or a folder holding anything but segments."""
    names = sorted(os.listdir(events))
    if not names or not all(len(entry) == 26 and entry.endswith(".jsonl")
                            and entry[:20].isdigit() for entry in names):
        return None
    with open(os.path.join(events, names[-1]), "rb") as segment:
        size = segment.seek(0, os.SEEK_END)
        segment.seek(max(0, size - _TAIL))
        tail = segment.read()
    if not tail.endswith(b"\n") or (size > len(tail) and b"\n" not in tail[:-1]):
        return None  # a torn tail (repaired by the ordinary path), or a line of 64 KiB
    line = tail[:-1].rsplit(b"\n", 1)[-1]
    import json
    from _sha256 import sha256  # type: ignore[import-not-found]  # CPython's own

    seq = json.loads(line)["seq"]
    if type(seq) is not int:
        return None
    return seq, sha256(line).hexdigest()[:32]


def _registered(root: str, name: str, head: tuple[int, str]) -> str | None:
    """The node `name` is registered as, when every view is at `head`."""
    import json
    import sqlite3

    path = os.path.join(root, "views", "views.sqlite3")
    if not os.path.isfile(path):
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT name, signature, seq, digest FROM checkpoints").fetchall()
        if {row[0] for row in rows} != set(SIGNATURES) or len(rows) != len(SIGNATURES):
            return None
        for view, signature, seq, digest in rows:
            if signature != SIGNATURES[view]:
                return None
            if view == "" and (seq, digest) != head:
                return None
            if view != "" and (seq is not None or digest is not None) and (seq, digest) != head:
                return None
        found = db.execute("SELECT value FROM v_workflows WHERE key = ?", (name,)).fetchone()
    finally:
        db.close()
    if found is None or not isinstance(found[0], bytes):
        return None
    from uwf.cas.hashing import is_hash

    node_name = json.loads(found[0]).get("hash")
    return node_name if is_hash(node_name) else None
