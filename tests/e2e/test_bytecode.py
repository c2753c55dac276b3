"""The processes a test starts load uwf from bytecode, as an installed uwf does
(tests/conftest.py's `compile_uwf`, run as the session starts)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import uwf


def test_every_uwf_module_has_current_bytecode() -> None:
    """Every module of the uwf that this session runs has its `.pyc`, newer than its
    source, even when the shell exports PYTHONDONTWRITEBYTECODE=1 (each uwf, agent and
    script process would otherwise compile every uwf module it imports, again)."""
    package = Path(uwf.__file__).parent
    sources = sorted(package.rglob("*.py"))
    assert len(sources) > 100
    stale = [str(source.relative_to(package)) for source in sources
             if not (cached := Path(importlib.util.cache_from_source(str(source)))).exists()
             or cached.stat().st_mtime < source.stat().st_mtime]
    assert stale == []
