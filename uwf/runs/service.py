"""The run registry (SPEC §7): find, classify, resume, archive and rerun runs.

A run is a thread; its record is a row of the `runs` view, folded from the log
(never an authority: delete `views/` and the same records come back). Every
listing is one indexed query over that view, ordered by (createdAt, runId),
so a page costs what it returns however many runs the store holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from uwf import __version__
from uwf.cas.hashing import is_hash
from uwf.cas.store import Cas
from uwf.engine.clock import format_ts, parse_instant
from uwf.engine.journal import Outcome, Views
from uwf.engine.log import EventLog
from uwf.engine.viewspec import ColumnValue, Query
from uwf.errors import Corrupt, NotFound, UsageError
from uwf.payload import UNSET
from uwf.runs.projection import derived_at, lifecycle
from uwf.runs.results import (
    Retained,
    RunCounts,
    RunPage,
    RunProvenance,
    RunRecord,
    RunShown,
    RunWorkflow,
    Tasks,
    UsageTotals,
)
from uwf.runs.state import RunState
from uwf.runs.terms import DEFAULT_LIMIT, DERIVED, LIFECYCLES, SCOPES
from uwf.store import Store
from uwf.threads.attempts import attempts, last_failure, telling
from uwf.threads.projection import ThreadState
from uwf.threads.results import StepInFlight
from uwf.threads.service import check_thread_id, head_of

# The RunRecord's shape (`schemaVersion`): 1 is the first to carry the seed's fields.
RECORD_SCHEMA_VERSION = 1
_MS_PER_DAY = 86_400_000


@dataclass(frozen=True)
class RunFilter:
    """What `run search`, `run list` and `history` select. `repo` and `here` are
    folders the command resolved (`uwf.config.repo.find_repo`): `--repo`'s, and the
    current repo's when `scope` is `repo`."""

    workflow: str | None = None
    status: str | None = None
    text: str | None = None
    repo: str | None = None
    here: str | None = None
    since: str | None = None
    until: str | None = None
    scope: str = "home"
    include_archived: bool = True


def get_run(views: Views, run_id: str) -> RunState:
    check_thread_id(run_id)
    state: RunState | None = views.get("runs", run_id)
    if state is None:
        raise NotFound(f"no run {run_id}", "find runs with `uwf run search`")
    return state


def damaged_nodes(cas: Cas, run: RunState, *, steps: bool = True) -> dict[str, list[str]]:
    """The nodes the run refers to that the CAS does not hold (`missing`) or holds
    damaged (`corrupt`: the file does not hash to its name, or is no node at all): its
    workflow, its start, and every step `thread log` reads (each StepNode from the head
    back through `prev`, and each one's output and detail nodes; the walk stops at a
    damaged StepNode, whose `prev` cannot be read). Each is read and its hash checked
    (once per process per node), so an edited node is never taken for a healthy one;
    empty lists when all is well. `steps=False` (a listing's rows): the head StepNode
    only, not the steps before it nor their outputs."""
    found: dict[str, list[str]] = {"missing": [], "corrupt": []}
    seen: set[str] = set()

    def read(hash_: str) -> dict[str, Any] | None:
        """The node's payload when it is whole (an object), else None, its damage noted."""
        seen.add(hash_)
        try:
            payload = cas.get(hash_).payload
        except NotFound:
            found["missing"].append(hash_)
            return None
        except Corrupt:
            found["corrupt"].append(hash_)
            return None
        return payload if isinstance(payload, dict) else {}

    thread = run.thread
    for hash_ in (thread.workflow, thread.start):
        if hash_ not in seen:
            read(hash_)
    step_hash = thread.head
    while isinstance(step_hash, str) and step_hash not in seen:
        step = read(step_hash)
        if step is None:
            break
        if not steps:
            break
        for field in ("output", "detail"):
            ref = step.get(field)
            if isinstance(ref, str) and ref not in seen:
                read(ref)
        step_hash = step.get("prev")
    return found


def freshness_of(damage: dict[str, list[str]]) -> str:
    """`missing` when a node is gone, else `corrupt` when one is damaged, else `valid`."""
    return "missing" if damage["missing"] else "corrupt" if damage["corrupt"] else "valid"


