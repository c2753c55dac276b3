"""The views' checkpoints as one shared row on PostgreSQL (uwf/engine/pgckpt.py), as on
the folder store (tests/contract/test_ckptrows.py): a write moves one row, the
server-side commands included; a view that does not move keeps its own, and a command
finding one leaves it to the ordinary way, which joins it again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE
from tests.contract.test_ckptrows import moved_on_and_joined
from uwf.audit.verify import verify as verify_log
from uwf.engine import ckptrows, pgckpt
from uwf.engine.log import Checkpoint
from uwf.engine.pgdb import PgDatabase
from uwf.engine.pgviews import PgViewStore
from uwf.engine.viewspec import STREAMS, Row, ViewSpec
from uwf.errors import Corrupt
from uwf.queue import pgcalls, sched
from uwf.queue.service import add_batch
from uwf.runs.registry import verify as verify_views
from uwf.store import Store
from uwf.workflows.service import put_workflow

psycopg = pytest.importorskip("psycopg")

SPECS = [ViewSpec("w", 1, columns=("status",), types=("text",)), ViewSpec("s", 1)]


def cp(seq: int) -> Checkpoint:
    return Checkpoint(seq, f"{seq:032x}")


def rows(url: str) -> dict[str, tuple[Any, Any]]:
    with psycopg.connect(url, autocommit=True) as connection:
        return {name: (seq, digest) for name, seq, digest in connection.execute(
            "SELECT name, seq, digest FROM uwf_views")}


def versions(url: str) -> dict[str, int]:
    """Each row's xmin: the transaction that last wrote it."""
    with psycopg.connect(url, autocommit=True) as connection:
        return {name: int(xmin) for name, xmin in connection.execute(
            "SELECT name, xmin::text FROM uwf_views")}


@pytest.fixture
def db(pg_url: str) -> Iterator[PgDatabase]:
    opened = PgDatabase(pg_url, lock_timeout=0.5)
    yield opened
    opened.close()


def test_a_write_moves_the_shared_row_only(db: PgDatabase, pg_url: str) -> None:
    views = PgViewStore(db, SPECS)
    assert views.commit({"w": {"a": Row(b"{}", ("ready",))}},
                        {"w": None, "s": None, STREAMS: None}, cp(1), streams=[("x", 1)])
    before = versions(pg_url)
    moved = {"w": cp(1), "s": cp(1), STREAMS: cp(1)}
    assert views.commit({"s": {"b": Row(b"{}", ())}}, moved, cp(2), streams=[("y", 2)])
    after = versions(pg_url)
    assert [name for name in after if after[name] != before[name]] == [""]
    assert rows(pg_url) == {"": (2, cp(2).digest), "w": (None, None), "s": (None, None),
                            STREAMS: (None, None)}
    again = PgViewStore(db, SPECS)
    assert again.checkpoints() == {"w": cp(2), "s": cp(2), STREAMS: cp(2)}


def test_a_view_that_does_not_move_keeps_its_checkpoint(db: PgDatabase, pg_url: str) -> None:
    """One view moved alone (built alone, or by a uwf that does not know the others):
    the others keep where they were, as their own rows, and join again when moved."""
    both = PgViewStore(db, SPECS)
    assert both.commit({}, {"w": None, "s": None}, cp(1))
    alone = PgViewStore(db, [SPECS[0]])
    assert alone.checkpoints() == {"w": cp(1)}
    assert alone.commit({}, {"w": cp(1)}, cp(2))
    assert rows(pg_url) == {"": (2, cp(2).digest), "w": (None, None), "s": (1, cp(1).digest)}
    moved_on_and_joined(both, cp)
    assert rows(pg_url) == {"": (4, cp(4).digest), "w": (None, None), "s": (None, None)}


def test_a_joined_row_without_a_shared_one_is_a_damaged_view(db: PgDatabase,
                                                              pg_url: str) -> None:
    views = PgViewStore(db, SPECS)
    assert views.commit({}, {"w": None, "s": None}, cp(1))
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("DELETE FROM uwf_views WHERE name = ''")  # a hand edit
    with pytest.raises(Corrupt, match="shared checkpoint that is missing"):
        views.checkpoints()


@pytest.fixture
def store(pg_url: str, tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(pg_url)
    put_workflow(opened, EXAMPLE)
    path = tmp_path / "batch.jsonl"
    path.write_text("".join(json.dumps({"workflow": "solve-issue", "repo": str(tmp_path),
                                        "prompt": f"p{n}"}) + "\n" for n in range(4)))
    add_batch(opened, str(path), opened.settings)
    yield opened
    opened.close()


def test_the_server_side_commands_move_the_shared_row_only(store: Store, pg_url: str) -> None:
    sched.set_policy(store.journal, {"maxConcurrent": 4})
    granted = pgcalls.lease(store, 1, None)  # warm: the procedures made
    assert granted is not None
    before = versions(pg_url)
    granted = pgcalls.lease(store, 1, None)
    assert granted is not None
    assert pgcalls.complete(store, granted.leases[0].id, granted.leases[0].lease_id,
                            None) is not None
    # one call of uwf_write (uwf/engine/pgwrite.py)
    sched.set_policy(store.journal, {"maxConcurrent": 3})
    after = versions(pg_url)
    assert [name for name in after if after[name] != before[name]] == [""]
    assert {seq for name, (seq, _) in rows(pg_url).items() if name} == {None}
    assert rows(pg_url)[""][0] == store.log.head().seq
    assert verify_log(store).ok
    assert verify_views(store).ok


def test_a_view_holding_its_own_row_is_left_to_the_ordinary_way(store: Store,
                                                               pg_url: str) -> None:
    """A view at the head holding its own row (moved alone: the others moved, it
    pinned, by the ordinary way's `pgckpt.write`): the server-side command says stale,
    the ordinary way writes and joins it again, and the next is one call."""
    views = store.journal.views
    assert isinstance(views, PgViewStore)
    signatures = views.signatures()
    with psycopg.connect(pg_url) as connection:  # one transaction, as a commit's
        found = connection.execute(pgckpt.SELECT).fetchall()
        kept = ckptrows.read(found, signatures)
        assert kept.shared is not None
        pgckpt.write(connection, kept, {name: sig for name, sig, _, _ in found},
                     {name: sig for name, sig in signatures.items() if name != "queue"},
                     kept.shared)
    assert rows(pg_url)["queue"][0] == store.log.head().seq
    assert pgcalls.lease(store, 1, None) is None
    leased = sched.lease(store, 1).leases[0]
    assert rows(pg_url)["queue"] == (None, None)
    assert pgcalls.complete(store, leased.id, leased.lease_id, None) is not None
    assert verify_log(store).ok
    assert verify_views(store).ok


def test_a_view_another_uwf_joined_is_left_to_the_ordinary_way(store: Store,
                                                              pg_url: str) -> None:
    """A view this uwf does not know, joined to the shared row (by another version's
    commit, an INSERT): the shared row's `joined` no longer matches this uwf's list
    (schema 6: written by the table's trigger), so the server-side command says stale
    rather than move a checkpoint it does not fold."""
    granted = pgcalls.lease(store, 1, None)
    assert granted is not None  # one call while the joined rows are this uwf's
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("INSERT INTO uwf_views VALUES ('other', '[1]', NULL, NULL)")
    assert pgcalls.lease(store, 1, None) is None
    assert pgcalls.complete(store, granted.leases[0].id, granted.leases[0].lease_id,
                            None) is None
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("DELETE FROM uwf_views WHERE name = 'other'")
    assert pgcalls.complete(store, granted.leases[0].id, granted.leases[0].lease_id,
                            None) is not None
