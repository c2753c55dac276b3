"""A refusal in the page's words: what the command said, and its next action with the
CLI's commands and flags named as the pages name them (a button, a page, a field).

The JSON twins keep the command's own line (`uwf: error: ...`, as `--json` and MCP
give it); only what a person reads on a page is said here.
"""

from __future__ import annotations

import re

# A command the next action names, as the pages offer it: (words, is a button). A
# next action naming any other command is left out: the page has no such thing.
PLACES: dict[str, tuple[str, bool]] = {
    "queue list": ("the Queue page", False),
    "queue logs": ("the Queue page", False),
    "queue show": ("the Queue page", False),
    "sched plan": ("the Queue page", False),
    "sched reset": ("Retry on the Queue page", True),
    "queue cancel": ("Cancel on the Queue page", True),
    "run search": ("the Runs page", False),
    "run list": ("the Runs page", False),
    "thread list": ("the Runs page", False),
    "history": ("the History page", False),
    "run show": ("the run's page", False),
    "thread show": ("the run's page", False),
    "thread log": ("the run's page", False),
    "run rerun": ("Rerun on the run's page", True),
    "thread kill": ("Kill on the run's page", True),
    "log tail": ("the Log page", False),
    "log verify": ("the Verify page", False),
    "registry verify": ("the Verify page", False),
}
_MENTION = re.compile(r"(?:(with|by) )?`uwf ([a-z-]+)(?: ([a-z-]+))?[^`]*`")


def next_action(text: str) -> str | None:
    """`text` (a next action) with each command it names in the page's words, or None
    when it names one the pages do not offer or a flag (`--help` included)."""
    unknown = False

    def place(found: re.Match[str]) -> str:
        nonlocal unknown
        preposition, first, second = found[1], found[2], found[3]
        named = PLACES.get(f"{first} {second}") or PLACES.get(first)
        if named is None or "--" in found[0]:  # a flag: the page has none
            unknown = True
            return ""
        words, button = named
        if preposition is None:
            return words
        return f"{preposition if button else 'on'} {words}"

    said = _MENTION.sub(place, text)
    if unknown or "--" in said or "`" in said:
        return None
    return said


def refusal(what: str, next_text: str) -> str:
    """One line for the page: `what`, then the next action when the page can say it."""
    then = next_action(next_text) if next_text else None
    return f"{what}; {then}" if then else what