def state_path(store: Store) -> str:
    """Where a run's source of truth is: the store's event log (its folder's `events`,
    its database, or `:memory:` for the in-memory store)."""
    return str(store.root / "events") if store.root is not None else store.location


def record(run: RunState, now_ms: int, freshness: str = "valid", *,
           source: str | None = None, stale: bool = False) -> RunRecord:
    """A RunRecord as SPEC §7 and the run-registry seed list its fields (docs/runs.md).

    `source` is the record's statePath (`state_path(store)`); `stale` says that the
    log holds events of the run the views had not folded when it was read."""
    thread = run.thread
    provenance = None
    if run.provenance is not None:
        link = run.provenance
        provenance = RunProvenance(rerun_of=link.rerun_of, rerun_of_repo=link.rerun_of_repo,
                                   origin_run_id=link.origin_run_id,
                                   generation=link.generation, reason=link.reason,
                                   incremental=link.incremental)
    flight = thread.in_flight
    running = int(flight is not None)
    return RunRecord(
        schema_version=RECORD_SCHEMA_VERSION,
        run_id=thread.thread,
        app_version=__version__,
        workflow=RunWorkflow(name=thread.name, hash=thread.workflow),
        title=run.title,
        repo=thread.repo,
        run_dir=None,
        state_path=source,
        created_at=thread.created_at,
        updated_at=thread.updated_at,
        loop_stage=loop_stage(thread),
        lifecycle=lifecycle(run, now_ms),
        derived_lifecycle=derived_at(run, now_ms),
        archived=run.archived,
        archived_at=run.archived_at,
        archive_reason=run.archive_reason,
        steps=thread.steps,
        reused_steps=run.reused_steps,
        tasks=Tasks(total=thread.steps + thread.failures + running, pending=0,
                    running=running, failed=thread.failures, completed=thread.steps),
        commit_count=0,
        verifier_gated_commit_count=0,
        open_feedback_count=int(thread.state == "blocked"),
        last_role=thread.last_role,
        last_status=thread.last_status,
        head=head_of(thread),
        in_flight=None if flight is None else StepInFlight(
            role=flight.role, agent=flight.agent, started_at=flight.started_at),
        usage=usage_record(run),
        inputs_digest=run.inputs_digest,
        source_fingerprint=run.source_fingerprint,
        provenance=provenance,
        freshness=freshness,
        stale=stale,
        last_failure=last_failure(thread) or UNSET,
    )


def loop_stage(thread: ThreadState) -> str:
    """Where the run is in its loop, from the log alone (no node is read): the role of
    the step in flight, else the role it is blocked at, else `$END` once it reached
    it, else the last role that stepped (`$START` before the first step)."""
    if thread.in_flight is not None:
        return thread.in_flight.role
    if thread.state == "blocked" and thread.blocked_role is not None:
        return thread.blocked_role
    if thread.state == "waiting" and thread.asked is not None:
        return thread.asked.role
    if thread.state == "ended":
        return "$END"
    return thread.last_role or "$START"


def usage_record(run: RunState) -> UsageTotals | None:
    """The usage the run's steps reported, summed (None: no step reported any)."""
    usage = run.usage
    if usage is None:
        return None
    # A sum of binary fractions (0.1 + 0.2) is shown at 10 decimals, not 0.30000000000000004.
    cost = None if usage.cost is None else round(usage.cost, 10)
    return UsageTotals(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                       cost=cost, reported_steps=usage.reported_steps)


class _Subject(msgspec.Struct):
    subject: str = ""


def runs_after(log: EventLog, seq: int) -> dict[str, None]:
    """The runs (thread ids, in log order) that events after `seq` are about: the runs
    a view checkpointed at `seq` is stale for. Reads as many lines as the log is ahead."""
    seen: dict[str, None] = {}
    decoder = msgspec.json.Decoder(_Subject)
    for line in log.read(after=seq):
        try:
            subject = decoder.decode(line.raw).subject
        except (msgspec.DecodeError, UnicodeDecodeError):  # fail closed, naming it
            raise Corrupt(f"log line {line.seq} ({line.where}) is not a valid event",
                          "run `uwf log verify`") from None
        if subject.startswith("thread/"):
            seen.setdefault(subject.removeprefix("thread/"), None)
    return seen


