"""Signed anchors: the log's end made tamper-evident (docs/audit.md#anchors).

The chain protects every line but the last, and with the views deleted nothing
remembers where the log ended: truncating it, or editing its last lines, still
verifies. An anchor is a small signed statement, "this log's line `seq` had
digest `digest`", kept outside the store. Since each line's digest covers its
`prev`, an anchor vouches for every line up to `seq`; `uwf log verify --anchor`
proves the log still holds each anchored line, byte for byte.

Signatures are Ed25519 (`cryptography`, imported only here). The private key is
a PEM file made by `uwf log anchor --new-key`, readable by its owner only; its
public half is written beside it (`<key>.pub`), for verifiers who must not sign.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from uwf.audit.results import Anchor, KeyMade
from uwf.config.inputfile import MAX_ANCHOR_BYTES, MAX_KEY_BYTES, read_input
from uwf.engine.clock import format_ts
from uwf.engine.events import digest
from uwf.errors import Corrupt, NotFound, Rejected, UsageError
from uwf.store import Store

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from uwf.config.settings import Settings
    from uwf.engine.log import EventLog

ANCHOR_FORMAT = 1
_HEX32 = r"^[0-9a-f]{32}$"
_NEW_KEY = "make one with `uwf log anchor --new-key --key FILE`"
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark: an editor that saved a copy adds one


_decoder = msgspec.json.Decoder(Anchor)


def default_key_path(env: Mapping[str, str]) -> Path:
    """`UWF_ANCHOR_KEY`, else `anchor-key.pem` beside the config (never in the store);
    `~` is `env`'s HOME."""
    from uwf.config.settings import expand_user, home_folder

    if explicit := env.get("UWF_ANCHOR_KEY"):
        return expand_user(explicit, env)
    if xdg := env.get("XDG_CONFIG_HOME"):
        return expand_user(xdg, env) / "uwf" / "anchor-key.pem"
    return home_folder(env) / ".config" / "uwf" / "anchor-key.pem"


# -- keys ----------------------------------------------------------------------------

