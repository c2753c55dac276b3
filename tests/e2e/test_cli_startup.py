"""A command imports what it needs (issue 30, item 6): each group's declarations are
imported only when the command line names that group (`uwf.invoker.spec.Lazy`), and a
read such as `uwf workflow show` loads none of the other groups' modules nor the
workflow compiler. Measured with `python -X importtime` and bench/show.py; here only
which modules load, never how long they take."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE
from uwf.cli import main as uwf_cli
from uwf.cli.quickparse import named
from uwf.config.args import NoArgs
from uwf.invoker.spec import Command, Group, Lazy

# The modules a command of each kind may load from uwf.cli (the entry point's own) and
# from the invoker below it (uwf.invoker.ids makes id arguments whole; it reads the
# store only for an id's prefix).
CLI_CORE = {"uwf.cli", "uwf.cli.entry", "uwf.cli.termination", "uwf.cli.process",
            "uwf.cli.main", "uwf.cli.render", "uwf.cli.parsing", "uwf.cli.quickparse",
            "uwf.invoker", "uwf.invoker.spec", "uwf.invoker.context", "uwf.invoker.ids",
            "uwf.invoker.invoke", "uwf.invoker.params", "uwf.invoker.text"}
SURFACE = ("uwf.cli", "uwf.invoker")


def loaded_after(argv: list[str], tmp_path: Path, prefix: str = "uwf") -> list[str]:
    """The modules (uwf's, or all with `prefix=""`) a fresh interpreter holds after
    `main(argv)` (exit 0)."""
    probe = ("import contextlib, io, json, sys\nfrom uwf.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    code = main({argv!r})\n"
             f"print(json.dumps([code, sorted(m for m in sys.modules\n"
             f"                          if m.startswith({prefix!r}))]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=tmp_path, timeout=60)
    code, modules = json.loads(done.stdout)
    assert code == 0, done.stderr
    return list(modules)


@pytest.fixture
def store_with_workflow(tmp_path: Path) -> Path:
    home = tmp_path / "store"
    assert uwf_cli.main(["--store", str(home), "workflow", "put", str(EXAMPLE)]) == 0
    return home


def test_workflow_show_loads_no_other_group(store_with_workflow: Path, tmp_path: Path) -> None:
    modules = loaded_after(["--store", str(store_with_workflow), "workflow", "show",
                            "solve-issue"], tmp_path)
    assert {m for m in modules if m.startswith(SURFACE)} <= CLI_CORE
    # No other feature's declarations (the store loads every feature's events and
    # projections, not their commands), and no compiler: show reads the registered node.
    for feature in ("threads", "runs", "queue", "archive", "worker", "bridge", "audit",
                    "dashboard", "storecopy"):
        assert f"uwf.{feature}.commands" not in modules, feature
    assert not [m for m in modules if m.startswith("uwf.language.")]


def test_workflow_show_loads_none_of_the_costly_helpers(store_with_workflow: Path,
                                                        tmp_path: Path) -> None:
    """What a read has no use for, each a millisecond or more of every CLI call: shutil
    (argparse's formatter asks it the terminal's width; it brings bz2 and lzma), OpenSSL
    (a line's digest takes CPython's own SHA-256), cbor2 (an old store's hash rule) and
    dataclasses (each class made costs more than a msgspec Struct)."""
    modules = set(loaded_after(["--store", str(store_with_workflow), "workflow", "show",
                                "solve-issue"], tmp_path, prefix=""))
    assert "uwf.workflows.commands" in modules  # the probe saw the command run
    assert {"shutil", "_hashlib", "cbor2", "dataclasses"} & modules == set()


def _shown_by_the_console_script(store: Path) -> str:
    """A probe's first lines: `uwf --json --store STORE workflow show solve-issue` run by
    the console script (`uwf.cli.entry.uwf`) in the probe's process, its exit code kept
    in `code`."""
    return ("import json, sys\nfrom uwf.cli import entry\n"
            f"sys.argv = ['uwf', '--json', '--store', {str(store)!r}, 'workflow', "
            "'show', 'solve-issue']\n"
            "try:\n    entry.uwf()\nexcept SystemExit as done:\n    code = done.code\n")


def test_the_console_script_imports_msgspec_without_typing_extensions(
        store_with_workflow: Path, tmp_path: Path) -> None:
    """`uwf` (the console script, `uwf.cli.entry`) leaves typing_extensions, and the
    `inspect` it brings, unloaded; a module imported later still gets it."""
    probe = (_shown_by_the_console_script(store_with_workflow) +
             "loaded = sorted({'typing_extensions', 'inspect', 'msgspec'} & set(sys.modules))\n"
             "import typing_extensions\n"
             "print(json.dumps([code, loaded, typing_extensions.__name__]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=tmp_path, timeout=60)
    code, loaded, later = json.loads(done.stdout.splitlines()[-1])
    assert code in (0, None), done.stderr
    assert '"name": "solve-issue"' in done.stdout
    assert loaded == ["msgspec"]
    assert later == "typing_extensions"


def test_the_console_script_reads_a_plain_command_line_without_argparse(
        store_with_workflow: Path, tmp_path: Path) -> None:
    """`uwf workflow show NAME` (the console script) is read by `uwf.cli.quickparse`:
    argparse, and the gettext and locale its messages bring, stay unloaded, and so do
    `signal` (the SIGTERM handler takes `_signal`) and the id lookup (`uwf.invoker.ids`:
    the command takes no id); `--help` still loads argparse."""
    def loaded(argv: list[str]) -> list[str]:
        probe = ("import json, sys\nfrom uwf.cli import entry\n"
                 f"sys.argv = ['uwf', *{argv!r}]\n"
                 "try:\n    entry.uwf()\nexcept SystemExit:\n    pass\n"
                 "print(json.dumps(sorted({'argparse', 'gettext', 'locale', 'signal',"
                 " 'uwf.invoker.ids'} & set(sys.modules))))")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              check=True, cwd=tmp_path, timeout=60)
        return list(json.loads(done.stdout.splitlines()[-1]))

    assert loaded(["--json", "--store", str(store_with_workflow), "workflow", "show",
                   "solve-issue"]) == []
    assert "argparse" in loaded(["workflow", "show", "--help"])


def test_the_console_script_imports_pathlib_without_urllib_parse(
        store_with_workflow: Path, tmp_path: Path) -> None:
    """`lean_pathlib`: `uwf workflow show` (the console script) loads neither urllib.parse
    (nor the ipaddress it brings) nor the modules a write or a freshness check uses
    (ids, the freshness measure, the speller, the in-memory views); `Path.as_uri`
    still answers as urllib.parse's `quote_from_bytes` spells it, and a later
    `import urllib.parse` gets the real module."""
    probe = (_shown_by_the_console_script(store_with_workflow) +
             "loaded = sorted({'urllib.parse', 'ipaddress', 'nt', '_winapi', "
             "'uwf.engine.ulids', 'uwf.engine.freshness', 'uwf.engine.spelled', "
             "'uwf.engine.memviews'} & set(sys.modules))\n"
             "from pathlib import Path\n"
             "uri = Path('/a b/\u00e9?#%').as_uri()\n"
             "import urllib.parse\n"
             "print(json.dumps([code, loaded, uri, urllib.parse.quote_from_bytes.__module__,"
             " hasattr(urllib.parse, 'urlsplit')]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=tmp_path, timeout=60)
    code, loaded, uri, module, whole = json.loads(done.stdout.splitlines()[-1])
    assert code in (0, None), done.stderr
    assert '"name": "solve-issue"' in done.stdout
    assert loaded == []
    assert uri == "file:///a%20b/%C3%A9%3F%23%25"
    assert (module, whole) == ("urllib.parse", True)


def test_lean_pathlib_imports_a_pathlib_wanting_more_of_urllib_parse_the_plain_way(
        tmp_path: Path) -> None:
    """A pathlib that takes more than `quote_from_bytes` from urllib.parse (here one on
    the path first) is imported the plain way: no ImportError at start-up."""
    (tmp_path / "pathlib.py").write_text("from urllib.parse import quote_from_bytes, urlsplit\n")
    probe = ("import sys\nfrom uwf.cli.entry import lean_pathlib\nlean_pathlib()\n"
             "import pathlib\nprint(pathlib.urlsplit('http://x/y').netloc)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.stdout.strip() == "x"


def test_msgspec_reads_type_hints_alike_without_typing_extensions(tmp_path: Path) -> None:
    """`lean_msgspec`'s claim: what msgspec takes from typing_extensions is, on this
    Python, typing's own. Every Struct of every feature's events and views, read both
    ways, gives the same hints."""
    probe = """
import json, sys
from uwf.cli.entry import lean_msgspec
lean_msgspec()
import msgspec, msgspec._utils as utils, typing, typing_extensions
from uwf.features import FEATURES
from uwf.store import Store
assert utils.Required is typing_extensions.Required is typing.Required
assert utils.NotRequired is typing_extensions.NotRequired is typing.NotRequired
seen, todo = set(), list(msgspec.Struct.__subclasses__())
while todo:
    cls = todo.pop()
    if cls not in seen:
        seen.add(cls)
        todo.extend(cls.__subclasses__())
def hints(read, cls):
    try:
        return read(cls)
    except NameError as missing:  # a name imported only for type checking: alike too
        return repr(missing)
ours = [cls for cls in seen if cls.__module__.startswith("uwf.")]
same = [hints(utils.get_type_hints, cls)
        == hints(lambda c: typing_extensions.get_type_hints(c, include_extras=True), cls)
        for cls in ours]
print(json.dumps([len(same), all(same), utils._get_type_hints.__module__]))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=tmp_path, timeout=60)
    count, alike, source = json.loads(done.stdout)
    assert source == "typing"  # msgspec did fall back to typing's own
    assert count > 50
    assert alike


def test_a_named_group_loads_its_own_declarations_only(store_with_workflow: Path,
                                                       tmp_path: Path) -> None:
    modules = loaded_after(["--store", str(store_with_workflow), "thread", "list"], tmp_path)
    assert "uwf.cli.threads" in modules
    assert not {"uwf.cli.queue", "uwf.cli.archive", "uwf.cli.worker", "uwf.cli.runs",
                "uwf.cli.mcp", "uwf.cli.log"} & set(modules)


def test_help_and_every_surface_see_every_command() -> None:
    """`uwf --help`, the MCP server and the docs iterate the group: every block loads,
    in the order declared (the workflow commands first, then the threads')."""
    group = uwf_cli.COMMANDS
    names = [command.name for command in group]
    assert names[:3] == ["workflow put", "workflow show", "workflow list"]
    assert names[3].startswith("thread ")
    for word in ("thread", "agent", "run", "history", "queue", "sched", "worker", "archive",
                 "bridge", "registry", "log", "store", "demo", "mcp", "dashboard"):
        assert any(command.path[0] == word for command in group), word
    assert len(names) == len(set(names))


def _two() -> list[Command[NoArgs]]:
    def handler(args: NoArgs, ctx: object) -> str:
        return "ok"
    return [Command(("alpha", "one"), "One.", "x alpha one", NoArgs, handler),
            Command(("beta", "two"), "Two.", "x beta two", NoArgs, handler)]


def test_a_lazy_block_holding_an_undeclared_word_is_refused() -> None:
    group = Group("x", "x", {}, [Lazy(("alpha",), _two)])
    with pytest.raises(TypeError, match=r"\['beta two'\] are not under \('alpha',\)"):
        group.named("alpha")
    with pytest.raises(TypeError, match="beta two"):
        list(group)


def test_a_command_line_is_resolved_within_its_block() -> None:
    loads: list[str] = []

    def block(word: str) -> Lazy:
        def load() -> list[Command[NoArgs]]:
            loads.append(word)
            return [command for command in _two() if command.path[0] == word]
        return Lazy((word,), load)

    group = Group("x", "x", {}, [block("alpha"), block("beta")])
    found = named(group, ["--json", "beta", "two"])
    assert found is not None
    assert found.name == "beta two"
    assert loads == ["beta"]  # alpha's block was not imported
    assert named(group, ["gamma"]) is None  # unknown: argparse says so, with every block
    assert [command.name for command in group] == ["alpha one", "beta two"]