def _stale_since(log: EventLog, views: Views) -> dict[str, None]:
    """The runs with events after the checkpoint `views` was caught up to: a write
    that landed while this read ran (usually none: one comparison of log heads)."""
    if log.head().seq <= views.head.seq:
        return {}
    return runs_after(log, views.head.seq)


def _fresh_record(store: Store, run: RunState, now_ms: int, stale: dict[str, None]
                  ) -> RunRecord:
    return record(run, now_ms, freshness_of(damaged_nodes(store.cas, run, steps=False)),
                  source=state_path(store), stale=run.thread.thread in stale)


# -- search, list, history -----------------------------------------------------------

def search(store: Store, filters: RunFilter, limit: int | None = DEFAULT_LIMIT,
           offset: int = 0, *, newest_first: bool = False) -> RunPage:
    """Runs the filters select, by (createdAt, runId) (newest first for history)."""
    views = store.read()
    now = store.clock()
    where = _where(views, filters, now)
    order = ("-created_at", "-key") if newest_first else ("created_at", "key")
    query = Query("runs", tuple(where), filters.text or None, order, limit, offset)
    found = views.query(query)
    stale = _stale_since(store.log, views)
    runs = [_fresh_record(store, run, now, stale) for run in found]
    return RunPage(scope=filters.scope, total=views.count(query), limit=limit, offset=offset,
                   runs=runs)


def counts(views: Views, scope: str = "home", here: str | None = None) -> RunCounts:
    """Runs per derived lifecycle, and how many are archived: kept counts (home) or an
    index count per lifecycle (repo: `here`, the current repo), never a scan of the
    runs."""
    lifecycles, archived = lifecycle_counts(views, scoped(scope, here))
    return RunCounts(scope=scope, total=sum(lifecycles.values()), lifecycles=lifecycles,
                     archived=archived)


class _Counted(Protocol):
    def counts(self, view: str, column: str) -> dict[ColumnValue, int]: ...

    def count(self, query: Query) -> int: ...


def lifecycle_counts(views: _Counted, repo: str | None) -> tuple[dict[str, int], int]:
    """(runs per derived lifecycle, by name, none at 0; archived runs) of every repo, or
    of `repo`."""
    if repo is None:
        found = views.counts("runs", "derived")
        archived = views.counts("runs", "archived").get(1, 0)
    else:
        found = {state: views.count(Query("runs", (("repo", "=", repo),
                                                   ("derived", "=", state))))
                 for state in DERIVED}
        archived = views.count(Query("runs", (("repo", "=", repo), ("archived", "=", 1))))
    return {str(k): n for k, n in sorted(found.items(), key=lambda i: str(i[0])) if n}, archived


def scoped(scope: str, here: str | None) -> str | None:
    """The repo a `scope` keeps to: `here` (the current repo, which the command
    resolved) for `repo`, None (every repo) for `home`."""
    if scope not in SCOPES:
        raise UsageError(f"unknown scope {scope!r}", "give repo or home")
    if scope == "home":
        return None
    if here is None:
        raise ValueError("scope repo: the command gives the current repo (`here`)")
    return here


def _where(views: Views, filters: RunFilter, now: int) -> list[tuple[str, str, Any]]:
    where: list[tuple[str, str, Any]] = []
    here = scoped(filters.scope, filters.here)
    if filters.status is not None:
        where.extend(status_terms(filters.status, now))
    if not filters.include_archived:
        where.append(("archived", "=", 0))
    if filters.workflow is not None:
        where.append(_workflow_term(views, filters.workflow))
    if filters.repo is not None:
        where.append(("repo", "=", filters.repo))
    if here is not None:
        where.append(("repo", "=", here))
    if filters.since is not None:
        where.append(("created_at", ">=", format_ts(parse_instant(filters.since, "--since"))))
    if filters.until is not None:
        where.append(("created_at", "<=", format_ts(parse_instant(filters.until, "--until"))))
    return where


def status_terms(status: str, now: int) -> list[tuple[str, str, Any]]:
    """A lifecycle word as index terms: `archived` is the overlay; every other word
    matches the derived lifecycle, archived runs included (`--include-archived`)."""
    if status not in LIFECYCLES:
        raise UsageError(f"unknown status {status!r}", f"give one of {', '.join(LIFECYCLES)}")
    if status == "archived":
        return [("archived", "=", 1)]
    if status == "running":
        return [("derived", "=", "running"), ("deadline", ">=", now)]
    if status == "stalled":
        return [("derived", "=", "running"), ("deadline", "<", now)]
    return [("derived", "=", status)]


