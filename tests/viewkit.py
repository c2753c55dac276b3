"""The rows a views file holds, to compare the views a write left with a replay's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from uwf.store import Store

# Three well-formed node hashes, for the events a view test writes that name nodes.
HASHES = ["70D2DHWNFR6T8", "07M38PX0M6M1C", "0HMFKR60QCWK5"]


def rows_of(path: Path) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite3.connect(path)
    try:
        tables = [name for name, in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND (name LIKE 'v\\_%' "
            "ESCAPE '\\' OR name IN ('counts', 'streams')) ORDER BY name")]
        # A count fallen to 0 keeps its row (readers skip it); a replay writes none.
        return {table: sorted(db.execute(
            f'SELECT * FROM "{table}"{" WHERE n != 0" if table == "counts" else ""}'),
            key=repr) for table in tables}
    finally:
        db.close()


def replays_alike(root: Path) -> None:
    """The views the store at `root` (closed) holds are the rows a full replay of its log
    writes: its views file read, rebuilt from the log, read again."""
    path = root / "views" / "views.sqlite3"
    written = rows_of(path)
    again = Store.open(root)
    again.journal.rebuild_views(snapshot=False)
    again.close()
    assert rows_of(path) == written
