"""Where a full replay's CPU goes, each part measured alone on the same store, in one
child process (`bench/rebuild_cpu.py --floor` runs it after its rounds; or alone:
`python bench/rebuild_floor.py STORE`, the store's views rebuilt first).

- read: the log's lines read (uwf's FileLog), each decoded (uwf's catalogue) and its
  seq and chain checked (SHA-256 of the line): the floor of any replay;
- fold: the same, and every view's states folded (uwf/engine/bulkfold.py, parts let go
  unwritten: no rows made, none read back);
- fold + rows: the same, each part's rows made (encoded states, columns, text), not
  written (a state wanted after its part is read back from the views file the
  rebuild left, as a replay reads it back from the one it writes);
- the rows' inserts alone: the rows of the views file the rebuild wrote, read first
  (not timed), then inserted into new tables of a new file as a rebuild makes them
  (no secondary index, the journal off, as a replay into no views loads them:
  uwf/engine/viewrows.py `unjournalled`; `synchronous=OFF`, one transaction),
  `executemany` a view;
- the indexes after, alone; the stream index alone (its entries, sorted, inserted).
"""

from __future__ import annotations

import json
import resource
import sqlite3
import sys
import time
from hashlib import sha256
from operator import itemgetter
from pathlib import Path
from typing import Any


def cpu(call: Any) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def floor(root: Path) -> dict[str, float]:
    from uwf.engine import bulkfold as bf
    from uwf.engine import ckptrows
    from uwf.engine.fold import Folded
    from uwf.engine.log import GENESIS
    from uwf.engine.viewrows import create_table, index_table
    from uwf.store import Store

    store = Store.open(root)
    journal = store.journal
    if set(journal.projections) - set(store.views.checkpoints()):
        # Views another code wrote (a base's layout, the round before): rebuilt by this
        # checkout first, untimed, so the rows read below are the ones its tables take.
        journal.rebuild_views(snapshot=False)
    decode = journal.catalog.decode
    found: dict[str, float] = {}

    def read() -> None:
        prev = GENESIS.digest
        for line in journal.log.read():
            if decode(line.raw).prev != prev:
                raise SystemExit("bench: the chain is broken")
            prev = sha256(line.raw).hexdigest()[:32]

    found["read"] = cpu(read)

    def fold(rows: bool) -> None:
        bulk = bf.BulkFold(journal.views, journal.projections, journal.catalog,
                           journal.fold.over, journal.fold.routes)
        if not rows:  # the states let go as a part would take them, no rows made
            def dropped(keep: int) -> tuple[dict[str, Any], dict[str, Any]]:
                held = sum(map(len, bulk.states.values()))
                for states in bulk.states.values():
                    out = len(states) if keep == 0 else max(
                        0, len(states) - len(states) * keep // held)
                    for key in list(states)[:out]:
                        del states[key]
                return {}, {}
            bulk._part = dropped  # type: ignore[method-assign]
        for _part in bulk.parts(journal.log.read(), Folded(GENESIS)):
            pass

    found["fold"] = cpu(lambda: fold(False))
    found["fold + rows"] = cpu(lambda: fold(True))
    store.close()

    views = sqlite3.connect(root / "views" / "views.sqlite3")
    tables = {name: views.execute(f'SELECT * FROM "v_{name}"').fetchall()
              for name in journal.projections}
    streams: list[tuple[str, int]] = views.execute(
        "SELECT subject, seq FROM streams ORDER BY seq").fetchall()
    views.close()
    target = root / "views" / "floor.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    db = sqlite3.connect(target, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.executescript(ckptrows.LAYOUT)
    specs = {name: projection.spec() for name, projection in journal.projections.items()}

    def inserts() -> None:
        db.execute("BEGIN")
        for name, rows in tables.items():
            create_table(db, specs[name])
            marks = ", ".join("?" * (3 + len(specs[name].columns)))
            db.executemany(f'INSERT INTO "v_{name}" VALUES ({marks})', rows)
        db.execute("COMMIT")

    def indexes() -> None:
        db.execute("BEGIN")
        for spec in specs.values():
            index_table(db, spec)
        db.execute("COMMIT")

    def stream_index() -> None:
        db.execute("BEGIN")
        db.execute("CREATE TABLE streams (subject TEXT NOT NULL, seq INTEGER NOT NULL, "
                   "PRIMARY KEY (subject, seq)) WITHOUT ROWID")
        db.executemany("INSERT INTO streams VALUES (?, ?)",
                       sorted(streams, key=itemgetter(0)))
        db.execute("COMMIT")

    found["inserts"] = cpu(inserts)
    found["indexes"] = cpu(indexes)
    found["streams"] = cpu(stream_index)
    found["rows"] = sum(map(len, tables.values()))
    db.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    found["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return found


if __name__ == "__main__":
    print(json.dumps(floor(Path(sys.argv[1]))))