def new_key(path: Path) -> KeyMade:
    """A new Ed25519 key at `path` (mode 0600; never over an existing file) and its
    public half at `<path>.pub`."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public_path = path.with_name(path.name + ".pub")
    for existing in (path, public_path):
        if existing.exists() or existing.is_symlink():
            raise Rejected(f"{existing} already exists",
                           "keep the key you have, or pass another --key FILE")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_new(path, private_pem, 0o600)
        _write_new(public_path, public_pem, 0o644)
    except OSError as exc:
        raise Rejected(f"cannot write the key {path}: {exc.strerror}",
                       "pass a --key FILE in a folder you can write") from None
    return KeyMade(key=str(path), public_key=str(public_path),
                   fingerprint=_raw_public(key.public_key()))


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_key_file(path: Path) -> bytes:
    """A key file: a regular file of at most MAX_KEY_BYTES (a FIFO or a device given as
    --key is refused, never read: docs/cli.md#files-a-command-reads)."""
    try:
        return read_input(path, MAX_KEY_BYTES, what="the anchor key ",
                          action="pass the key file `uwf log anchor --new-key` made")
    except NotFound:
        raise NotFound(f"no anchor key at {path}", _NEW_KEY) from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(_read_key_file(path), password=None)
    except (ValueError, TypeError):
        raise Rejected(f"{path} is not an unencrypted PEM private key",
                       "anchor with the key `uwf log anchor --new-key` made") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise Rejected(f"{path} is not an Ed25519 key", _NEW_KEY)
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The verifying key from a private key file or its `.pub`."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    data = _read_key_file(path)
    key: Any
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise Rejected(f"{path} is not a PEM key", "pass the anchor key or its .pub"
                           ) from None
    if isinstance(key, Ed25519PrivateKey):
        key = key.public_key()
    if not isinstance(key, Ed25519PublicKey):
        raise Rejected(f"{path} is not an Ed25519 key", "pass the anchor key or its .pub")
    return key


def _raw_public(key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


# -- anchors ---------------------------------------------------------------------------

def make(store: Store, key_path: Path) -> Anchor:
    """An anchor of the log's head now, signed with the key at `key_path`."""
    return sign(store, load_private_key(key_path))


def sign(store: Store, key: Ed25519PrivateKey) -> Anchor:
    """An anchor of the log's head now, signed with `key`: its last complete batch."""
    seq, raw = _last_complete(store.log)
    first = store.log.line(1)
    if first is None:
        raise Rejected("the log has no first line", "run `uwf log verify`")
    unsigned = Anchor(anchor=ANCHOR_FORMAT, seq=seq, digest=digest(raw),
                      first=digest(first), ts=format_ts(store.clock()),
                      public_key=_raw_public(key.public_key()))
    return msgspec.structs.replace(unsigned,
                                   signature=key.sign(unsigned.signed_bytes()).hex())


class _BatchOf(msgspec.Struct):
    seq: int
    batch: tuple[int, int]


_batch_decoder = msgspec.json.Decoder(_BatchOf)


def _last_complete(log: EventLog) -> tuple[int, bytes]:
    """The seq and bytes of the last line of the log's last complete batch.

    A reader may find the log's last batch torn (a writer killed part way: fewer than
    n of its n lines); the next writer drops those lines and writes `log.repaired` in
    their place, so an anchor of one of them would later read as a contradiction.
    Walks back over at most that batch's lines.
    """
    for line in log.read_reverse():
        try:
            found = _batch_decoder.decode(line.raw)
        except msgspec.DecodeError:
            raise Corrupt(f"the log's line {line.seq or '?'} is not an event",
                          "run `uwf log verify`") from None
        if found.batch[0] == found.batch[1]:
            return found.seq, line.raw
    if log.head().seq == 0:
        raise Rejected("the log is empty: there is nothing to anchor",
                       "anchor once the store has events")
    raise Rejected("the log holds no complete batch yet: there is nothing to anchor",
                   "anchor once a writer has repaired it (any write does)")


def encode(anchor: Anchor) -> bytes:
    return msgspec.json.encode(anchor) + b"\n"


def write(anchor: Anchor, out: Path) -> None:
    """Write the anchor to a new file (never over one: an anchor is evidence)."""
    try:
        _write_new(out, encode(anchor), 0o644)
    except FileExistsError:
        raise Rejected(f"{out} already exists", "anchors are never overwritten; pass a new "
                       "--out FILE") from None
    except OSError as exc:
        raise Rejected(f"cannot write the anchor {out}: {exc.strerror}",
                       "pass an --out FILE in a folder you can write") from None


def last_in_folder(folder: Path, log_end: int) -> int:
    """The seq of the latest anchor in a worker's `--anchors` folder (each named
    `<seq, 20 digits>.json`), 0 when there is none.

    One named past the log's end (`log_end`) is refused, naming it: taken as the
    latest, it would make no anchor due until the log grew past it, which is never
    (docs/worker.md). It is another log's, or this log lost lines since.
    """
    named = [(int(path.stem), path) for path in folder.glob("*.json")
             if re.fullmatch(r"[0-9]{20}", path.stem)]
    if not named:
        return 0
    seq, path = max(named)
    if seq > log_end:
        raise Rejected(f"the anchors folder holds {path}, named as an anchor of seq {seq:,}, "
                       f"past the log's end at seq {log_end:,}: it is another log's, or this "
                       f"log lost lines", f"check it with `uwf log verify --anchor {path}`, "
                       f"or move it out of {folder}")
    return seq


def load(path: Path, key: Ed25519PublicKey) -> Anchor:
    """An anchor file whose signature verifies with `key`; anything else is refused."""
    from cryptography.exceptions import InvalidSignature

    try:
        raw = read_input(path, MAX_ANCHOR_BYTES, what="the anchor ",
                         action="pass a file `uwf log anchor` wrote")
    except NotFound:
        raise NotFound(f"no anchor file {path}", "pass a file `uwf log anchor` wrote") from None
    try:
        anchor = _decoder.decode(raw.removeprefix(_BOM))
    except msgspec.DecodeError as exc:
        raise Rejected(f"{path} is not an anchor ({exc})",
                       "pass a file `uwf log anchor` wrote") from None
    if anchor.anchor != ANCHOR_FORMAT:
        raise Rejected(f"{path} is an anchor of format {anchor.anchor}, not {ANCHOR_FORMAT}",
                       "verify it with the uwf that wrote it")
    if anchor.seq < 1 or not (re.fullmatch(_HEX32, anchor.digest)
                              and re.fullmatch(_HEX32, anchor.first)):
        raise Rejected(f"{path} is not a well-formed anchor (seq, digest or first)",
                       "pass a file `uwf log anchor` wrote")
    if anchor.public_key != _raw_public(key):
        raise Rejected(f"anchor {path} was signed with another key",
                       "verify with the key that made it (`--key FILE`)")
    try:
        key.verify(bytes.fromhex(anchor.signature), anchor.signed_bytes())
    except (InvalidSignature, ValueError):
        raise Rejected(f"anchor {path}: the signature does not match its content; it was "
                       "edited after it was signed", "get an intact copy of the anchor"
                       ) from None
    return anchor


@dataclass(frozen=True)
class AnchorCheck:
    """One anchor against the log: `problem` is None when the log still holds it."""

    path: str
    anchor: Anchor
    problem: str | None


def check(path: str, anchor: Anchor, digests: Mapping[int, str], last_seq: int
          ) -> AnchorCheck:
    """Does the log (each seq's line digest, and its last seq) hold the anchored line?"""
    first = digests.get(1)
    if first is not None and first != anchor.first:
        problem = "the anchor is of another log (its first line differs)"
    elif anchor.seq > last_seq:
        problem = (f"the log ends at seq {last_seq}, before the anchored seq {anchor.seq}: "
                   "lines were removed from its end")
    elif digests.get(anchor.seq) != anchor.digest:
        problem = (f"line {anchor.seq} differs from the anchored one: the log up to it was "
                   "altered or rewritten")
    else:
        problem = None
    return AnchorCheck(path, anchor, problem)


def check_all(anchors: list[tuple[str, Anchor]], digests: Mapping[int, str], last_seq: int
              ) -> list[AnchorCheck]:
    """Every anchor, earliest anchored seq first (the first contradicted one is where
    the log and its anchors part)."""
    ordered = sorted(anchors, key=lambda item: (item[1].seq, item[0]))
    return [check(path, anchor, digests, last_seq) for path, anchor in ordered]


def usage_key(path: str | None, settings: Settings) -> Path:
    """The key `--key` names, resolved by the command's settings (its HOME and working
    folder), else the one its environment names."""
    if path is not None and not path.strip():
        raise UsageError("--key is empty", "pass the key file")
    return settings.path(path) if path else default_key_path(settings.environ)
