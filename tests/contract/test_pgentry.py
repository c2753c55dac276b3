"""A queue entry's row on PostgreSQL, its JSON and its overlay (uwf/queue/pgentry.py,
schema 7), against a real server (tests/pgkit.py): the value a read builds from the two
is msgspec's bytes of the entry with the overlay's fields, as `pgentry.entry` builds it
in Python for a complete's answer; an empty overlay reads the JSON as it is."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from uwf.queue import pgentry
from uwf.queue.events import BrokerRef
from uwf.queue.projection import Lease, QueueEntry

psycopg = pytest.importorskip("psycopg")

ENTRIES = [
    QueueEntry(id="x", repo="/r \u2028 \x7f", priority=1, enqueued_at="t", updated_at="t",
               prompt="a\"b\\c\n\u00e9\x01", expected_artifacts=["p", "q"],
               undelivered=[3, 4]),
    # A `, ` and a quote inside list items; a lease and a broker (nested records);
    # integers past 32 bits; a boolean.
    QueueEntry(id="y", repo="r", priority=-5, enqueued_at="t", updated_at="t",
               expected_artifacts=['x", ', '", "', "\\", "", "\t\x1f"],
               lease=Lease("l", 2**40, 3, 'a "}'), next_eligible_at_ms=7,
               broker=BrokerRef("h", tls=True, username="u"), last_seq=2**33),
    # The fields' own bytes inside strings, and a backslash before a quote.
    QueueEntry(id="z", repo='r\\",\"status\":', priority=0, enqueued_at="t",
               updated_at=',"status":"x"', status="ready", run=',"run":null',
               note=',"attempts":9,"lease":null,"events":3', session=',"session":"s"',
               expected_artifacts=[',"nextEligibleAtMs":1', '\\'], attempts=2**35,
               events=41, parked_reason=',"events":5,"broker":null'),
]
# An overlay as a lease leaves it (a lease, the run as in the JSON) and as a complete
# does (no lease, a run named, two events added).
OVERLAYS = [
    {"ts": "2026-03-02T09:00:00Z", "status": "leased", "lease": Lease("l2", 2**41, 4, "s"),
     "run": None, "events": 1},
    {"ts": '2026-03-02T09:00:01Z "', "status": "drained", "lease": None, "run": 'r "1"\\',
     "events": 2},
]


def built(pg_url: str, entry: QueueEntry, overlay: dict[str, Any] | None) -> bytes:
    """The value a read of a row holding `entry` and `overlay` builds in the server."""
    columns = ", ".join(f"{name} {kind}" for name, kind in pgentry.COLUMNS)
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f"CREATE TEMP TABLE q (key text, value bytea, c_status text, "
                           f"{columns})")
        row = (None, None, None, None) if overlay is None else (
            overlay["ts"], None if overlay["lease"] is None else
            msgspec.json.encode(overlay["lease"]).decode(),
            None if overlay["run"] is None else msgspec.json.encode(overlay["run"]).decode(),
            overlay["events"])
        connection.execute("INSERT INTO q VALUES ('k', %s, %s, %s, %s, %s, %s)",
                           (msgspec.json.encode(entry),
                            entry.status if overlay is None else overlay["status"], *row))
        found = connection.execute(f"SELECT {pgentry.overlay().value_sql} FROM q").fetchone()
    assert found is not None
    return bytes(found[0])


@pytest.mark.parametrize("overlay", OVERLAYS, ids=["leased", "completed"])
@pytest.mark.parametrize("entry", ENTRIES, ids=["escapes", "nested", "markers"])
def test_a_row_reads_as_msgspec_writes_the_entry(pg_url: str, entry: QueueEntry,
                                                 overlay: dict[str, Any]) -> None:
    want = msgspec.structs.replace(
        entry, updated_at=overlay["ts"], status=overlay["status"], lease=overlay["lease"],
        run=entry.run if overlay["run"] is None else overlay["run"],
        next_eligible_at_ms=None, events=entry.events + overlay["events"])
    assert built(pg_url, entry, overlay) == msgspec.json.encode(want)
    run_json = None if overlay["run"] is None else msgspec.json.encode(overlay["run"]).decode()
    assert pgentry.entry(msgspec.json.encode(entry), ts=overlay["ts"], status=overlay["status"],
                         lease=overlay["lease"], run_json=run_json,
                         events=overlay["events"]) == want


@pytest.mark.parametrize("entry", ENTRIES, ids=["escapes", "nested", "markers"])
def test_an_empty_overlay_reads_the_json_as_it_is(pg_url: str, entry: QueueEntry) -> None:
    assert built(pg_url, entry, None) == msgspec.json.encode(entry)
