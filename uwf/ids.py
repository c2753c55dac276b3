"""Entity ids: thread (run) ids and queue entry ids are ULIDs, checked before use.

A leaf: the CLI declares the pattern on its arguments without importing the API.
"""

from __future__ import annotations

import re

from uwf.errors import UsageError

# 26 Crockford Base32 characters, the first 0-7 (128 bits), upper case as ULIDs print.
ULID_PATTERN = r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$"
_ULID = re.compile(ULID_PATTERN)
# What a command line may give for one: any case (Crockford Base32 is case-insensitive),
# whole or its first characters; the command layer makes it whole (uwf.invoker.ids).
ULID_PREFIX_PATTERN = r"^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{0,25}$"
ULID_LENGTH = 26


def check_ulid(text: str, what: str, next_action: str) -> None:
    """Refuse what cannot be `what` (a ULID) before looking it up: a usage error, exit 2."""
    if not _ULID.match(text):
        raise UsageError(f"{text!r} is not {what} (a ULID: 26 upper-case Crockford Base32 "
                         "characters)", next_action)
