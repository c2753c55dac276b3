"""The server's instructions in a lease+complete cycle on PostgreSQL, counted exactly
(issue 31): a figure the machine's load does not move.

    python bench/pg_server_instructions.py [--short N] [--long N] [--entries N] [--dir DIR]
                                           [--keep]

One throw-away PostgreSQL cluster (`tests.pgkit.Server`) with a uwf store filled (untimed,
`uwf queue add --batch`), then run under `valgrind --tool=callgrind` (every backend
counted on its own, fsync off, autovacuum off). Two connections each run 20 warm-up
cycles and then `--short` and `--long` lease+complete cycles (`sched.lease`,
`sched.complete`, as bench/pg_queue_bench.py's uwf-pg worker); the difference of their
backends' instruction counts over the difference of cycles is a cycle's, its connection's
set-up and warm-up left out. The same for pgproto.py's procedure (`PROTO_SQL`: the
prototype issue 31 measured, a lease and a complete with a fraction of uwf's
semantics) and for the floor (bench/pg_queue_bench.py's FLOOR_SQL: two calls a cycle
that lock, insert one line and commit twice) in the same cluster. And, counted an
append: uwf's durable append (`append`: `sched.set_policy`, one event, as
bench/pg_queue_bench.py's appends) and its primitive (`insert`: one line inserted by one
statement, autocommit: PRIMITIVE_SQL). To measure another commit, put its snapshot
first on PYTHONPATH (see bench/common.py's `code_version`). UWF_BENCH_PG_PORT: another
port for the cluster (two of these benches at once).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from common import REPO, add_common_args, code_version, env_with, fresh_dir
from pg_queue_bench import (
    FLOOR_LINE,
    FLOOR_SQL,
    PRIMITIVE_LINE,
    PRIMITIVE_SQL,
    fill_pg_store,
)

sys.path.append(str(REPO))  # after PYTHONPATH: a snapshot there is what runs
from tests.pgkit import Server, pg_bin  # the tests' throw-away server

WARM = 20
APPENDS = ("append", "insert")  # sides counted an append, not a lease+complete cycle
PORT = int(os.environ.get("UWF_BENCH_PG_PORT", "5498"))  # another port: two benches at once
# The prototype's procedure (../shared/perf-prototypes/pgproto.py's `uwf_lease_p` and
# `uwf_complete_p`, its DDL as it is there): a lease and a complete each one CALL that
# takes a lock, appends one chained line, moves one count and one queue row (one index),
# commits asynchronously and then a small synchronous transaction; none of uwf's
# checkpoints, kept counts by status and pool, pools, policy, instants or entry JSON.
PROTO_SQL = r"""
CREATE TABLE uwf_log (seq bigint PRIMARY KEY, line text NOT NULL);
CREATE TABLE uwf_head (one int PRIMARY KEY, seq bigint NOT NULL, digest text NOT NULL);
CREATE TABLE q (key text PRIMARY KEY, status text NOT NULL, priority int NOT NULL,
                enq bigint NOT NULL, lease text, session text, until bigint,
                attempts int NOT NULL DEFAULT 0, value jsonb NOT NULL);
CREATE INDEX q_ready ON q (status, priority, enq, key);
CREATE TABLE counts (pool text PRIMARY KEY, active int NOT NULL);
CREATE TABLE policy (one int PRIMARY KEY, max_concurrent int NOT NULL);
CREATE TABLE streams (subject text, seq bigint, PRIMARY KEY (subject, seq));

