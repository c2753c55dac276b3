"""The console scripts `uwf` and `json-cas`: each installs the SIGTERM handler
(`uwf.cli.termination`) first thing, before the commands' modules are imported, then
imports msgspec without typing_extensions (`lean_msgspec`) and pathlib without
urllib.parse (`lean_pathlib`), and runs its binary's `main`. This module imports only
the handler's (`_signal`, `sys`).
"""

from __future__ import annotations

import sys

from uwf.cli.termination import install_termination


def lean_msgspec() -> None:
    """Import msgspec as if typing_extensions were not installed.

    msgspec takes two things from typing_extensions when it can import it:
    `get_type_hints`, which it always calls with `include_extras=True`, and
    `Required`/`NotRequired`. On Python 3.11 and later (uwf's floor) the first is then
    `typing.get_type_hints` itself and the second are `typing`'s own objects
    (`tests/e2e/test_cli_startup.py` checks both), so msgspec behaves the same without
    it; and importing typing_extensions (which brings `inspect`) is about 60 million
    instructions, a fifth of `uwf workflow show`. Nothing else changes: a module that
    imports typing_extensions later gets it. A no-op when either is loaded already.
    """
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # import fails
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules["typing_extensions"]


def lean_pathlib() -> None:
    """Import pathlib without urllib.parse, and without looking for Windows' modules.

    pathlib takes one function from urllib.parse, `quote_from_bytes`, for `as_uri`
    alone; importing urllib.parse (which brings ipaddress) is about 10 million
    instructions, 4 % of `uwf workflow show`, which never spells a URI. pathlib is
    given a stand-in that imports the real function on its first call and hands it
    the arguments, so `Path.as_uri` answers the same. And ntpath, which pathlib
    imports, tries five imports from `nt` and `_winapi`, each a search of every
    `sys.path` entry that fails on Linux: they fail at once here. Nothing else
    changes: a module that imports urllib.parse later gets the real one (the
    stand-in is taken out of `sys.modules` again); a pathlib that wants more of
    urllib.parse is imported the plain way. A no-op when either is loaded.
    """
    if "pathlib" in sys.modules or "urllib.parse" in sys.modules:
        return
    stand_in = type(sys)("urllib.parse")
    stand_in.quote_from_bytes = _quote_from_bytes  # type: ignore[attr-defined]
    # (On Windows ntpath is os.path, loaded with the interpreter: nothing is made absent.)
    absent = [] if "ntpath" in sys.modules else [
        name for name in ("nt", "_winapi") if name not in sys.modules]
    sys.modules["urllib.parse"] = stand_in
    for name in absent:
        sys.modules[name] = None  # type: ignore[assignment]  # import fails at once
    try:
        import pathlib  # noqa: F401
    except ImportError:  # a pathlib that takes more from urllib.parse: the plain import
        sys.modules.pop("pathlib", None)
    finally:
        del sys.modules["urllib.parse"]
        for name in absent:
            del sys.modules[name]


def _quote_from_bytes(bs: bytes, safe: str = "/") -> str:
    """urllib.parse's `quote_from_bytes`, imported when first called (`Path.as_uri`)."""
    from urllib.parse import quote_from_bytes

    return quote_from_bytes(bs, safe)


def uwf() -> None:
    """The `uwf` executable."""
    install_termination()
    lean_msgspec()
    lean_pathlib()
    from uwf.cli.main import main

    main()


def json_cas() -> None:
    """The `json-cas` executable."""
    install_termination()
    lean_msgspec()
    lean_pathlib()
    from uwf.cli.jsoncas import main

    main()
