"""What `uwf archive ...` returns: the payloads `--json` prints, typed."""

from __future__ import annotations

from uwf.payload import Result


class Synced(Result):
    """One sync: the archive, the run it was limited to (None: every run), the log seqs
    it read from and to, the lines appended, the runs they went to, and how many runs
    started (graph.json written) and ended (summary.json written)."""

    archive: str
    run: str | None
    from_seq: int
    seq: int
    appended: int
    runs: int
    started: int
    ended: int


class ArchiveProblem(Result):
    """What is wrong, in which file of which run (None: the archive's own files)."""

    run: str | None
    file: str
    problem: str


class ArchiveVerified(Result):
    """`archive verify`: ok when there is no problem; the seq the checkpoint vouches
    for, the log's, and the run folders read."""

    ok: bool
    archive: str
    seq: int
    log_seq: int
    runs: int
    problems: list[ArchiveProblem]