CREATE FUNCTION uwf_append(p_type text, p_subject text, p_data jsonb, p_ms bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE h record; line text; s bigint;
BEGIN
  SELECT seq, digest INTO h FROM uwf_head WHERE one = 1;
  s := h.seq + 1;
  line := jsonb_build_object('seq', s, 'id', md5(random()::text), 'ts', p_ms,
                             'type', p_type, 'subject', p_subject, 'batch', '[1,1]'::jsonb,
                             'data', p_data, 'prev', h.digest)::text;
  INSERT INTO uwf_log VALUES (s, line);
  UPDATE uwf_head SET seq = s, digest = left(encode(sha256(convert_to(line, 'UTF8')), 'hex'), 32)
   WHERE one = 1;
  INSERT INTO streams VALUES (p_subject, s);
  PERFORM pg_notify('uwf_log', s::text);
  RETURN s;
END $$;

CREATE FUNCTION uwf_lease(p_session text, OUT o_key text, OUT o_lease text)
LANGUAGE plpgsql AS $$
DECLARE ms bigint := (extract(epoch from clock_timestamp()) * 1000)::bigint;
        e record; act int; mx int;
BEGIN
  PERFORM pg_advisory_xact_lock(4242);
  SELECT active INTO act FROM counts WHERE pool = 'default';
  SELECT max_concurrent INTO mx FROM policy WHERE one = 1;
  IF act >= mx THEN RETURN; END IF;
  SELECT key, attempts INTO e FROM q WHERE status = 'ready'
   ORDER BY priority, enq, key LIMIT 1;
  IF NOT FOUND THEN RETURN; END IF;
  o_key := e.key;
  o_lease := md5(random()::text);
  PERFORM uwf_append('queue.leased', 'queue/' || e.key,
      jsonb_build_object('leaseId', o_lease, 'session', p_session, 'pool', 'default',
                         'until', ms + 600000, 'attempt', e.attempts + 1), ms);
  UPDATE q SET status = 'leased', lease = o_lease, session = p_session,
               until = ms + 600000, attempts = e.attempts + 1 WHERE key = e.key;
  UPDATE counts SET active = active + 1 WHERE pool = 'default';
END $$;

CREATE FUNCTION uwf_complete(p_key text, p_lease text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE ms bigint := (extract(epoch from clock_timestamp()) * 1000)::bigint; e record;
BEGIN
  PERFORM pg_advisory_xact_lock(4242);
  SELECT status, lease INTO e FROM q WHERE key = p_key;
  IF NOT FOUND OR e.status <> 'leased' OR e.lease IS DISTINCT FROM p_lease THEN
    RETURN false;
  END IF;
  PERFORM uwf_append('queue.completed', 'queue/' || p_key,
      jsonb_build_object('leaseId', p_lease, 'outcome', 'succeeded'), ms);
  UPDATE q SET status = 'done', lease = NULL, until = NULL WHERE key = p_key;
  UPDATE counts SET active = active - 1 WHERE pool = 'default';
  RETURN true;
END $$;

CREATE PROCEDURE uwf_lease_p(p_session text, INOUT o_key text DEFAULT NULL,
                             INOUT o_lease text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  SET LOCAL synchronous_commit = off;
  SELECT * INTO r FROM uwf_lease(p_session);
  o_key := r.o_key; o_lease := r.o_lease;
  COMMIT;  -- the advisory lock goes here; the flush is not waited for
  SET LOCAL synchronous_commit = on;
  PERFORM pg_logical_emit_message(true, 'uwf', '');
  COMMIT;  -- waits for a flush past the first commit
END $$;

CREATE PROCEDURE uwf_complete_p(p_key text, p_lease text, INOUT ok boolean DEFAULT NULL)
LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL synchronous_commit = off;
  ok := uwf_complete(p_key, p_lease);
  COMMIT;
  SET LOCAL synchronous_commit = on;
  PERFORM pg_logical_emit_message(true, 'uwf', '');
  COMMIT;
END $$;
"""
PROTO_FILL = """
DELETE FROM uwf_head; INSERT INTO uwf_head VALUES (1, 0, repeat('0', 32));
DELETE FROM counts; INSERT INTO counts VALUES ('default', 0);
DELETE FROM policy; INSERT INTO policy VALUES (1, 1000000);
INSERT INTO q (key, status, priority, enq, value) SELECT lpad(n::text, 12, '0'), 'ready',
  100 + n % 7, n, jsonb_build_object('prompt', 'Fix issue #' || n || ': the login bug')
  FROM generate_series(1, {count}) n"""


def _uwf_cycles(url: str, count: int) -> int:
    """`count` cycles on a connection of its own; its backend's pid."""
    from uwf.queue import sched
    from uwf.store import Store

    store = Store.open(url)
    try:
        store.read()
        pid = store.journal.log.db.reader.info.backend_pid  # type: ignore[attr-defined]
        for _ in range(WARM + count):
            granted = sched.lease(store, 1).leases[0]
            sched.complete(store, granted.id, granted.lease_id)
        return int(pid)
    finally:
        store.close()


def _floor_cycles(url: str, count: int) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(2 * (WARM + count)):
            conn.execute("CALL floor_call(%b)", (FLOOR_LINE,))
        return int(conn.info.backend_pid)


def _append_cycles(url: str, count: int) -> int:
    """`count` durable appends (`sched.set_policy`, one `sched.policy-set` event each, as
    bench/pg_queue_bench.py's appends) on a connection of its own; its backend's pid."""
    from uwf.queue import sched
    from uwf.store import Store

    store = Store.open(url)
    try:
        store.read()
        pid = store.journal.log.db.reader.info.backend_pid  # type: ignore[attr-defined]
        for n in range(WARM + count):
            sched.set_policy(store.journal, {"maxConcurrent": 64 + n % 2})
        return int(pid)
    finally:
        store.close()


def _primitive_cycles(url: str, count: int) -> int:
    """The appends' primitive (bench/pg_queue_bench.py's PRIMITIVE_SQL: one line inserted
    by one statement, autocommit)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(WARM + count):
            conn.execute("INSERT INTO primitive_lines (line) VALUES (%b)", (PRIMITIVE_LINE,))
        return int(conn.info.backend_pid)


def _proto_cycles(url: str, count: int) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(WARM + count):
            got = conn.execute("CALL uwf_lease_p(%s)", ("s1",)).fetchone()
            assert got is not None
            assert got[0] is not None, got
            conn.execute("CALL uwf_complete_p(%s, %s)", got)
        return int(conn.info.backend_pid)


def _instructions(out: Path, pid: int) -> int:
    for line in (out / f"{pid}.out").read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise SystemExit(f"no summary in callgrind's output of backend {pid}")


@contextlib.contextmanager
def under_callgrind(server: Server, work: Path, *urls: str) -> Iterator[Path]:
    """`server` (stopped) started again under callgrind (every backend counted on its
    own, in the folder yielded: `<pid>.out`), fsync off, autovacuum off; stopped after.
    Each database of `urls` is connected to once first: a database's first backend after
    the start reads the catalogs and writes the relation cache's file (~11 M
    instructions), which no measured run should count."""
    import psycopg

    out = work / "callgrind"
    out.mkdir()
    data = server.folder / "data"
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if prefix:
        shutil.chown(out, "postgres")
    with (work / "valgrind.log").open("w") as log:
        postmaster = subprocess.Popen(
            [*prefix, "valgrind", "--tool=callgrind", "--trace-children=yes",
             f"--callgrind-out-file={out}/%p.out", str(server.bin / "postgres"), "-D",
             str(data), "-k", str(server.socket_dir), "-c", "listen_addresses=", "-p",
             str(PORT), "-c", "fsync=off", "-c", "full_page_writes=off", "-c",
             "autovacuum=off"], stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(600):
            try:
                psycopg.connect(urls[0], connect_timeout=5).close()
                break
            except psycopg.OperationalError:
                time.sleep(1)
        for url in urls[1:]:
            psycopg.connect(url).close()
        yield out
    finally:
        subprocess.run([*prefix, str(server.bin / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "-w", "stop"], capture_output=True, check=False)
        postmaster.wait(timeout=600)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--short", type=int, default=50)
    parser.add_argument("--long", type=int, default=150)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--keep", action="store_true",
                        help="keep callgrind's files (to read with callgrind_annotate)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    work = fresh_dir(args.dir, "pginstr")
    print(f"# the server's instructions a lease+complete cycle; {code_version()}")
    server = Server(work / "pg", pg_bin(), port=PORT)
    server.start()
    uwf_url = server.create_database()
    floor_url = server.create_database()
    proto_url = server.create_database()
    fill_pg_store(uwf_url, work, args.entries + 2 * (WARM + args.long),
                  env_with(UWF_DURABILITY="fsync"))
    import psycopg

    with psycopg.connect(floor_url, autocommit=True) as conn:
        conn.execute(FLOOR_SQL)
        conn.execute(PRIMITIVE_SQL)
    with psycopg.connect(proto_url, autocommit=True) as conn:
        conn.execute(PROTO_SQL)
        conn.execute(PROTO_FILL.format(count=args.entries + 2 * (WARM + args.long)))
        conn.execute("VACUUM ANALYZE q")
    server.stop()
    os.environ.update(UWF_DURABILITY="fsync", UWF_LOCK_TIMEOUT="60")
    sides: dict[str, tuple[Callable[[str, int], int], str]] = {
        "uwf-pg": (_uwf_cycles, uwf_url), "pgproto": (_proto_cycles, proto_url),
        "floor": (_floor_cycles, floor_url), "append": (_append_cycles, uwf_url),
        "insert": (_primitive_cycles, floor_url)}
    with under_callgrind(server, work, uwf_url, proto_url, floor_url) as out:
        pids = {(side, count): run(url, count) for side, (run, url) in sides.items()
                for count in (args.short, args.long)}
    for side in sides:
        spent = (_instructions(out, pids[(side, args.long)])
                 - _instructions(out, pids[(side, args.short)]))
        unit = "an append" if side in APPENDS else "a cycle"
        print(f"{side:>7}: {spent / (args.long - args.short):>12,.0f} instructions {unit} "
              "in its backend")
    if args.keep:
        print("callgrind's files kept:", ", ".join(
            f"{side} {count} cycles {out / f'{pid}.out'}" for (side, count), pid in pids.items()))
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
