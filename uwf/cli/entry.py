"""The console scripts `uwf` and `json-cas`: each installs the SIGTERM handler
(`uwf.cli.termination`) first thing, before the commands' modules are imported, then
imports msgspec without typing_extensions (`lean_msgspec`) and runs its binary's
`main`. This module imports only the handler's (`signal`, `sys`).
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


def uwf() -> None:
    """The `uwf` executable."""
    install_termination()
    lean_msgspec()
    from uwf.cli.main import main

    main()


def json_cas() -> None:
    """The `json-cas` executable."""
    install_termination()
    lean_msgspec()
    from uwf.cli.jsoncas import main

    main()
