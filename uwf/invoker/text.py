"""A line a surface shows: one line whatever a value brought in, secrets masked."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uwf.redact import Redact

# Compiled on first use (`re`'s cache), not at import: compiling it is some 3 million
# instructions, and a command that succeeds prints no error line.
_UNPRINTABLE = r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]"


def one_line(text: str) -> str:
    """`text` as one line: a control character a value brought in (a file name, an
    argument) is shown escaped, as Python writes it (`\\n`, `\\x1e`)."""
    return re.sub(_UNPRINTABLE, lambda found: repr(found[0])[1:-1], text)


def masked(text: str, redact: Redact | None) -> str:
    return redact(text) if redact is not None else text

