"""What `uwf log ...` returns: the payloads `--json` prints, typed."""

from __future__ import annotations

import json

import msgspec

from uwf.payload import UNSET, Result, UnsetType


class Anchor(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The signed statement: line `seq` of the log whose first line has digest
    `first` has digest `digest`; made at `ts` by the holder of `public_key`. What
    `log anchor` prints, and an anchor file's content."""

    anchor: int
    seq: int
    digest: str
    first: str
    ts: str
    public_key: str
    signature: str = ""

    def signed_bytes(self) -> bytes:
        """What the signature covers: every field but the signature, canonical JSON."""
        body = msgspec.to_builtins(msgspec.structs.replace(self, signature=""))
        del body["signature"]
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


class AnchorWritten(Result):
    """`log anchor --out FILE`: the file written, and the seq, digest and time it
    anchors."""

    anchor: str
    seq: int
    digest: str
    ts: str


class KeyMade(Result):
    """`log anchor --new-key`: the private key's file, its public half's, and the
    public key in hex."""

    key: str
    public_key: str
    fingerprint: str


class LineProblem(Result):
    """What is wrong at a log line: its seq (None when it cannot be told), the segment
    and line number it is at (0: no one line), and what."""

    seq: int | None
    segment: str
    line: int
    problem: str


class AnchorHeld(Result):
    """One `--anchor` file against the log: ok when the log still holds its line."""

    file: str
    seq: int
    ts: str
    ok: bool
    problem: str | None


class LogVerified(Result):
    """`log verify`: ok when there is no problem; the events and segments read; with
    `--anchor`, each anchor's check and the first one contradicted (None: none)."""

    ok: bool
    events: int
    segments: int
    problems: list[LineProblem]
    anchors: list[AnchorHeld] | UnsetType = UNSET
    contradicts: str | UnsetType | None = UNSET
