"""Shell completion for `uwf` and `json-cas`, from the same declarations as the command
line: argcomplete over the argparse tree `uwf.cli.parsing` builds.

`uwf completion bash|zsh|fish` prints the script a shell sources. On Tab the script
runs the program again with argcomplete's environment (`_ARGCOMPLETE`, `COMP_LINE`,
`COMP_POINT`); `answer` then completes commands, flags and choices from the tree, and
an id argument (a thread, run or queue entry) from the store's views as they are: a
range of the view's key, never a rebuild or a scan of every row.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Annotated, Any, Literal

from uwf.config.args import Args, arg
from uwf.invoker.spec import Command, Group
from uwf.payload import Plain

if TYPE_CHECKING:
    from uwf.invoker.context import Context

SHELLS = ("bash", "zsh", "fish")
PROGRAMS = ["uwf", "json-cas"]
LISTED = 100  # at most this many ids offered at once


class CompletionArgs(Args, frozen=True, kw_only=True):
    shell: Annotated[Literal["bash", "zsh", "fish"],
                     arg("the shell the script is for", positional=True)]


def _script(args: CompletionArgs, ctx: Context) -> Plain:
    from argcomplete.shell_integration import shellcode

    return Plain(shellcode(PROGRAMS, shell=args.shell).strip("\n"))


COMPLETION_COMMANDS: list[Command[Any]] = [
    Command(("completion",), "Print the shell completion script of uwf and json-cas for "
            "bash, zsh or fish; source it (`eval \"$(uwf completion bash)\"` in ~/.bashrc).",
            "uwf completion bash", CompletionArgs, _script, plain=True, read_only=True,
            mcp=False),
]


def answer(group: Group) -> None:
    """Answer the completion request argcomplete's environment describes, on its file
    descriptor, and exit the process (only the console script calls this)."""
    import argcomplete

    from uwf.cli.parsing import build_parser

    parser = build_parser(group)
    _attach(parser)
    # An id typed in lower case still matches: ids are case-insensitive.
    argcomplete.autocomplete(parser, validator=_starts_with)


def _starts_with(completion: str, prefix: str) -> bool:
    return completion.upper().startswith(prefix.upper())


def _attach(parser: argparse.ArgumentParser) -> None:
    """Give each id argument of each command a completer of its kind."""
    from uwf.invoker.ids import KINDS
    from uwf.invoker.params import params

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _attach(child)
    declared: Command[Any] | None = parser.get_default("_declared")
    if declared is None:
        return
    kinds = {param.name: param.ids for param in params(declared.args) if param.ids in KINDS}
    for action in parser._actions:
        if action.dest in kinds:
            action.completer = Ids(kinds[action.dest])  # type: ignore[attr-defined]


class Ids:
    """The ids of one kind that start with what is typed, from the views as they are."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __call__(self, prefix: str, parsed_args: argparse.Namespace,
                 **_: Any) -> list[str]:
        from uwf.cli.process import working_folder
        from uwf.invoker.context import Context
        from uwf.invoker.ids import KINDS, starting_with

        context = Context(store_root=getattr(parsed_args, "store", None),
                          environ=dict(os.environ), cwd=working_folder())
        try:
            settings = context.settings
            if settings.store_url is None and not settings.store_root.is_dir():
                return []  # no store yet: none is made by a Tab
            return starting_with(context, KINDS[self.kind][0], prefix.upper(), LISTED,
                                 fresh=False)
        except Exception:  # a store it cannot read completes nothing, silently
            return []
        finally:
            context.close()
