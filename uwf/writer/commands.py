"""The arguments of `uwf writer` (cheap to import: the server loads when it runs)."""

from __future__ import annotations

from typing import Annotated

from uwf.config.args import Args, arg


class WriterArgs(Args, frozen=True, kw_only=True):
    check: Annotated[bool, arg("check that this store can be served (a folder, the wall "
                               "clock, no writer running), bind its socket, print where, "
                               "and exit without serving")] = False
