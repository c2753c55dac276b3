"""Declarations of `uwf bridge ...`: the log's events to an MQTT broker (the arguments and
operations are the bridge's, `uwf.bridge.commands`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from uwf.bridge import commands as bridge
from uwf.bridge.commands import BridgeMqtt
from uwf.invoker.spec import Command

if TYPE_CHECKING:
    from uwf.bridge.results import Bridged
    from uwf.invoker.context import Context


def _mqtt(args: BridgeMqtt, ctx: Context) -> Iterator[str]:
    """`--once`: one result. Else a JSON line per chunk published (a line of words on a
    terminal) until SIGTERM or Ctrl-C; a broker that is down is said once on stderr."""
    import json
    import sys

    from uwf.cli.common import until_signalled
    from uwf.cli.render import dump_json
    from uwf.invoker.text import one_line
    from uwf.payload import to_payload

    human = not ctx.json and sys.stdout.isatty()
    if args.once:
        result = bridge.mqtt_once(args, ctx.store)
        yield _line(result) if human else dump_json(to_payload(result))
        return

    from uwf.bridge import service

    def notice(text: str) -> None:
        sys.stderr.write(one_line(f"uwf: {text}") + "\n")
        sys.stderr.flush()

    to = service.target(args.broker, args.prefix, args.qos, args.broker_password_env)
    with until_signalled() as stop:
        for result in service.follow(ctx.store, to, ctx.store.settings.environ,
                                     timeout=args.timeout,
                                     stopped=stop.is_set, notice=notice):
            yield _line(result) if human else json.dumps(to_payload(result),
                                                         ensure_ascii=False)


def _line(result: Bridged) -> str:
    count = f"{result.published} event{'' if result.published == 1 else 's'}"
    if result.from_ is None:
        return f"{result.broker} {result.prefix}: nothing new after seq {result.to}"
    return (f"{result.broker} {result.prefix}: seq {result.from_} -> {result.to}, "
            f"{count} published")


BRIDGE_COMMANDS: list[Command[Any]] = [
    Command(("bridge", "mqtt"), "Publish every event of the log to an MQTT broker, "
            "<PREFIX>/<SUBJECT>/events, resuming after the last acknowledged seq; --once "
            "stops when it has caught up.",
            "uwf bridge mqtt --broker mqtt://localhost:1883 --prefix uwf", BridgeMqtt, _mqtt,
            streams=True, stops_on_signal=lambda args: not args.once,
            endless=lambda args: not args.once),
]