def _workflow_term(views: Views, ref: str) -> tuple[str, str, str]:
    """A registered name matches runs of any version of it; a hash, runs of that one."""
    if views.get("workflows", ref) is not None:
        return ("workflow", "=", ref)
    if is_hash(ref):
        return ("workflow_hash", "=", ref)
    raise NotFound(f"no workflow named {ref!r}", "list them with `uwf workflow list`")


# -- show ----------------------------------------------------------------------------

def show(store: Store, run_id: str, here: str | None = None) -> RunShown:
    """One run. When a node it refers to is gone or damaged: `found: false`, freshness
    `missing` or `corrupt` (an unreadable run state is treated as missing, never as
    success), and the last-known record under `lastKnown`, never as a live status.
    With `here` (`--scope repo`: the current repo), a run of another repo is not
    found."""
    views = store.read()
    run = get_run(views, run_id)
    if here is not None and run.thread.repo != here:
        raise NotFound(f"run {run_id} is of repo {run.thread.repo}, not of this one "
                       f"({here})", "drop --scope repo, or run it from that repo")
    now = store.clock()
    stale = run_id in _stale_since(store.log, views)
    damage = damaged_nodes(store.cas, run)
    freshness = freshness_of(damage)
    shown = record(run, now, freshness, source=state_path(store), stale=stale)
    tried = attempts(views, run_id)
    if telling(tried):
        shown.attempts = tried
    if freshness != "valid":
        return RunShown(found=False, freshness=freshness, missing_nodes=damage["missing"],
                        corrupt_nodes=damage["corrupt"], last_known=shown,
                        next_action="restore the nodes from a backup, or archive the run; "
                                    "`json-cas verify --all` lists what else is damaged")
    return RunShown(found=True, freshness="valid", run=shown)


# -- archive -------------------------------------------------------------------------

def archive(store: Store, run_id: str, reason: str = "", *, unarchive: bool = False
            ) -> RunShown:
    from uwf.engine.events import NewEvent
    from uwf.runs import decide as runs

    def decide(views: Views) -> Outcome[None]:
        data = runs.archive(get_run(views, run_id), reason, unarchive=unarchive)
        return Outcome([NewEvent(f"thread/{run_id}", data)], None)

    store.journal.write(decide)
    return show(store, run_id)


def retain(store: Store, older_than_days: int, states: Iterable[str] = ()) -> Retained:
    """Archive every run not archived whose last activity (updatedAt) is older than the
    window, and whose derived lifecycle is among `states` when any are given. A window
    of 0 days archives nothing: retention is opt-in."""
    from uwf.engine.events import NewEvent
    from uwf.runs import decide as runs

    wanted = tuple(dict.fromkeys(states))
    if unknown := [state for state in wanted if state not in DERIVED]:
        raise UsageError(f"unknown state {unknown[0]!r}", f"give one of {', '.join(DERIVED)}")
    if older_than_days < 0:
        raise UsageError("--older-than-days must be 0 or more", "give a number of days")
    now = store.clock()
    cutoff = format_ts(max(0, now - older_than_days * _MS_PER_DAY))  # no earlier than 1970
    result = Retained(older_than_days=older_than_days, cutoff=cutoff, states=list(wanted),
                      archived=[], count=0)
    if older_than_days == 0:
        result.note = "no window given: nothing archived (give --older-than-days N)"
        return result
    reason = f"retention: no activity for {older_than_days} days"

    def decide(views: Views) -> Outcome[list[str]]:
        where: list[tuple[str, str, Any]] = [("archived", "=", 0), ("updated_at", "<", cutoff)]
        if wanted:
            where.append(("derived", "in", wanted))
        found = views.query(Query("runs", tuple(where)))  # none archived: none refused
        events = [NewEvent(f"thread/{run.thread.thread}", runs.archive(run, reason))
                  for run in found]
        return Outcome(events, [run.thread.thread for run in found])

    result.archived = store.journal.write(decide)
    result.count = len(result.archived)
    return result
