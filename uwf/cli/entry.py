"""The console scripts `uwf` and `json-cas`: each installs the SIGTERM handler
(`uwf.cli.termination`) first thing, before the commands' modules are imported, then
runs its binary's `main`. This module imports only the handler's (`signal`, `sys`).
"""

from __future__ import annotations

from uwf.cli.termination import install_termination


def uwf() -> None:
    """The `uwf` executable."""
    install_termination()
    from uwf.cli.main import main

    main()


def json_cas() -> None:
    """The `json-cas` executable."""
    install_termination()
    from uwf.cli.jsoncas import main

    main()
