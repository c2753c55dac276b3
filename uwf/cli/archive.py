"""Declarations of `uwf archive sync` and `uwf archive verify`: the per-run archive
(docs/archive.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from uwf.archive import commands as archive
from uwf.archive.commands import ArchiveSync, ArchiveVerify
from uwf.cli.common import until_signalled
from uwf.invoker.context import Context
from uwf.invoker.spec import Command, on_store
from uwf.payload import to_payload

if TYPE_CHECKING:
    from uwf.archive.results import Synced


def _sync(args: ArchiveSync, ctx: Context) -> Iterator[str]:
    import json
    import sys

    from uwf.cli.render import dump_json

    human = not ctx.json and sys.stdout.isatty()
    bar = ctx.bars.bar("syncing the archive") if ctx.bars is not None else None
    if not args.follow:  # one result, printed as every command prints one
        result = archive.sync(args, ctx.store, bar)
        yield _sync_line(result) if human else dump_json(to_payload(result))
        return

    def shown(result: Synced) -> str:  # --follow: one JSON line per sync
        return _sync_line(result) if human else json.dumps(to_payload(result),
                                                           ensure_ascii=False)

    from uwf.archive import service
    from uwf.archive.lines import check_run_id

    if args.run is not None:
        check_run_id(args.run)
    with until_signalled() as stop:
        for result in service.follow(ctx.store, archive.folder(args.dir, ctx.store), args.run,
                                     stop.is_set, progress=bar,
                                     lock_timeout=ctx.store.settings.lock_timeout):
            yield shown(result)


def _sync_line(result: Synced) -> str:
    runs = result.runs
    text = (f"{result.archive}: seq {result.from_seq} -> {result.seq}, "
            f"{result.appended} line{'' if result.appended == 1 else 's'} in "
            f"{runs} run{'' if runs == 1 else 's'}")
    if result.started or result.ended:
        text += f" ({result.started} started, {result.ended} ended)"
    return text


def _verify_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import table

    runs = payload["runs"]
    head = (f"{'ok' if payload['ok'] else 'FAILED'}: {runs} run{'' if runs == 1 else 's'} in "
            f"{payload['archive']} (archive seq {payload['seq']}, log seq {payload['logSeq']})")
    if not payload["problems"]:
        return head
    return head + "\n" + table(payload["problems"])


ARCHIVE_COMMANDS: list[Command[Any]] = [
    Command(("archive", "sync"), "Bring a per-run archive folder up to date with the log: "
            "only what is new is appended.",
            "uwf archive sync ./archive --follow", ArchiveSync, _sync, streams=True,
            stops_on_signal=lambda args: bool(args.follow),
            endless=lambda args: bool(args.follow)),
    Command(("archive", "verify"), "Check an archive against the seed's invariants and the "
            "live log (exit 1 naming every problem).",
            "uwf archive verify ./archive", ArchiveVerify, on_store(archive.verify),
            human=_verify_panel, ok_exit=True, read_only=True),
]
