"""Reading a YAML file the user wrote: syntax errors name the line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from uwf.errors import NotFound, Rejected, UsageError


def load_yaml(path: Path, what: str = "") -> Any:
    """Parse a YAML file; a syntax error names the file (as `what`), line and column."""
    import yaml

    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise NotFound(f"no such file: {path}", "check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}", "give a UTF-8 YAML file") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise Rejected(f"{what}{path}: malformed YAML{where}: {problem}", "fix the YAML") from None
