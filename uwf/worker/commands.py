"""The arguments of `uwf worker` and the operation every surface calls.

Cheap to import (msgspec and the argument base only): the services load when an
operation runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec

from uwf.archive.terms import FOLDER_EXPECT, FolderName
from uwf.config.args import Args, Count, arg

if TYPE_CHECKING:
    from uwf.store import Store
    from uwf.worker.service import Worker

# Entries one worker runs at once: threads, each waiting on an agent subprocess.
MAX_CONCURRENCY = 1000
Concurrency = Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)]
PollSeconds = Annotated[float, msgspec.Meta(ge=0.05, le=3600)]


class WorkerArgs(Args, frozen=True, kw_only=True):
    session: Annotated[str | None, arg("lease only this session label's entries (default: "
                                       "any)", metavar="LABEL")] = None
    concurrency: Annotated[Concurrency, arg("entries run at once (default 1; the policy's "
                                            "maxConcurrent still holds)", metavar="N")] = 1
    once: Annotated[bool, arg("run what is eligible now, then exit (exit 3 when nothing "
                              "was)")] = False
    poll: Annotated[PollSeconds, arg("seconds between lease attempts that found nothing "
                                     "(default 2)", metavar="SEC")] = 2.0
    archive: Annotated[FolderName | None, arg("keep this per-run archive folder in sync: at "
                                              "start and after each entry (as `uwf archive "
                                              "sync DIR`)", metavar="DIR",
                                              expect=FOLDER_EXPECT)] = None
    anchors: Annotated[FolderName | None, arg("write a signed anchor of the log's head into "
                                              "this folder each time the log grew by "
                                              "--anchor-every events (checked after each "
                                              "entry)", metavar="DIR",
                                              expect=FOLDER_EXPECT)] = None
    anchor_every: Annotated[Count | None, arg("events between two anchors (default 1000)",
                                              metavar="N")] = None
    anchor_key: Annotated[str | None, arg("the key to sign anchors with (default as `uwf "
                                          "log anchor`)", metavar="FILE")] = None
    allow_entry_commands: Annotated[bool, arg(
        "run an entry's --agent that is a command line, not an agent alias of the config "
        "(whoever can queue an entry then runs code on this host)")] = False


def worker(args: WorkerArgs, store: Store) -> Worker:
    """A worker on `store` with these arguments and the store's config, ready to run:
    `results()` yields each entry's end (its `record()` is what a line prints)."""

    from uwf.config.configfile import load_config
    from uwf.errors import UsageError
    from uwf.worker.service import DEFAULT_ANCHOR_EVERY, Worker, WorkerOptions

    if args.anchors is None and (args.anchor_key is not None or args.anchor_every):
        raise UsageError("--anchor-every and --anchor-key go with --anchors DIR",
                         "add --anchors DIR")
    where = store.settings.path
    key = None
    if args.anchor_key is not None:
        key = where(args.anchor_key)
    elif args.anchors is not None:
        from uwf.audit.anchor import default_key_path

        key = default_key_path(store.settings.environ)
    options = WorkerOptions(args.session, args.concurrency, args.once, args.poll,
                            archive=args.archive and str(where(args.archive)),
                            lock_timeout=store.settings.lock_timeout,
                            anchors=args.anchors and str(where(args.anchors)),
                            anchor_every=args.anchor_every or DEFAULT_ANCHOR_EVERY,
                            anchor_key=key,
                            allow_entry_commands=args.allow_entry_commands)
    return Worker(store, load_config(store.settings.config_path), options,
                  store.settings)
