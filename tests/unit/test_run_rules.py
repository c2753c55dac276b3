"""The run's transition table (uwf/runs/rules.py), walked pair by pair.

What is filed on a run (archived, unarchived) and the link a rerun is born with:
every pair the table forbids is (a) refused by `run archive`, or never written by
any command on a run that exists (a rerun's link), and (b) named by `log verify`
when forged into a log. Every pair it allows folds, in the `runs` view, to the
overlay the table names, in whatever state the thread is, and verifies clean.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.contract.test_views import event_data
from uwf.audit.verify import verify
from uwf.engine.events import GENESIS_PREV, EventData, NewEvent
from uwf.engine.feature import checks_of
from uwf.engine.journal import Outcome
from uwf.errors import NotFound, Rejected
from uwf.runs import decide
from uwf.runs.events import RunArchived, RunRerunLinked, RunUnarchived
from uwf.runs.order import RunOrder
from uwf.runs.projection import RunsProjection
from uwf.runs.rules import KINDS, LINK_STATES, OVERLAYS, TRANSITIONS, next_run
from uwf.runs.service import archive, get_run
from uwf.runs.state import RunPhase
from uwf.store import Store, default_features
from uwf.threads.events import (
    ThreadAsked,
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepped,
    ThreadStepStarted,
)
from uwf.threads.terms import STATES

RUN = "01JD0000000000000000000000"
T = f"thread/{RUN}"
H = "70D2DHWNFR6T8"


def event(kind: str) -> EventData:
    return {"archived": RunArchived("filed"), "unarchived": RunUnarchived("back"),
            "rerun_linked": RunRerunLinked("01JC0000000000000000000000", "/repo",
                                           "01JC0000000000000000000000", 1)}[kind]


STARTED = ThreadStarted(H, "wf", H, "/repo")
# The thread events that bring a new run's thread to each state.
THREAD_IN: dict[str, list[EventData]] = {
    "idle": [STARTED],
    "running": [STARTED, ThreadStepStarted("S1", "planner", "", "mock", 0)],
    "waiting": [STARTED, ThreadStepStarted("S1", "planner", "", "mock", 0),
                ThreadStepped("S1", H, "planner", "$ASK", H),
                ThreadAsked("S1", "planner", "Deploy?", H)],
    "blocked": [STARTED, ThreadBlocked("no-agent", "no agent configured")],
    "ended": [STARTED, ThreadEnded("end")],
    "killed": [STARTED, ThreadEnded("killed")],
}
# What is filed to bring an idle run to each of the table's run states.
FILED: dict[str, list[EventData]] = {
    "unarchived": [],
    "archived": [event("archived")],
    "linked": [event("rerun_linked")],
}


def forged(*events: EventData) -> Store:
    """A store whose log holds `events` on run T, written past every decider."""
    store = Store.memory()
    if events:
        batch = [NewEvent(T, data) for data in events]
        store.journal.write(lambda _views: Outcome(batch, None))
    return store


def problems(store: Store) -> list[str]:
    return [p.problem for p in verify(store).problems if "which is missing" not in p.problem]


# Every forbidden pair: (thread state, run state, kind) -> what `log verify` says.
FORBIDDEN: dict[tuple[str | None, str, str], str] = {
    **{(None, "unarchived", kind): f"run.{kind} before {T} started" for kind in KINDS},
    ("idle", "archived", "archived"): f"{T} archived while already archived",
    ("idle", "unarchived", "unarchived"): f"{T} unarchived while not archived",
    ("idle", "archived", "rerun_linked"): f"{T} linked as a rerun while archived",
    ("idle", "linked", "rerun_linked"): f"{T} linked as a rerun twice",
    **{(state, "unarchived", "rerun_linked"): f"{T} linked as a rerun while {state}"
       for state in STATES if state not in LINK_STATES},
}


def reach(thread: str | None, run: str) -> list[EventData]:
    return [] if thread is None else [*THREAD_IN[thread], *FILED[run]]


def test_the_table_has_a_row_per_overlay_and_names_only_known_kinds() -> None:
    assert set(TRANSITIONS) == set(OVERLAYS)
    assert {kind for row in TRANSITIONS.values() for kind in row} <= set(KINDS)
    assert {target for row in TRANSITIONS.values() for target in row.values()} <= set(OVERLAYS)


# -- (a) the commands refuse every forbidden pair -----------------------------------------

@pytest.mark.parametrize(("thread", "run", "kind"),
                         [pair for pair in FORBIDDEN if pair[2] != "rerun_linked"],
                         ids=str)
def test_run_archive_refuses_a_forbidden_pair(thread: str | None, run: str, kind: str
                                              ) -> None:
    store = forged(*reach(thread, run))
    try:
        with pytest.raises((Rejected, NotFound)) as refused:
            decide.archive(get_run(store.read(), RUN), "", unarchive=kind == "unarchived")
    finally:
        store.close()
    said = refused.value.what
    if thread is None:
        assert said == f"no run {RUN}"
    elif kind == "archived":
        assert said.startswith(f"run {RUN} is already archived (at ")
    else:
        assert said == f"run {RUN} is not archived"


def test_a_rerun_link_is_only_ever_written_with_its_runs_start() -> None:
    """`run rerun` mints a new run and writes its link in the batch of its start, so
    no command links a run that exists; that batch is what the table allows."""
    original = forged(*THREAD_IN["ended"])
    try:
        linked = decide.link(get_run(original.read(), RUN), "again")
    finally:
        original.close()
    assert (linked.rerun_of, linked.origin_run_id, linked.generation) == (RUN, RUN, 1)
    store = forged(STARTED, linked, ThreadEnded("end"))
    try:
        assert problems(store) == []
    finally:
        store.close()


# -- (b) log verify names every forbidden pair --------------------------------------------

@pytest.mark.parametrize(("thread", "run", "kind"), list(FORBIDDEN), ids=str)
def test_log_verify_names_a_forged_forbidden_pair(thread: str | None, run: str,
                                                 kind: str) -> None:
    store = forged(*reach(thread, run), event(kind))
    try:
        assert problems(store) == [FORBIDDEN[thread, run, kind]]
    finally:
        store.close()


# -- every allowed pair folds to the table's target ---------------------------------------

ALLOWED = [(thread, overlay, kind) for overlay, row in TRANSITIONS.items() for kind in row
           for thread in STATES if (thread, overlay, kind) not in FORBIDDEN]


@pytest.mark.parametrize(("thread", "overlay", "kind"), ALLOWED, ids=str)
def test_an_allowed_pair_folds_to_the_tables_target(thread: str, overlay: str, kind: str
                                                    ) -> None:
    target = TRANSITIONS[overlay][kind]
    assert next_run(RunPhase(overlay), event(kind)).overlay == target
    store = forged(*reach(thread, overlay), event(kind))
    try:
        run = get_run(store.read(), RUN)
        assert run.phase.overlay == target
        assert run.archived == (target == "archived")
        assert run.phase.linked == (kind == "rerun_linked")
        assert problems(store) == []
    finally:
        store.close()


def test_a_finished_run_archived_by_the_command_verifies_clean() -> None:
    """`run archive` of an ended or killed run: the log it leaves has no problem (before
    the run's table, `log verify` called it `run.archived after ... ended`)."""
    for thread in ("ended", "killed"):
        store = forged(*THREAD_IN[thread])
        try:
            archive(store, RUN, "done with it")
            archive(store, RUN, unarchive=True)
            assert problems(store) == []
        finally:
            store.close()


# -- the view and verify fold alike -----------------------------------------------------------

RUN_U = "01JD0000000000000000000002"
run_data: st.SearchStrategy[tuple[str, EventData]] = st.tuples(
    st.sampled_from(["thread/01JD0000000000000000000001", f"thread/{RUN_U}"]),
    st.one_of(st.builds(RunArchived, st.sampled_from(["a", "b"])),
              st.builds(RunUnarchived, st.sampled_from(["c"])),
              st.builds(lambda of: RunRerunLinked(of, "/r", of, 1, "again"),
                        st.sampled_from(["01JD0000000000000000000001", RUN_U]))))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(event_data, run_data), min_size=1, max_size=3),
                min_size=1, max_size=14))
def test_the_view_and_verify_fold_any_events_alike(
        batches: list[list[tuple[str, EventData]]]) -> None:
    """Allowed or not: the `runs` view and `log verify` fold a run with the one `evolve`
    (over the thread's state its check folds), so verify holds the very state the view
    stores, but for the record's running digest, which verify keeps none of."""
    store = Store.memory()
    for batch in batches:
        store.journal.write(lambda _views, b=batch: Outcome(  # type: ignore[misc]
            [NewEvent(subject, data) for subject, data in b]))
    checks = checks_of(default_features())
    runs = next(c for kind in checks.values() for c in kind if isinstance(c, RunOrder))
    for line in store.log.read():
        envelope = store.journal.catalog.decode(line.raw)
        for check in checks.get(envelope.type, ()):
            check(envelope)
    view = RunsProjection()
    stored = {key: view.decode(row) for key, row in store.views.scan("runs")}
    assert {f"thread/{key}": msgspec.structs.replace(state, source_fingerprint=GENESIS_PREV)
            for key, state in stored.items()} == runs.runs
