"""The archive folder's layout and its files' forms: names, the checkpoint, the
run lines as read back, graph.json, summary.json and index.json (docs/archive.md).

```
DIR/
  .uwf-archive.json          checkpoint: {format, seq, digest} of the last line folded,
                             and of each open run's transitions.jsonl its inode and
                             what the sync left in it (bytes, lines, digest)
  .uwf-archive.lock          writers' lock (a sync), shared by `archive verify`
  index.json                 every summary.json, one row each (rebuildable cache)
  runs/<run id>/
    transitions.jsonl        append-only: run_start, transition, node_attempt, run_end
    graph.json               the workflow snapshot, written once at run_start
    summary.json             written once, at run_end
```
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from uwf.archive.lines import Line, RunFold, RunStart, decode, fold
from uwf.cas.store import Cas
from uwf.errors import Corrupt, NotFound

FORMAT = 1
CHECKPOINT = ".uwf-archive.json"
LOCK = ".uwf-archive.lock"
RUNS = "runs"
INDEX = "index.json"
TRANSITIONS = "transitions.jsonl"
GRAPH = "graph.json"
SUMMARY = "summary.json"


class ArchiveCheckpoint(msgspec.Struct, frozen=True, forbid_unknown_fields=True,
                        omit_defaults=True):
    """The last log line a full sync folded: its seq and chain digest; and, for each run
    that has not ended, the (device, inode) of the transitions.jsonl it appended to, so
    a file replaced between two syncs is refused (absent in a checkpoint written before
    it was kept, or when every run has ended)."""

    format: int
    seq: int
    digest: str
    inodes: dict[str, tuple[int, int]] = {}
    # Per open run: (bytes, lines, digest) of transitions.jsonl as the sync left it
    # (absent in a checkpoint written before it was kept: nothing to check).
    files: dict[str, tuple[int, int, str]] = {}


def read_checkpoint(raw: bytes) -> ArchiveCheckpoint:
    """The checkpoint file's content; Corrupt naming what is wrong with it."""
    try:
        checkpoint = msgspec.json.decode(raw, type=ArchiveCheckpoint)
    except msgspec.DecodeError as exc:
        raise Corrupt(f"{CHECKPOINT} is not an archive checkpoint: {exc}",
                      "restore it, or sync into a new folder") from None
    if checkpoint.format != FORMAT:
        raise Corrupt(f"{CHECKPOINT} has format {checkpoint.format}; this uwf writes "
                      f"{FORMAT}", "use the uwf that wrote it, or sync into a new folder")
    return checkpoint


def read_lines(raw: bytes, where: str) -> list[Line]:
    """A transitions.jsonl's lines; Corrupt for a partial last line or a line that is
    not an archive line (`uwf archive verify` names every problem)."""
    if raw and not raw.endswith(b"\n"):
        raise Corrupt(f"{where} ends in a partial line", "run `uwf archive verify DIR`")
    lines = []
    for number, text in enumerate(raw.split(b"\n")[:-1], 1):
        try:
            lines.append(decode(text))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise Corrupt(f"{where} line {number} is not an archive line: {exc}",
                          "run `uwf archive verify DIR`") from None
    return lines


def fold_lines(lines: list[Line], run_id: str, where: str) -> RunFold | None:
    """The run's state from its own lines; Corrupt when they cannot be folded."""
    state = None
    for number, line in enumerate(lines, 1):
        if line.run_id != run_id:
            raise Corrupt(f"{where} line {number} belongs to run {line.run_id}",
                          "run `uwf archive verify DIR`")
        try:
            state = fold(state, line)
        except ValueError as exc:
            raise Corrupt(f"{where} line {number}: {exc}",
                          "run `uwf archive verify DIR`") from None
    return state


def graph_document(cas: Cas, start: RunStart) -> dict[str, Any]:
    """graph.json: the Workflow node the run started on, as `workflow show` prints it."""
    try:
        payload = cas.get(start.workflow).payload
    except NotFound:
        raise Corrupt(f"run {start.run_id}'s workflow node {start.workflow} is missing "
                      "from the CAS", "run `uwf log verify`") from None
    return {"workflow": start.workflow, "name": start.name, "definition": payload}


def document(value: Any) -> bytes:
    """A JSON file as the archive writes graph.json and summary.json."""
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def index_document(rows: list[dict[str, Any]]) -> bytes:
    """index.json: a JSON array of summaries, one per line, by `started` then run id."""
    rows = sorted(rows, key=lambda row: (str(row.get("started")), str(row.get("run_id"))))
    body = ",\n".join(json.dumps(row, ensure_ascii=False, separators=(",", ":"))
                      for row in rows)
    return f"[\n{body}\n]\n".encode() if rows else b"[]\n"


def file_digest(data: bytes) -> str:
    """The first 32 hex characters of SHA-256, as the log's chain digests."""
    return hashlib.sha256(data).hexdigest()[:32]
