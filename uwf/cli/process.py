"""What the command line reads of its own process, at the edge: its environment, its
working folder, and the redactor of its secrets before a command has a context. A
command's `Context` (`uwf.invoker.context`) is given them; nothing below reads them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.invoker.context import redactor_for

if TYPE_CHECKING:
    from uwf.redact import Redact


def process_redactor() -> Redact | None:
    """The redactor for this process's secrets (before a command has a context)."""
    return redactor_for(os.environ)


def process_environ() -> dict[str, str]:
    """A copy of this process's environment: a command's, unless it is given one."""
    return dict(os.environ)


def working_folder() -> Path | None:
    """This process's working folder, or None when it has none (it was removed)."""
    try:
        return Path.cwd()
    except OSError:
        return None
