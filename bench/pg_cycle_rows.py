"""What a lease+complete cycle writes on PostgreSQL (issue 31): the WAL bytes a cycle and
each table's row updates, HOT or not (`pg_stat_user_tables`), counted, so a figure the
machine's load does not move.

    python bench/pg_cycle_rows.py [--cycles N] [--entries N] [--dir DIR]

One throw-away cluster (`tests.pgkit.Server`), a store with `--entries` ready entries,
then `--cycles` lease+complete cycles in one process (`sched.lease`, `sched.complete`,
as bench/pg_queue_bench.py's uwf-pg worker). To measure another commit, put its
snapshot first on PYTHONPATH (see bench/common.py's `code_version`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from common import REPO, add_common_args, code_version, fresh_dir

sys.path.append(str(REPO))  # after PYTHONPATH: a snapshot there is what runs
from tests.pgkit import Server, pg_bin  # the tests' throw-away server

PORT = 5497
TABLES = ("uwf_events", "uwf_streams", "uwf_v_queue", "uwf_counts", "uwf_views")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--entries", type=int, default=300)
    add_common_args(parser)
    args = parser.parse_args(argv)
    import psycopg

    from tests.conftest import EXAMPLE
    from uwf.queue import sched
    from uwf.queue.service import add_batch
    from uwf.store import Store
    from uwf.workflows.service import put_workflow

    work = fresh_dir(args.dir, "pgrows")
    print(f"# what a lease+complete cycle writes on PostgreSQL; {code_version()}")
    server = Server(work / "pg", pg_bin(), port=PORT)
    server.start()
    try:
        url = server.create_database()
        store = Store.open(url)
        put_workflow(store, EXAMPLE)
        batch = work / "batch.jsonl"
        batch.write_text("".join(json.dumps({"workflow": "solve-issue", "repo": str(work),
                                             "prompt": f"p{n}"}) + "\n"
                                 for n in range(args.entries)))
        add_batch(store, str(batch), store.settings)
        sched.set_policy(store.journal, {"maxConcurrent": 64})
        for _ in range(5):  # the procedures made
            granted = sched.lease(store, 1).leases[0]
            sched.complete(store, granted.id, granted.lease_id)
        store.close()  # its backend's statistics flushed as it exits
        time.sleep(1.0)
        store = Store.open(url)
        query = ("SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                 "WHERE relname = ANY(%s)")
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("SELECT pg_stat_force_next_flush()")
            before = {name: (upd, hot) for name, upd, hot in
                      connection.execute(query, (list(TABLES),))}
            lsn = connection.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        for _ in range(args.cycles):
            granted = sched.lease(store, 1).leases[0]
            sched.complete(store, granted.id, granted.lease_id)
        store.close()  # its backend's statistics flushed as it exits
        time.sleep(1.0)
        with psycopg.connect(url, autocommit=True) as connection:
            wal = connection.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn",
                                     (lsn[0] if lsn else "0/0",)).fetchone()
            after = {name: (upd, hot) for name, upd, hot in
                     connection.execute(query, (list(TABLES),))}
    finally:
        server.stop()
    print(f"WAL: {int(wal[0] if wal else 0) / args.cycles:,.0f} bytes a cycle "
          f"({args.cycles} cycles)")
    for name in TABLES:
        upd, hot = (a - b for a, b in zip(after.get(name, (0, 0)), before.get(name, (0, 0)),
                                          strict=True))
        print(f"{name:>16}: {upd / args.cycles:5.2f} row updates a cycle, "
              f"{hot / args.cycles:5.2f} of them HOT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
