"""The arguments of `uwf store copy` and the operation every surface calls.

Cheap to import (msgspec and the argument base only): the service loads when the
operation runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec

from uwf.config.args import Args, arg

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uwf.config.settings import Settings
    from uwf.engine.feature import Feature
    from uwf.engine.fold import Progress
    from uwf.storecopy.results import Copied

# A store named as `--store` names one, and never empty: an empty one (an unset shell
# variable) would fall back to UWF_HOME.
STORE_EXPECT = ("a folder or a postgresql:// URL (an empty one, as an unset shell variable "
                "gives, names no store)")
StoreName = Annotated[str, msgspec.Meta(pattern=r"[\s\S]")]


class StoreCopy(Args, frozen=True, kw_only=True):
    src: Annotated[StoreName, arg("the store to copy: its folder or postgresql:// URL",
                                  positional=True, metavar="SRC", expect=STORE_EXPECT)]
    dst: Annotated[StoreName, arg("where to copy it: a new or empty folder, or the "
                                  "postgresql:// URL of a database with no events",
                                  positional=True, metavar="DST", expect=STORE_EXPECT)]


def copy(args: StoreCopy, settings: Settings, progress: Progress | None = None,
         features: Sequence[Feature] | None = None) -> Copied:
    """Copy the store at `src` into the empty store at `dst` and verify the copy; a `dst`
    with events is refused before anything is written. `settings` are the command's (its
    environment: UWF_DURABILITY, UWF_SEGMENT_BYTES, the lock timeout); `progress` is told
    the events copied of the total, then the views rebuilt; both stores hold `features`
    (the entry point's list; None: uwf's)."""
    from uwf.storecopy import service

    return service.copy_between(args.src, args.dst, settings, progress, features)
