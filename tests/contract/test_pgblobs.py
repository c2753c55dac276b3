"""The CAS's nodes in PostgreSQL (uwf/cas/pgblobs.py) beyond its contract
(tests/contract/test_contract.py): when a node written outside and inside a writer's section is
committed, and a row altered behind the CAS's back is caught as the file one is."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from uwf.cas.builtins import builtin_hash
from uwf.cas.hashing import node_hash
from uwf.cas.pgblobs import PgBlobs
from uwf.cas.store import Cas
from uwf.engine.pgdb import PgDatabase
from uwf.engine.pglog import PgLog
from uwf.errors import Corrupt


@pytest.fixture
def db(pg_url: str) -> Iterator[PgDatabase]:
    database = PgDatabase(pg_url)
    yield database
    database.close()


@pytest.fixture
def other(pg_url: str) -> Iterator[PgBlobs]:
    """The same nodes, seen from another process's connections."""
    database = PgDatabase(pg_url)
    yield PgBlobs(database)
    database.close()


def test_a_node_written_outside_a_section_is_committed_at_once(db: PgDatabase,
                                                                other: PgBlobs) -> None:
    hash_ = Cas(PgBlobs(db), clock=lambda: 1).put_text("before its events")
    assert other.read(hash_) is not None
    assert other.hash_rule() == "json-cas"


def test_a_node_written_in_a_section_commits_or_rolls_back_with_it(db: PgDatabase,
                                                                    other: PgBlobs) -> None:
    log, cas = PgLog(db), Cas(PgBlobs(db), clock=lambda: 1)
    cas.ensure_builtins()

    def refused() -> str:
        with log.exclusive():
            hash_ = cas.put_text("refused")
            assert cas.blobs.exists(hash_)  # the section reads what it wrote
            raise RuntimeError(hash_)

    with pytest.raises(RuntimeError) as failed:
        refused()
    gone = str(failed.value)
    assert not PgBlobs(db).exists(gone)
    assert not other.exists(gone)
    with log.exclusive():
        kept = cas.put_text("kept")
        assert not other.exists(kept)  # not committed until the section ends
    assert other.exists(kept)


def test_an_altered_row_is_caught_as_an_altered_file_is(db: PgDatabase, pg_url: str) -> None:
    cas = Cas(PgBlobs(db), clock=lambda: 1)
    hash_ = cas.put_text("original")
    with psycopg.connect(pg_url, autocommit=True) as editor:
        editor.execute("UPDATE uwf_nodes SET data = convert_to(replace(convert_from(data, "
                       "'UTF8'), 'original', 'altered'), 'UTF8') WHERE hash = %s", (hash_,))
    fresh = Cas(PgBlobs(db), clock=lambda: 2)
    assert fresh.verify(hash_) == [f"content hashes to {node_hash(builtin_hash('Text'), 'altered')}"
                                   ": the node was altered"]
    with pytest.raises(Corrupt, match="does not hash to its name"):
        fresh.get(hash_)


def test_age_is_the_servers_time_since_the_write(db: PgDatabase, pg_url: str) -> None:
    blobs = PgBlobs(db)
    blobs.write("0000000000000", b"{}")
    assert 0 <= blobs.age("0000000000000") < 5
    with psycopg.connect(pg_url, autocommit=True) as editor:
        editor.execute("UPDATE uwf_nodes SET created = created - interval '1 hour'")
    assert 3600 <= blobs.age("0000000000000") < 3605
    with pytest.raises(KeyError):
        blobs.age("1111111111111")
