"""What `uwf run ...`, `uwf history` and `uwf registry ...` return: the payloads
`--json` prints, typed (the run record's fields: docs/runs.md)."""

from __future__ import annotations

from typing import Literal

from uwf.payload import UNSET, Result, UnsetType
from uwf.threads.results import Attempt, StepFailure, StepInFlight


class RunWorkflow(Result):
    """The workflow a run runs: its registered name and the node's hash."""

    name: str
    hash: str


class Tasks(Result):
    """A run's steps counted as tasks: accepted (`completed`), failed, in flight."""

    total: int
    pending: int
    running: int
    failed: int
    completed: int


class UsageTotals(Result):
    """The usage the run's steps reported, summed; a total stays null until a step
    reports it."""

    input_tokens: int | None
    output_tokens: int | None
    cost: float | None
    reported_steps: int


class RunProvenance(Result):
    """Which run a rerun ran again, in which repo, the chain's first run and why."""

    rerun_of: str
    rerun_of_repo: str
    origin_run_id: str
    generation: int
    reason: str
    incremental: bool


class RunRecord(Result):
    """A RunRecord as SPEC §7 and the run-registry seed list its fields."""

    schema_version: int
    run_id: str
    app_version: str
    workflow: RunWorkflow
    title: str
    repo: str
    run_dir: None
    state_path: str | None
    created_at: str
    updated_at: str
    loop_stage: str
    lifecycle: str
    derived_lifecycle: str
    archived: bool
    archived_at: str | None
    archive_reason: str | None
    steps: int
    reused_steps: int
    tasks: Tasks
    commit_count: int
    verifier_gated_commit_count: int
    open_feedback_count: int
    last_role: str | None
    last_status: str | None
    head: str
    in_flight: StepInFlight | None
    usage: UsageTotals | None
    inputs_digest: str
    source_fingerprint: str
    provenance: RunProvenance | None
    freshness: str
    stale: bool
    # While the run's last attempt is one that failed (lifecycle `failed`, or a retry
    # in flight): why. Absent otherwise.
    last_failure: StepFailure | UnsetType = UNSET
    # `run show`: its last attempts, when one of them failed or was reused.
    attempts: list[Attempt] | UnsetType = UNSET


class RunPage(Result):
    """`run search`, `run list`, `history`: one page of the runs the filters select and
    how many they select in all."""

    scope: str
    total: int
    limit: int | None
    offset: int
    runs: list[RunRecord]


class RunCounts(Result):
    """`run counts`: runs per derived lifecycle (none at 0) and in all, and how many of
    them are archived (counted under their derived lifecycle too)."""

    scope: str
    total: int
    lifecycles: dict[str, int]
    archived: int


class RunShown(Result):
    """`run show`, `run archive RUN`: the record (`run`), or when a node it refers to is
    gone or damaged `found: false`, those nodes and the last-known record."""

    found: bool
    freshness: str
    run: RunRecord | UnsetType = UNSET
    missing_nodes: list[str] | UnsetType = UNSET
    corrupt_nodes: list[str] | UnsetType = UNSET
    last_known: RunRecord | UnsetType = UNSET
    next_action: str | UnsetType = UNSET


class Retained(Result):
    """`run archive --older-than-days`: the window, the runs it archived and, when it
    archived nothing because no window was given, why."""

    older_than_days: int
    cutoff: str
    states: list[str]
    archived: list[str]
    count: int
    note: str | UnsetType = UNSET


class ChosenAgent(Result):
    """The agent the config resolves for a role, and which setting chose it."""

    name: str
    argv: list[str]
    source: str


class NextStep(Result):
    """What runs next: the role, its rendered edge prompt and the agent (the name of
    the one in flight, the one the config resolves, or null: none, or `$END`)."""

    role: str
    prompt: str
    agent: ChosenAgent | str | None
    in_flight: bool | UnsetType = UNSET


class RecentStep(Result):
    """A step of the run: its StepNode, role and agent."""

    hash: str
    role: str
    agent: str


class Resumed(Result, kw_only=True):
    """`run resume`: the record, what runs next, the last steps, why the run is
    blocked when the workflow has no edge, and the commands to go on with."""

    run: RunRecord
    next: NextStep | None
    recent_steps: list[RecentStep]
    blocked: str | UnsetType = UNSET
    next_actions: list[str]


class DriveMode(Result):
    mode: Literal["once", "drive"]


class Driven(Result):
    """`run resume --once|--drive`: the record once the engine stepped the run."""

    run: RunRecord
    drive: DriveMode


class Rerun(Result):
    """`run rerun`: the new run, the run it reruns and the chain's first, the workflow
    it runs, the original's steps it took over (their StepNodes) and its record."""

    run_id: str
    rerun_of: str
    origin_run_id: str
    generation: int
    workflow: str
    reused: list[str]
    run: RunRecord


# -- registry --------------------------------------------------------------------------

class ViewStatus(Result):
    status: str
    rows: int


class Counts(Result):
    """Registered workflows, and threads per state (none when the views are unreadable)."""

    workflows: int
    threads: dict[str, int]


class DamagedHead(Result):
    thread: str
    head: str


class Heads(Result):
    """The open threads' heads checked (`registry verify`), and those missing from or
    damaged in the CAS."""

    checked: int
    missing: list[DamagedHead]
    corrupt: list[DamagedHead]


class RepoRuns(Result):
    repo: str
    runs: int
    queue_entries: int


class RunIndex(Result):
    """The run index as persisted; empty (no key) when the views are unreadable."""

    source_fingerprint: str | UnsetType = UNSET
    lifecycles: dict[str, int] | UnsetType = UNSET
    archived: int | UnsetType = UNSET
    repos: list[RepoRuns] | UnsetType = UNSET
    stale_runs: list[str] | UnsetType = UNSET
    stale_count: int | UnsetType = UNSET


class RegistryShown(Result):
    """`registry show`: each view's freshness and rows, durability, the run index and
    the next action."""

    store: str
    scope: str
    status: str
    checkpoint: int
    log_seq: int
    behind: int
    segments: int | UnsetType  # a folder's log: its segment files (a table has none)
    durability: str
    views: dict[str, ViewStatus]
    counts: Counts
    runs: RunIndex
    next_action: str


class Refreshed(Result):
    checkpoint: int
    applied: int
    status: str


class Rebuilt(Result):
    checkpoint: int
    rows: int
    status: str
    # The seq of the snapshot restored (then only the log after it was folded); absent
    # when the whole log was replayed.
    from_snapshot: int | UnsetType = UNSET
    # Why the snapshot kept was not used (its checkpoint is not the log's): absent when
    # there was none, or it was used.
    snapshot_refused: str | UnsetType = UNSET


class SnapshotKept(Result):
    """A snapshot of the views, kept beside them (`uwf registry snapshot`)."""

    snapshot: str  # its file
    checkpoint: int  # the seq of the log line it folded last
    digest: str  # that line's chain digest


class Difference(Result):
    view: str
    key: str
    problem: str


class Verified(Result):
    """`registry verify`: `ok` when a replay into a scratch copy matches the persisted
    views row by row and every open thread's head node is in the CAS, undamaged; else
    each difference (`checkpoint` null: the log is unreadable) and each damaged head."""

    ok: bool
    checkpoint: int | None
    rows: int
    differences: list[Difference]
    heads: Heads
