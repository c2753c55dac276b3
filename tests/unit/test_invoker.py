"""One invoker below the surfaces (issue 33, item 3): argument values in, a typed result
or a classified refusal out, progress as a callback; the CLI, `uwf mcp` and the
dashboard each render what it gives, naming arguments in their own terms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE, Cli
from uwf.cli.main import COMMANDS
from uwf.cli.mcp import Tools
from uwf.dashboard.calls import Caller
from uwf.errors import NotFound, UsageError
from uwf.invoker import invoke as invoker
from uwf.invoker.context import Context
from uwf.invoker.spec import Command


@pytest.fixture
def context(cli: Cli) -> Iterator[Context]:
    """A store with one workflow registered (an event in its log), and a context on it
    among uwf's commands, as `uwf mcp` and `uwf dashboard` have one."""
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    made = Context(json=True, environ=cli.env, cwd=cli.home.parent, commands=COMMANDS)
    yield made
    made.close()


def command(name: str) -> Command[Any]:
    return next(each for each in COMMANDS if each.name == name)


def test_a_streaming_command_s_lines_are_collected_or_told_as_they_come(
        context: Context) -> None:
    tail = command("log tail")
    args = invoker.arguments(tail, {})
    collected = invoker.invoke(tail, args, context)
    assert [line["type"] for line in collected] == ["store.created", "workflow.registered"]
    told: list[str] = []
    assert invoker.invoke(tail, args, context, each_line=told.append) is None  # none kept
    assert len(told) == 2
    assert '"workflow.registered"' in told[1]


def test_progress_is_told_in_growing_numbers_and_the_store_s_callbacks_put_back(
        context: Context) -> None:
    tail = command("log tail")
    store = context.store
    before = store.progress, store.steps
    said: list[tuple[float, float | None, str | None]] = []
    invoker.invoke(tail, invoker.arguments(tail, {}), context,
                   progress=lambda done, total, what: said.append((done, total, what)))
    assert said
    assert [done for done, _, _ in said] == list(range(1, len(said) + 1))
    assert (store.progress, store.steps) == before


def test_a_refusal_is_classified_and_each_surface_words_the_argument(
        context: Context) -> None:
    listed = command("queue list")
    with pytest.raises(invoker.Invalid) as refused:
        invoker.arguments(listed, {"limit": -1})
    assert isinstance(refused.value, UsageError)
    assert refused.value.exit_code == 2
    assert refused.value.line().startswith("argument --limit")
    # The same refusal through the other two surfaces, in their own words.
    tool = Tools([COMMANDS], context).call("uwf_queue_list", {"limit": -1})
    assert tool.exit_code == 2
    assert tool.payload["error"].startswith("uwf: error: uwf_queue_list: parameter limit: ")
    page = Caller(context).call("queue list", {"limit": "-1"}, {"limit": "Rows"})
    assert page.status == 400
    assert page.error is not None
    assert page.error.startswith("Rows: ")
    # A command's own refusal comes out as its class, whatever the surface.
    show = command("thread show")
    with pytest.raises(NotFound):
        invoker.invoke(show, invoker.arguments(show, {"thread": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}),
                       context)


def test_the_dashboard_calls_the_commands_it_is_handed(cli: Cli, tmp_path: Path) -> None:
    """It imports no CLI module (tests/e2e/test_layers.py): a context among no commands
    gives it nothing to call, and it says so."""
    bare = Context(environ=cli.env, cwd=tmp_path)
    with pytest.raises(UsageError, match="given none"):
        Caller(bare)
    handed = Caller(bare, commands=COMMANDS)
    assert handed.call("queue counts").status == 200
    bare.close()
