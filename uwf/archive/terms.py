"""The archive's words, declared once: what names an archive folder. It imports
nothing of uwf's, so the argument declarations of `archive` and `worker` use it
without loading the engine."""

from __future__ import annotations

from typing import Annotated

import msgspec

# A folder name that is not empty: `archive sync "$UNSET"` would otherwise archive into
# the working folder. What an empty one is told (`argument DIR: '' is not ...`).
FOLDER_EXPECT = ("a folder name (an empty one, as an unset shell variable gives, would mean "
                 "the working folder)")
FolderName = Annotated[str, msgspec.Meta(pattern=r"[\s\S]")]
