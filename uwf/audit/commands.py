"""The arguments of `uwf log ...` and the operations every surface calls.

Cheap to import (msgspec and the argument base only): the services load when an
operation runs. `log tail` has no operation: it prints the log's lines as they are
(`uwf.audit.verify.tail` and `follow`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from uwf.audit.results import Anchor, AnchorWritten, KeyMade
from uwf.config.args import Args, NonNegative, arg

if TYPE_CHECKING:
    from uwf.audit.results import LogVerified
    from uwf.config.settings import Settings
    from uwf.engine.fold import Progress
    from uwf.store import Store


class LogTail(Args, frozen=True, kw_only=True):
    n: Annotated[NonNegative | None, arg("how many events (default 10; all after --since)")] = None
    type: Annotated[str | None, arg("event type, or a prefix such as `thread.`")] = None
    subject: Annotated[str | None, arg("subject, or a prefix such as `workflow/`")] = None
    since: Annotated[NonNegative | None, arg("only events after this seq")] = None
    follow: Annotated[bool, arg("keep printing new events until interrupted")] = False


class LogVerify(Args, frozen=True, kw_only=True):
    anchor: Annotated[list[str] | None, arg("an anchor file `uwf log anchor` wrote: the log "
                                            "must still hold its line (repeatable)",
                                            metavar="FILE")] = None
    key: Annotated[str | None, arg("the key (or its .pub) the anchors were signed with "
                                   "(default: UWF_ANCHOR_KEY, else anchor-key.pem beside "
                                   "the config)", metavar="FILE")] = None


class LogAnchor(Args, frozen=True, kw_only=True):
    key: Annotated[str | None, arg("the Ed25519 key to sign with (default: UWF_ANCHOR_KEY, "
                                   "else anchor-key.pem beside the config)",
                                   metavar="FILE")] = None
    out: Annotated[str | None, arg("write the anchor to this new file (default: print it)",
                                   metavar="FILE")] = None
    new_key: Annotated[bool, arg("make a new key at --key (and its public half at "
                                 "FILE.pub) instead of anchoring")] = False


def verify(args: LogVerify, store: Store, progress: Progress | None = None) -> LogVerified:
    """Verify the whole log, and that it still holds each anchored line (every anchor's
    signature checked with the key before the log is read); `progress` is told the lines
    read."""
    from uwf.audit import verify as audit

    if not args.anchor:
        if args.key is not None:
            from uwf.errors import UsageError

            raise UsageError("--key is only used with --anchor", "add --anchor FILE")
        return audit.verify(store, progress=progress)
    from uwf.audit import anchor as anchors

    key = anchors.load_public_key(anchors.usage_key(args.key, store.settings))
    # Every anchor is checked before the log is read: a forged one is refused outright.
    loaded = [(path, anchors.load(store.settings.path(path), key)) for path in args.anchor]
    return audit.verify(store, anchors=loaded, progress=progress)


def anchor(args: LogAnchor, store: Store) -> Anchor | AnchorWritten | KeyMade:
    """Sign the log's head (into a new file with `out`); with `new_key`, make the key
    instead (`new_key`, which needs no store)."""
    if args.new_key:
        return new_key(args, store.settings)
    from uwf.audit import anchor as anchors

    made = anchors.make(store, anchors.usage_key(args.key, store.settings))
    if args.out is None:
        return made
    out = store.settings.path(args.out)
    anchors.write(made, out)
    return AnchorWritten(anchor=str(out), seq=made.seq, digest=made.digest, ts=made.ts)


def new_key(args: LogAnchor, settings: Settings) -> KeyMade:
    """`log anchor --new-key`: a new key at `key` (by default the one the settings'
    environment names)."""
    from uwf.audit import anchor as anchors

    key = anchors.usage_key(args.key, settings)
    if args.out is not None:
        from uwf.errors import UsageError

        raise UsageError("--out is not used with --new-key", "make the key, then anchor")
    return anchors.new_key(key)
