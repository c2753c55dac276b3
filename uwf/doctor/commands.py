"""The arguments of `uwf doctor` and the operation every surface calls.

Cheap to import (msgspec and the argument base only): the checks load when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from uwf.config.args import Args, Seconds, arg

if TYPE_CHECKING:
    from uwf.config.settings import Settings
    from uwf.doctor.results import Diagnosis


class Doctor(Args, frozen=True, kw_only=True):
    database: Annotated[str | None, arg(
        "also reach this PostgreSQL server (postgresql://USER[:PASSWORD]@HOST[:PORT]/DB; "
        "the password is never printed); a postgresql:// store is always reached",
        metavar="URL")] = None
    broker: Annotated[str | None, arg("also reach this MQTT broker: "
                                      "mqtt://[USER@]HOST[:PORT] (mqtts:// for TLS)",
                                      metavar="URL")] = None
    broker_password_env: Annotated[str | None, arg(
        "with --broker USER@...: the environment variable holding the broker's password",
        metavar="VAR")] = None
    anchors: Annotated[str | None, arg(
        "the folder anchors are written to (`worker --anchors DIR`, `log anchor --out`): "
        "say how old the newest is", metavar="DIR")] = None
    timeout: Annotated[Seconds, arg("seconds to wait for each server to answer (default 3)",
                                    metavar="SEC")] = 3.0


def doctor(args: Doctor, settings: Settings) -> Diagnosis:
    """Check this machine and the store of these settings; changes nothing."""
    from uwf.doctor import service

    return service.diagnose(settings, database=args.database, broker=args.broker,
                            broker_password_env=args.broker_password_env,
                            anchors=args.anchors, timeout=args.timeout)
