"""The arguments of `uwf bridge ...` and the operations every surface calls.

Cheap to import (msgspec and the argument base only): the services load when an
operation runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from uwf.config.args import Args, Seconds, arg

if TYPE_CHECKING:
    from uwf.bridge.results import Bridged
    from uwf.store import Store


class BridgeMqtt(Args, frozen=True, kw_only=True):
    broker: Annotated[str, arg("the MQTT broker: mqtt://[USER@]HOST[:PORT] (mqtts:// for "
                               "TLS)", metavar="URL")]
    prefix: Annotated[str, arg("topics are PREFIX/SUBJECT/events (default uwf)",
                               metavar="PREFIX")] = "uwf"
    qos: Annotated[Literal[1, 2], arg("the QoS of every message; the broker acknowledges "
                                      "each (default 1)")] = 1
    once: Annotated[bool, arg("publish what the log has beyond the last acknowledged seq, "
                              "then exit (else follow the log until SIGTERM / Ctrl-C)")] = False
    broker_password_env: Annotated[str | None, arg(
        "with --broker USER@...: the environment variable holding the broker's password",
        metavar="VAR")] = None
    timeout: Annotated[Seconds, arg("seconds to wait for the broker to answer (default 5)",
                                    metavar="SEC")] = 5.0


def mqtt_once(args: BridgeMqtt, store: Store) -> Bridged:
    """Publish every event after the bridge's last acknowledged seq, then stop."""
    from uwf.bridge import service

    return service.once(store, service.target(args.broker, args.prefix, args.qos,
                                              args.broker_password_env),
                        store.settings.environ, timeout=args.timeout)
