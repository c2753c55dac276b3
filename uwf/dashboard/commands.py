"""The arguments of `uwf dashboard` (cheap to import: msgspec and the argument base)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from uwf.config.args import Args, arg

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# Where a token comes from when --token is not given.
TOKEN_ENV = "UWF_DASHBOARD_TOKEN"
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]


class DashboardArgs(Args, frozen=True, kw_only=True):
    host: Annotated[str, arg(f"the address to listen on (default {DEFAULT_HOST}); any other "
                             f"than loopback needs --token", metavar="HOST")] = DEFAULT_HOST
    port: Annotated[Port, arg(f"the port to listen on (default {DEFAULT_PORT}; 0: any free "
                              "one)", metavar="PORT")] = DEFAULT_PORT
    open: Annotated[bool, arg("open the dashboard in a web browser once it listens")] = False
    token: Annotated[str | None, arg(f"every request must carry this token, and with it "
                                     f"the pages offer actions (default: {TOKEN_ENV}); "
                                     f"needed off loopback", metavar="TOKEN")] = None
    check: Annotated[bool, arg("check the address, the token and the extra, bind the port, "
                               "print the URL and exit without serving")] = False
