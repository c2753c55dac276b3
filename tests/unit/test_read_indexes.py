"""The runs', the threads' and the steps' secondary indexes are made by the first reads
that may be planned on them, not by the replay that loads them (uwf/engine/readindex.py,
docs/format.md "Views"): a full replay leaves those views without them, a listing
makes those it may use (`run list` its order's, `--status` its filter's), a connection
that may not write them (read-only, busy) reads on without them, and a snapshot
keeps those views' rows without them, whatever indexes the views had."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import Cli
from tests.unit.test_view_plans import write_runs
from tests.viewkit import HASHES
from uwf.engine import readindex
from uwf.engine.viewspec import Query
from uwf.store import Store

ON_READ = ("v_runs", "v_threads", "v_steps")


def indexes(root: Path, name: str = "views.sqlite3") -> dict[str, set[str]]:
    """The secondary indexes (`i_*`) of each table, by table."""
    db = sqlite3.connect(root / "views" / name)
    try:
        found: dict[str, set[str]] = {}
        for index, table in db.execute(
                "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND "
                "name LIKE 'i\\_%' ESCAPE '\\'"):
            found.setdefault(table, set()).add(index)
        return found
    finally:
        db.close()


def replayed(env: Cli) -> None:
    store = Store.open(env.home)
    write_runs(store, 12)
    store.journal.rebuild_views(snapshot=False)
    store.close()


def test_a_replay_leaves_them_out_and_the_first_listing_makes_them(env: Cli) -> None:
    replayed(env)
    made = indexes(env.home)
    assert not any(made.get(table) for table in ON_READ), made
    assert made.get("v_queue")  # a view that makes its indexes at the load, as before
    listed = env.run("run", "list", "--limit", "5")
    assert listed.code in (0, 1), listed.err  # (1: the test's heads are in no CAS)
    made = indexes(env.home)
    assert made["v_runs"] == {"i_runs_0"}, made  # (created_at, key): its order's
    assert "v_threads" not in made  # the runs' listing made the runs' only
    failed = env.run("run", "list", "--status", "failed", "--limit", "5")
    assert failed.code in (0, 1), failed.err
    # (derived, created_at, key) and (derived, deadline): led by the filter's column
    assert indexes(env.home)["v_runs"] == {"i_runs_0", "i_runs_1", "i_runs_2"}
    threads = env.run("thread", "list")
    assert threads.code in (0, 1), threads.err
    assert indexes(env.home)["v_threads"] == {"i_threads_0"}  # (open, key)
    opened = Store.open(env.home)
    views = opened.read()
    assert views.query(Query("steps", (("key", ">", "0"),), limit=1)) != []
    assert "v_steps" not in indexes(env.home)  # a key range: by the table's key
    views.query(Query("steps", (("head", "=", HASHES[0]),), limit=1))  # a rerun's lookup
    opened.close()
    assert indexes(env.home)["v_steps"] == {"i_steps_0"}


def test_a_snapshot_holds_those_views_without_them(env: Cli) -> None:
    replayed(env)
    for argv in (("run", "list"), ("thread", "list"), ("run", "list", "--repo", "/repo2")):
        assert env.run(*argv).code in (0, 1)
    assert indexes(env.home)["v_runs"] == {"i_runs_0", "i_runs_4"}
    before = env.run("--json", "run", "list", "--repo", "/repo2")
    kept = env.run("registry", "snapshot")
    assert kept.code == 0, kept.err
    [snapshot] = [path.name for path in (env.home / "views").glob("snapshot-*.sqlite3")]
    held = indexes(env.home, snapshot)
    assert not any(held.get(table) for table in ON_READ), held
    assert held.get("v_queue")
    rebuilt = env.run("registry", "rebuild")
    assert rebuilt.code == 0, rebuilt.err
    after = env.run("--json", "run", "list", "--repo", "/repo2")
    assert (after.code, after.out) == (before.code, before.out)
    assert indexes(env.home)["v_runs"] == {"i_runs_0", "i_runs_4"}  # its order, its filter


def test_a_connection_that_may_not_write_reads_on_and_looks_again(env: Cli) -> None:
    replayed(env)
    opened = Store.open(env.home)
    spec = opened.journal.projections["runs"].spec()
    opened.close()
    path = env.home / "views" / "views.sqlite3"
    read_only = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    query = Query("runs", (("repo", "=", "/repo1"),), order=("created_at",))
    known: dict[str, tuple[int, set[str]]] = {}
    try:
        readindex.ensure(read_only, spec, query, known)
        assert readindex.present(read_only, spec) == set()  # goes by the table
        inside = sqlite3.connect(path, isolation_level=None, timeout=0)
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another process's commit, held past the wait
        readindex.ensure(inside, spec, query, known)  # busy: not made, no error
        writer.execute("ROLLBACK")
        writer.close()
        assert readindex.present(inside, spec) == set()
        inside.execute("BEGIN")
        readindex.ensure(inside, spec, query, known)  # inside a transaction: not made
        inside.execute("ROLLBACK")
        assert readindex.present(inside, spec) == set()
        readindex.ensure(inside, spec, query, known)  # the next read tries again
        assert readindex.present(inside, spec) == {"i_runs_0", "i_runs_4"}
        assert known["runs"][1] == {"i_runs_0", "i_runs_4"}
        inside.close()
    finally:
        read_only.close()


def test_a_snapshot_an_earlier_uwf_took_with_them_is_restored_as_it_is(env: Cli) -> None:
    """An earlier uwf's snapshot holds every index: the same views (no version moved),
    restored with them, and read the same."""
    replayed(env)
    before = env.run("--json", "run", "list", "--status", "failed")
    kept = env.run("registry", "snapshot")
    assert kept.code == 0, kept.err
    [snapshot] = (env.home / "views").glob("snapshot-*.sqlite3")
    opened = Store.open(env.home)
    specs = [opened.journal.projections[name].spec() for name in ("runs", "threads")]
    opened.close()
    db = sqlite3.connect(snapshot)
    for spec in specs:
        for statement in readindex.statements(spec):
            db.execute(statement)
    db.commit()
    db.close()
    rebuilt = env.run("--json", "registry", "rebuild")
    assert rebuilt.code == 0, rebuilt.err
    assert '"fromSnapshot"' in rebuilt.out
    assert len(indexes(env.home)["v_runs"]) == 7
    after = env.run("--json", "run", "list", "--status", "failed")
    assert (after.code, after.out) == (before.code, before.out)
