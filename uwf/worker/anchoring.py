"""`uwf worker --anchors DIR`: anchors of the log's head, signed as the log grows."""

from __future__ import annotations

from pathlib import Path

from uwf.errors import Rejected
from uwf.store import Store


class Anchors:
    """Anchors of the log's head in a folder, one each time the log grew by `every`
    events, named by their seq (`<seq, 20 digits>.json`). The key is read and the
    folder made at once, so a worker with a bad key leases nothing."""

    def __init__(self, store: Store, folder: Path, every: int, key_path: Path) -> None:
        from uwf.audit import anchor

        if every < 1:
            raise ValueError("anchor_every must be at least 1")
        self.store = store
        self.folder = folder
        self.every = every
        self.key = anchor.load_private_key(key_path)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Rejected(f"cannot make the anchors folder {folder}: {exc.strerror}",
                           "pass --anchors DIR in a place you can write") from None
        if not folder.is_dir():
            raise Rejected(f"{folder} is not a folder", "pass --anchors DIR")
        # One named past the log's end is refused here (it would stop the anchoring).
        self.last = anchor.last_in_folder(folder, store.log.head().seq)

    def due(self) -> str | None:
        """Write an anchor if one is due; its path."""
        from uwf.audit import anchor

        if self.store.log.head().seq - self.last < self.every:
            return None
        made = anchor.sign(self.store, self.key)
        path = self.folder / f"{made.seq:020d}.json"
        if not path.exists():
            anchor.write(made, path)
        self.last = made.seq
        return str(path)
