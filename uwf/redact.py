"""Secrets never reach the log, the CAS or the output: one redaction function.

A `Redact` maps text to the same text with every secret value replaced by
`***`. The engine applies it to event data before a line is encoded, the CAS
to every string of a payload uwf composes (agents' outputs, prompts) before it
is hashed, and the CLI to what it prints; never to a payload given to `json-cas
put` or `hash`, whose hash must not depend on the environment. Which values are
secret is decided above the engine (`uwf.config.secrets`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Redact = Callable[[str], str]
MASK = "***"


def redactor(secrets: Iterable[str], min_length: int = 8) -> Redact | None:
    """A function hiding each of `secrets` (those of `min_length`+ characters), or None
    when there is nothing to hide (so callers skip the work entirely)."""
    # Longest first: a secret that contains another is masked whole.
    values = sorted({s for s in secrets if len(s) >= min_length}, key=len, reverse=True)
    if not values:
        return None

    def redact(text: str) -> str:
        for value in values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    return redact


def redact_value(value: Any, redact: Redact) -> Any:
    """`value` (a JSON-like tree) with every string, keys included, redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_value(k, redact): redact_value(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(item, redact) for item in value]
    return value
