"""The queue entry's transition table (uwf/queue/rules.py) read three ways: every
(status, kind) pair it forbids is refused by the command's decider and by the command
on a store, and named by `log verify` once forged into a log; every pair it allows is
decided, and folds to the table's target in the `queue` view and in `log verify`."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uwf.audit.verify import verify
from uwf.engine.clock import format_ts, parse_instant
from uwf.engine.events import Envelope, EventData, NewEvent
from uwf.engine.journal import Outcome
from uwf.errors import NothingToDo, Rejected, UwfError
from uwf.queue import decide, sched, waiting
from uwf.queue import service as queue
from uwf.queue.events import (
    QueueAdded,
    QueueCancelled,
    QueueCompleted,
    QueueDrained,
    QueueLeased,
    QueueReclaimed,
    QueueReleased,
    QueueRenewed,
    QueueReset,
    QueueResumed,
    QueueStatusSet,
    QueueWaiting,
)
from uwf.queue.order import QueueOrder
from uwf.queue.projection import Lease, QueueEntry, QueueProjection
from uwf.queue.results import Drained, Reclaimed
from uwf.queue.rules import (
    KINDS,
    SETTABLE,
    TRANSITIONS,
    Policy,
    evolve,
    kind_of,
    problem,
    refusal,
)
from uwf.queue.terms import STATUSES
from uwf.store import Store

T0 = parse_instant("2026-12-01T10:00:00Z")
TTL = 10_000
ENTRY = "01KB0000000000000000000001"
SUBJECT = f"queue/{ENTRY}"
LEASE = "01KB00000000000000000000AA"  # the entry's live lease, when it has one
OTHER = "01KB00000000000000000000BB"  # a lease the entry never had
POLICY = Policy(lease_ttl_ms=TTL)

FORBIDDEN = [(status, kind) for status in STATUSES for kind in KINDS
             if kind not in TRANSITIONS[status]]
ALLOWED = [(status, kind) for status in STATUSES for kind in TRANSITIONS[status]]

# What `log verify` says of an event in a status the table does not allow it in.
WRONG_STATUS = {
    "queue.leased": "leased while {}",
    "queue.renewed": "the entry is {}, not leased",
    "queue.completed": "the entry is {}, not leased",
    "queue.released": "the entry is {}, not leased",
    "queue.reclaimed": "the entry is {}, not leased",
    "queue.drained": "drained while {}, not ready",
    "queue.reset": "reset while {}, not parked",
    "queue.cancelled": "cancelled while already {}",
    "queue.waiting": "the entry is {}, not leased",
    "queue.resumed": "resumed while {}, not waiting",
}
# What the decider says (None: a batch command that takes nothing, and writes nothing).
REFUSED: dict[str, tuple[type[UwfError], str] | None] = {
    "leased": (NothingToDo, "no queue entry is eligible"),
    **dict.fromkeys(("renewed", "completed", "released", "released_failed", "released_parked"),
                    (Rejected, "queue entry {id} is {status}, not leased")),
    "reclaimed": None,
    "reclaimed_parked": None,
    "drained": None,
    "reset": (Rejected, "queue entry {id} is {status}, not parked"),
    "cancelled": (Rejected, "queue entry {id} is already {status}"),
    "waiting": (Rejected, "queue entry {id} is {status}, not leased"),
    "resumed": (Rejected, "queue entry {id} is {status}, not waiting"),
}
RUN = "01KB00000000000000000000RR"  # the run a waiting entry waits on


def entry_in(status: str, attempts: int = 0) -> QueueEntry:
    """An entry in `status` as the commands leave it: a leased one holds LEASE, live
    until T0 + TTL."""
    lease = Lease(LEASE, T0 + TTL, attempts + 1) if status == "leased" else None
    return QueueEntry(id=ENTRY, repo="/r", priority=100, enqueued_at=format_ts(T0),
                      updated_at=format_ts(T0), status=status, attempts=attempts,
                      lease=lease)


ADDED = entry_in("ready")  # an entry just after its `queue.added`


def event_of(kind: str, state: QueueEntry) -> EventData:
    """An event of `kind` as a command would write it to an entry in `state`: its live
    lease (else LEASE), attempts counted, the status it was in; only the pair can be
    wrong."""
    lease, attempts = state.lease.id if state.lease else LEASE, state.attempts
    if kind.startswith("set_"):
        return QueueStatusSet(kind.removeprefix("set_"), state.status)
    made: dict[str, Callable[[], EventData]] = {
        "added": lambda: QueueAdded(repo="/r", priority=100),
        "leased": lambda: QueueLeased(OTHER, T0 + TTL, attempts + 1),
        "renewed": lambda: QueueRenewed(lease, T0 + 2 * TTL),
        "completed": lambda: QueueCompleted(lease),
        "released": lambda: QueueReleased(lease, False, attempts),
        "released_failed": lambda: QueueReleased(lease, True, attempts + 1, "failed",
                                                 T0 + 1000),
        "released_parked": lambda: QueueReleased(lease, True, attempts + 1, "failed",
                                                 None, True),
        "reclaimed": lambda: QueueReclaimed(lease, attempts + 1, "expired", T0 + 1000),
        "reclaimed_parked": lambda: QueueReclaimed(lease, attempts + 1, "expired", None,
                                                   True),
        "drained": QueueDrained,
        "reset": lambda: QueueReset(attempts),
        "cancelled": lambda: QueueCancelled(state.status),
        "waiting": lambda: QueueWaiting(lease, RUN, "Deploy?"),
        "resumed": lambda: QueueResumed("answered"),
    }
    return made[kind]()


def decided(kind: str, entry: QueueEntry, now: int) -> EventData | None:
    """What the decider of the command that records `kind` makes of `entry` at `now`:
    its event, None when a batch command takes nothing, or its refusal raised."""
    parks = Policy(lease_ttl_ms=TTL, max_attempts=1)  # the first failure parks
    if kind == "leased":
        ((_, leased),) = decide.grant([entry], [OTHER], now, POLICY)
        return leased
    if kind == "renewed":
        return decide.renew(entry, LEASE, now, POLICY)
    if kind == "completed":
        return decide.complete(entry, LEASE, now)
    if kind.startswith("released"):
        return decide.release(entry, LEASE, now, parks if kind == "released_parked" else
                              POLICY, failed=kind != "released")
    if kind.startswith("reclaimed"):
        taken = decide.reclaim([entry], now, parks if kind == "reclaimed_parked" else POLICY)
        return taken[0][1] if taken else None
    if kind == "drained":
        drained = decide.drain([entry])
        return drained[0][1] if drained else None
    if kind == "reset":
        return decide.reset(entry)
    if kind == "cancelled":
        return decide.cancel(entry)
    if kind == "waiting":
        return decide.wait(entry, LEASE, now, RUN, "Deploy?")
    if kind == "resumed":
        return decide.resume(entry, "answered")
    assert kind.startswith("set_"), kind
    return decide.set_status(entry, kind.removeprefix("set_"))


def instant(kind: str) -> int:
    """When the command for `kind` runs: a reclaim once the lease expired, the others
    while it is live."""
    return T0 + TTL if kind.startswith("reclaimed") else T0 + 1


def envelope(seq: int, data: EventData) -> Envelope:
    return Envelope(seq, f"01KB{seq:022d}", format_ts(T0 + seq), data.type, SUBJECT, (1, 1),
                    data, "0" * 32)


# -- the table itself ----------------------------------------------------------------------

def test_the_table_is_the_state_machine_docs_queue_md_draws() -> None:
    """Every other test here reads the table, so this one pins it: a change to the
    machine changes this test and docs/queue.md together."""
    set_any = {"set_ready", "set_drained", "set_parked", "set_cancelled"}
    assert {status: set(row) for status, row in TRANSITIONS.items()} == {
        None: {"added"},
        "ready": {"leased", "drained", "cancelled", *set_any},
        "leased": {"renewed", "completed", "released", "released_failed", "released_parked",
                   "reclaimed", "reclaimed_parked", "cancelled", "waiting", *set_any},
        "parked": {"reset", "cancelled", *set_any},
        "waiting": {"resumed", "cancelled", *set_any},
        "drained": set_any,
        "cancelled": set_any,
    }


def test_the_table_has_a_row_per_status_and_only_known_kinds() -> None:
    assert set(TRANSITIONS) == {None, *STATUSES}
    for row in TRANSITIONS.values():
        assert set(row) <= set(KINDS)
        assert set(row.values()) <= set(STATUSES)
    # A finished entry takes nothing but a status set by hand.
    for status in ("drained", "cancelled"):
        assert set(TRANSITIONS[status]) == {f"set_{s}" for s in SETTABLE}


def test_a_kind_leads_to_one_status_wherever_it_is_allowed() -> None:
    targets: dict[str, set[str]] = {}
    for row in TRANSITIONS.values():
        for kind, target in row.items():
            targets.setdefault(kind, set()).add(target)
    assert all(len(found) == 1 for found in targets.values()), targets
    assert set(targets) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_what_its_event_says(kind: str) -> None:
    assert kind_of(event_of(kind, ADDED)) == kind


# -- a pair the table forbids -------------------------------------------------------------

@pytest.mark.parametrize(("status", "kind"),
                         [pair for pair in FORBIDDEN if pair[1] != "added"])
def test_the_decider_refuses_a_forbidden_pair(status: str, kind: str) -> None:
    """No command adds to an existing entry (an entry's id is new when it is added), so
    `added` has no decider to refuse it: `log verify` names it (below)."""
    entry = entry_in(status)
    expected = REFUSED[kind]
    if expected is None:
        assert decided(kind, entry, instant(kind)) is None
        return
    error, words = expected
    with pytest.raises(error) as refused:
        decided(kind, entry, instant(kind))
    assert refused.value.what == words.format(id=ENTRY, status=status)


def store_with_entry_in(status: str) -> Store:
    """An in-memory store holding ENTRY, taken to `status` by the commands (its lease,
    when leased, live until T0 + TTL)."""
    store = Store.memory(clock=lambda: T0)
    sched.set_policy(store.journal, {"leaseTtlMs": TTL})
    store.journal.write(lambda views: Outcome([NewEvent(SUBJECT, QueueAdded("/r", 100))]))
    if status == "leased":
        sched.lease(store)
    elif status == "drained":
        queue.drain(store)
    elif status == "waiting":
        granted = sched.lease(store).leases[0]
        waiting.wait(store.journal, ENTRY, granted.lease_id, RUN, "Deploy?")
    elif status != "ready":
        sched.set_status(store, ENTRY, status)
    assert queue.show(store.read(), ENTRY).status == status
    return store


def command(kind: str, store: Store) -> object:
    """The command that records `kind`, run on ENTRY."""
    runs: dict[str, Callable[[], object]] = {
        "leased": lambda: sched.lease(store),
        "renewed": lambda: sched.renew(store, ENTRY, LEASE),
        "completed": lambda: sched.complete(store, ENTRY, LEASE),
        "released": lambda: sched.release(store, ENTRY, LEASE),
        "released_failed": lambda: sched.release(store, ENTRY, LEASE, failed=True),
        "released_parked": lambda: sched.release(store, ENTRY, LEASE, failed=True),
        "reclaimed": lambda: sched.reclaim(store.journal),
        "reclaimed_parked": lambda: sched.reclaim(store.journal),
        "drained": lambda: queue.drain(store),
        "reset": lambda: sched.reset(store.journal, ENTRY),
        "cancelled": lambda: queue.cancel(store, ENTRY),
        "waiting": lambda: waiting.wait(store.journal, ENTRY, LEASE, RUN, "Deploy?"),
        "resumed": lambda: waiting.resume_answered(store),
    }
    return runs[kind]()


@pytest.mark.parametrize(("status", "kind"), FORBIDDEN)
def test_the_command_refuses_and_verify_names_a_forbidden_pair(status: str, kind: str
                                                               ) -> None:
    store = store_with_entry_in(status)
    head = store.log.head()
    if kind != "added":
        expected = REFUSED[kind]
        if kind == "resumed":  # a batch command: nothing waits, nothing is resumed
            assert command(kind, store) == []
        elif expected is None:
            nothing = command(kind, store)
            assert isinstance(nothing, Drained | Reclaimed)
            assert nothing.count == 0
        else:
            with pytest.raises(expected[0]):
                command(kind, store)
        assert store.log.head() == head, "a refused command wrote"
    state = store.read().get("queue", ENTRY)
    data = event_of(kind, state)
    store.journal.write(lambda views: Outcome([NewEvent(SUBJECT, data)]))
    words = (f"{SUBJECT} added twice" if kind == "added" else
             f"{data.type} of {SUBJECT}: {WRONG_STATUS[data.type].format(status)}")
    found = verify(store).problems
    assert [(item.seq, item.problem) for item in found] == [(head.seq + 1, words)]


def test_verify_names_an_event_before_its_entry_was_added() -> None:
    store = Store.memory(clock=lambda: T0)
    store.journal.write(lambda views: Outcome([NewEvent(SUBJECT, QueueDrained())]))
    assert [item.problem for item in verify(store).problems] == [
        f"queue.drained before {SUBJECT} was added"]


# -- a pair the table allows --------------------------------------------------------------

@pytest.mark.parametrize(("status", "kind"), ALLOWED)
def test_the_decider_records_an_allowed_pair(status: str, kind: str) -> None:
    entry = entry_in(status)
    if kind == f"set_{status}":  # setting the status the entry has: nothing to do
        with pytest.raises(Rejected, match=f"is already {status}$"):
            decided(kind, entry, instant(kind))
        return
    data = decided(kind, entry, instant(kind))
    assert data is not None
    assert kind_of(data) == kind
    assert refusal(entry, data, instant(kind)) is None


@pytest.mark.parametrize(("status", "kind"), [*[(status, kind) for status, kind in ALLOWED
                                                 if kind != f"set_{status}"],
                                               (None, "added")])
def test_an_allowed_pair_folds_to_the_tables_target(status: str | None, kind: str) -> None:
    target = TRANSITIONS[status][kind]
    entry = None if status is None else entry_in(status)
    state = ADDED if entry is None else entry
    data = event_of(kind, state)
    assert refusal(entry, data, instant(kind)) is None
    folded = QueueProjection().apply(entry, envelope(2, data))
    assert folded is not None
    assert folded.status == target


# -- what else the table judges: the lease, the instant, the counts ---------------------------

LIVE = entry_in("leased", 1)  # its lease LEASE live until T0 + TTL


@pytest.mark.parametrize(("state", "data", "at", "words"), [
    (LIVE, QueueCompleted(OTHER), T0, f"lease {OTHER} is not the live lease {LEASE}"),
    (LIVE, QueueRenewed(LEASE, T0 + 3 * TTL), T0 + TTL,
     f"lease {LEASE} had expired at {format_ts(T0 + TTL)}, before this event "
     f"({format_ts(T0 + TTL)})"),
    (LIVE, QueueReclaimed(LEASE, 2, "forged", T0 + 2000), T0 + TTL - 1,
     f"lease {LEASE} reclaimed at {format_ts(T0 + TTL - 1)}, before it expired at "
     f"{format_ts(T0 + TTL)}"),
    (LIVE, QueueReleased(LEASE, True, 1), T0, "1 attempts recorded where 2 were counted"),
    (LIVE, QueueReleased(LEASE, False, 2), T0, "2 attempts recorded where 1 were counted"),
    (entry_in("ready", 2), QueueLeased(OTHER, T0 + TTL, 1), T0,
     "attempt 1 after 2 failed attempts"),
    (entry_in("parked", 3), QueueCancelled("ready"), None,
     "previous is ready, but the entry was parked"),
    (entry_in("parked", 3), QueueStatusSet("ready", "leased"), None,
     "previous is leased, but the entry was parked"),
    (entry_in("ready"), QueueStatusSet("leased", "ready"), None,
     "status set to 'leased', which is not a status an operator sets"),
    (entry_in("ready"), QueueStatusSet("done", "ready"), None,
     "status set to 'done', which is not a status an operator sets"),
])
def test_verify_names_what_else_is_wrong(state: QueueEntry, data: EventData, at: int | None,
                                         words: str) -> None:
    assert problem(state, data, SUBJECT, at) == f"{data.type} of {SUBJECT}: {words}"


def test_a_holder_is_refused_another_lease_or_an_expired_one() -> None:
    entry = entry_in("leased")
    with pytest.raises(Rejected) as other:
        decide.complete(entry, OTHER, T0)
    assert other.value.what == f"lease {OTHER} is not queue entry {ENTRY}'s lease"
    with pytest.raises(Rejected) as expired:
        decide.renew(entry, LEASE, T0 + TTL, POLICY)
    assert expired.value.what == f"lease {LEASE} expired at {format_ts(T0 + TTL)}"
    assert decide.reclaim([entry], T0 + TTL - 1, POLICY) == []  # still live: kept


def test_a_lease_is_refused_in_backoff_and_names_the_ceiling_reached() -> None:
    waiting = msgspec.structs.replace(entry_in("ready"), next_eligible_at_ms=T0 + 5)
    with pytest.raises(NothingToDo) as backoff:
        decide.grant([waiting], [OTHER], T0 + 4, POLICY, session="s")
    assert backoff.value.what == "no queue entry is eligible for session s"
    assert decide.grant([waiting], [OTHER], T0 + 5, POLICY)[0][0] == waiting
    reached = "1 of 1 leases are active in session s (its ceiling)"
    with pytest.raises(NothingToDo) as ceiling:
        decide.grant([], [], T0, POLICY, session="s", reached=[reached])
    assert ceiling.value.what == reached


def test_an_operator_never_sets_leased() -> None:
    with pytest.raises(Rejected) as refused:
        decide.set_status(entry_in("ready"), "leased")
    assert refused.value.line() == ("an entry is leased only by `uwf queue pick` or "
                                    "`uwf sched lease`; use one of them")


# -- the view and verify fold alike -----------------------------------------------------------

@given(st.lists(st.sampled_from(KINDS), max_size=30))
def test_the_view_and_verify_fold_any_events_alike(kinds: list[str]) -> None:
    """Allowed or not: the view and `log verify` fold an entry with the one `evolve`, so
    verify holds the very state the view stores (a second `queue.added` included: both
    start the entry over), and a forged event is named once."""
    projection = QueueProjection()
    order = QueueOrder({})
    first = envelope(1, QueueAdded("/r", 100))
    entry = projection.apply(None, first)
    order(first)
    for seq, kind in enumerate(kinds, start=2):
        assert entry is not None
        line = envelope(seq, event_of(kind, entry))
        entry = projection.apply(entry, line)
        order(line)
        assert order.queue[SUBJECT] == entry


def test_evolve_follows_only_the_live_lease_and_the_counts_the_event_gives() -> None:
    """Where the view's fold and verify's once disagreed: a renew of a lease that is not
    the live one extends nothing; a release sets the attempts it records."""
    leased = entry_in("leased", 1)
    renewed = evolve(leased, envelope(2, QueueRenewed(OTHER, T0 + 9 * TTL)))
    assert renewed is not None
    assert renewed.lease == leased.lease
    released = evolve(leased, envelope(2, QueueReleased(LEASE, False, 5)))
    assert released is not None
    assert (released.status, released.attempts, released.lease) == ("ready", 5, None)
