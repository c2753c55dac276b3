"""The docs stay true to the code.

Every declared command has help and an example and is documented in docs/; the
`--help` text pasted in docs/ is the real one; every event type is documented
with its fields; the README's test command is the one CI runs; the example
agents in docs/agents.md play a whole thread through `uwf thread step`.

After changing a command's help, refresh the pasted blocks with
`python tests/e2e/test_docs.py` (it rewrites every `<!-- help: ... -->` block).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest

from uwf.cas.builtins import BUILTIN_NAMES, builtin_hash, meta_hash
from uwf.cas.hashing import hash_bytes
from uwf.cli import jsoncas
from uwf.cli import main as uwf_cli
from uwf.invoker.spec import Command
from uwf.store import event_catalog

EVENT_TYPES = event_catalog().types
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
CI_SCRIPT = ROOT / ".ci" / "run"
# argparse wraps help to $COLUMNS; the pasted blocks are generated at this width.
COLUMNS = "100"

Main = Callable[[Sequence[str] | None], int]
PROGRAMS: dict[str, Main] = {"uwf": uwf_cli.main, "json-cas": jsoncas.main}
DECLARED: list[tuple[str, Command[Any]]] = [
    *(("uwf", command) for command in uwf_cli.COMMANDS),
    *(("json-cas", command) for command in jsoncas.COMMANDS),
]
HELP_BLOCK = re.compile(
    r"<!-- help: (?P<argv>[^>]*?) -->\n```[a-z]*\n(?P<text>.*?)```", re.DOTALL
)
# An example agent in docs/agents.md: `<!-- agent: FILE -->` then its code block.
AGENT_BLOCK = re.compile(
    r"<!-- agent: (?P<name>[\w.-]+) -->\n```[a-z]*\n(?P<code>.*?)```", re.DOTALL
)


def command_line(prog: str, command: Command[Any]) -> str:
    """`uwf workflow put`, as the docs write it."""
    return " ".join((prog, *command.path))


@functools.cache
def help_output(line: str) -> tuple[int, str]:
    """Exit code and stdout of `<line> --help` at the docs' terminal width."""
    prog, *args = line.split()
    out = io.StringIO()
    env = {"COLUMNS": COLUMNS, "NO_COLOR": "1"}
    with mock.patch.dict(os.environ, env), contextlib.redirect_stdout(out):
        try:
            code = PROGRAMS[prog]([*args, "--help"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue()


def doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


@dataclass(frozen=True)
class HelpBlock:
    page: Path
    line: str
    text: str


def help_blocks() -> Iterator[HelpBlock]:
    for page in doc_pages():
        for match in HELP_BLOCK.finditer(page.read_text("utf-8")):
            yield HelpBlock(page, match["argv"].strip(), match["text"])


BLOCKS = list(help_blocks())


@pytest.mark.parametrize(
    ("prog", "command"), DECLARED, ids=[command_line(p, c) for p, c in DECLARED]
)
def test_command_has_help_and_example(prog: str, command: Command[Any]) -> None:
    assert command.help.strip(), "a command needs a one-line help"
    assert command.example.startswith(f"{prog} "), "an example is a real command line"
    code, text = help_output(command_line(prog, command))
    assert code == 0
    assert command.example in text


@pytest.mark.parametrize(
    ("prog", "command"), DECLARED, ids=[command_line(p, c) for p, c in DECLARED]
)
def test_command_is_documented(prog: str, command: Command[Any]) -> None:
    line = command_line(prog, command)
    mention = re.compile(rf"(?<![\w-]){re.escape(line)}(?![\w-])")
    pages = [page.name for page in doc_pages() if mention.search(page.read_text("utf-8"))]
    assert pages, f"`{line}` is not mentioned in any docs/*.md page"
    blocks = [block for block in BLOCKS if block.line == line]
    assert blocks, f"docs/ has no `<!-- help: {line} -->` block"


def test_docs_have_help_blocks() -> None:
    assert len(BLOCKS) >= len(DECLARED)


@pytest.mark.parametrize(
    "block", BLOCKS, ids=[f"{block.page.name}:{block.line}" for block in BLOCKS]
)
def test_help_block_matches_help(block: HelpBlock) -> None:
    code, text = help_output(block.line)
    assert code == 0, f"`{block.line} --help` failed"
    assert block.text == text, (
        f"{block.page.name}: the pasted help of `{block.line}` has drifted; "
        "run `python tests/e2e/test_docs.py` to refresh it"
    )


def _sections(text: str) -> dict[str, str]:
    """Each `### \\`name\\`` heading of a page and the text under it."""
    found: dict[str, str] = {}
    for part in re.split(r"^(?=#{1,3} )", text, flags=re.MULTILINE):
        heading = re.match(r"### `([^`]+)`", part)
        if heading:
            found[heading[1]] = part
    return found


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
def test_event_type_is_documented(event_type: str) -> None:
    sections = _sections((DOCS / "events.md").read_text("utf-8"))
    assert event_type in sections, f"docs/events.md has no ### `{event_type}` section"
    for field in msgspec.structs.fields(EVENT_TYPES[event_type]):
        assert f"`{field.encode_name}`" in sections[event_type], (
            f"docs/events.md: `{event_type}` does not describe its field `{field.encode_name}`"
        )


def test_readme_test_command_is_what_ci_runs() -> None:
    # A line may be timed (`time python -m pytest ...`): the command is what follows.
    commands = [line.strip().removeprefix("time ").strip()
                for line in CI_SCRIPT.read_text("utf-8").splitlines()]
    ci = [line for line in commands if line.startswith("python -m pytest")]
    assert ci, ".ci/run runs no `python -m pytest`"
    readme = README.read_text("utf-8")
    documented = [line.strip() for line in readme.splitlines()
                  if line.strip().startswith("python -m pytest")]
    assert documented, "README.md shows no test command"
    assert set(documented) == {ci[-1]}
    assert "pip install -e '.[dev]'" in readme
    assert "-e '.[dev]'" in CI_SCRIPT.read_text("utf-8"), "CI installs as the README says"


def test_quoted_hashes_are_current() -> None:
    page = (DOCS / "json-cas.md").read_text("utf-8")
    assert hash_bytes(b"") == "EYHPV6X8XHTCS"
    for name in BUILTIN_NAMES:
        assert f"`{builtin_hash(name)}`" in page, f"docs/json-cas.md quotes a stale {name} hash"
    assert f"`{meta_hash()}`" in page, "docs/json-cas.md quotes a stale meta-schema hash"


def test_example_agents_step_a_thread(tmp_path: Path) -> None:
    """The shell and Python agents of docs/agents.md, run as the page runs them."""
    agents = {m["name"]: m["code"]
              for m in AGENT_BLOCK.finditer((DOCS / "agents.md").read_text("utf-8"))}
    assert set(agents) == {"agent.sh", "agent.py"}
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    if shutil.which("uwf", path=path) is None or shutil.which("jq", path=path) is None:
        pytest.skip("the example agents need uwf and jq on PATH")
    for name, code in agents.items():
        (tmp_path / name).write_text(code, "utf-8")
        (tmp_path / name).chmod(0o755)
    env = {**os.environ, "PATH": path, "UWF_HOME": str(tmp_path / "store"),
           "UWF_CONFIG": str(tmp_path / "no-config.yaml"), "UWF_DURABILITY": "none"}

    def uwf(*args: str) -> str:
        done = subprocess.run(["uwf", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, check=False, timeout=120)
        assert done.returncode == 0, f"uwf {' '.join(args)}: {done.stderr}"
        return done.stdout

    uwf("workflow", "put", str(ROOT / "examples" / "solve-issue.yaml"))
    thread = json.loads(uwf("thread", "start", "solve-issue", "-p", "Fix the login bug"))["thread"]
    results = [json.loads(uwf("thread", "step", thread, "--agent", f"./{name}"))
               for name in ("agent.sh", "agent.py", "agent.sh")]
    assert [result["done"] for result in results] == [False, False, True]
    steps = [json.loads(line) for line in uwf("thread", "log", thread).splitlines()]
    assert [(s["role"], s["agent"]) for s in steps] == [
        ("planner", "agent.sh"), ("developer", "agent.py"), ("reviewer", "agent.sh")]


def _pasted(match: re.Match[str], page: Path) -> str:
    line = match["argv"].strip()
    code, output = help_output(line)
    if code != 0:
        raise SystemExit(f"{page.name}: `{line} --help` exited {code}")
    return f"<!-- help: {line} -->\n```\n{output}```"


TOOLS_BLOCK = re.compile(r"<!-- tools -->\n.*?<!-- /tools -->", re.DOTALL)
MCP_PAGE = DOCS / "mcp.md"


def tool_table() -> str:
    """docs/mcp.md's list of tools, from the declarations."""
    from uwf.cli.mcp import tool_name

    rows = ["| tool | command | read-only | what it does |", "|---|---|---|---|"]
    for prog, group in (("uwf", uwf_cli.COMMANDS), ("json-cas", jsoncas.COMMANDS)):
        rows += [f"| `{tool_name(group, command)}` | `{command_line(prog, command)}` | "
                 f"{'yes' if command.read_only else ''} | {command.help} |"
                 for command in group if command.mcp]
    return "<!-- tools -->\n" + "\n".join(rows) + "\n<!-- /tools -->"


def test_the_mcp_page_lists_every_tool() -> None:
    found = TOOLS_BLOCK.search(MCP_PAGE.read_text("utf-8"))
    assert found is not None, "docs/mcp.md has no <!-- tools --> block"
    assert found[0] == tool_table(), (
        "docs/mcp.md's tool list drifted: run `python tests/e2e/test_docs.py`")


def refresh_help_blocks() -> list[Path]:
    """Rewrite every pasted help block with the current `--help`, and docs/mcp.md's
    tool list; the pages changed."""
    changed = []
    for page in doc_pages():
        text = page.read_text("utf-8")
        updated = HELP_BLOCK.sub(functools.partial(_pasted, page=page), text)
        if page == MCP_PAGE:
            updated = TOOLS_BLOCK.sub(lambda _: tool_table(), updated)
        if updated != text:
            page.write_text(updated, "utf-8")
            changed.append(page)
    return changed


if __name__ == "__main__":
    for path in refresh_help_blocks():
        sys.stdout.write(f"refreshed {path.relative_to(ROOT)}\n")
