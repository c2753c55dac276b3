"""Declaration of `uwf demo`: the whole system in one command (docs/audit.md#demo)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from uwf.config.args import Args, arg
from uwf.invoker.context import Context
from uwf.invoker.spec import Command


class DemoArgs(Args, frozen=True, kw_only=True):
    keep: Annotated[bool, arg("keep the scratch folder (store, archive, forged copies) and "
                              "print where it is")] = False


def _colour(text: str, code: str, environ: Mapping[str, str]) -> str:
    """`text` in colour, unless the command's environment sets NO_COLOR or stdout is
    not a terminal."""
    if environ.get("NO_COLOR") or not sys.stdout.isatty():
        return text
    return f"\033[{code}m{text}\033[0m"


def _line(entry: dict[str, Any], environ: Mapping[str, str]) -> str:
    def colour(text: str, code: str) -> str:
        return _colour(text, code, environ)

    if "forgery" in entry:
        mark = colour("caught", "32") if entry["caught"] else colour("MISSED", "31;1")
        return f"  {mark}  {entry['forgery']:<15} {entry['text']}"
    mark = colour("ok", "32") if entry["ok"] else colour("FAILED", "31;1")
    return f"  {mark}  {entry['step']:<9} {entry['text']}"


def _demo(args: DemoArgs, ctx: Context) -> Iterator[str]:
    """Live lines on a terminal; one JSON document when piped (or with --json). A demo
    that did not go as shown ends with an error (exit 1)."""
    from uwf.cli import demoscript as demo
    from uwf.errors import Rejected

    human = not ctx.json and sys.stdout.isatty()
    if human:
        yield (_colour("uwf demo", "1", ctx.environ) + ": a scratch store; a thread run by "
               "uwf-mock; the views rebuilt; an archive; the log forged four ways, each on a copy")
    result: dict[str, Any] = {}
    forging = False
    for entry in demo.tour(args.keep):
        if "result" in entry:
            result = entry["result"]
        elif human:
            if "forgery" in entry and not forging:
                forging = True
                yield "forging the log:"
            yield _line(entry, ctx.environ)
    if human:
        yield (f"{result['caught']} of {len(result['forgeries'])} forgeries caught, in "
               f"{result['seconds']} s" + (f"; kept in {result['folder']}" if result["folder"]
                                           else ""))
    else:
        yield json.dumps(result, ensure_ascii=False, indent=2)
    if not result["ok"]:
        raise Rejected("the demo did not go as it should (see above)",
                       "report it with the output of `uwf demo --json`")


DEMO_COMMANDS: list[Command[Any]] = [
    Command(("demo",), "the whole system in one command, in a scratch store: a run, views "
            "rebuilt, an archive, forged logs caught",
            "uwf demo", DemoArgs, _demo, streams=True),
]
