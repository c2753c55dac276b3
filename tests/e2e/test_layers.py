"""Imports flow one way (docs/architecture.md), lazy function-level imports included.

From the bottom: the leaves; `engine` and `cas`; `language` (the pure workflow
language); `config` (what comes from outside); `uwf/store.py`, which opens a store
of the features it is given and names none. Then the features, each in two halves:
its pure model (events, rules, deciders, projections, its verify check and the one
`Feature` value that names them: no store, no I/O) and its services, which take the
`Store`. On top: `uwf/features.py` (the composition root: the list of the features'
values) and the surfaces, `cli`, `agents` and `dashboard`. A feature imports another
only where the domain says so (`FEATURES`); the store, the engine and the audit
import none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "uwf"
# Imported by every layer, import no layer.
# (`uwf.config.limits` imports nothing: the bounds uwf accepts, which the threads' time
# rules judge a deadline by, as the commands do.)
LEAVES = {"uwf.errors", "uwf.redact", "uwf.ids", "uwf.payload", "uwf.folders", "uwf",
          "uwf.config.limits"}
BELOW_FEATURES = {
    "engine": {"engine"},
    "cas": {"cas"},
    "language": {"engine", "cas", "language"},
    "config": {"engine", "cas", "config"},
}
# The features and the features each may use: runs read threads and restart them,
# the queue names threads and workflows, the worker drives the queue, threads and
# the archive, the archive and the audit read the other features' events, the bridge
# publishes through the queue's MQTT connection, a store's copy finds its nodes as
# json-cas's gc does and verifies itself with the audit's and the registry's checks;
# the doctor reaches a broker as the queue does and finds anchors where the audit puts them.
# The audit reads every feature's events through the checks of the features a store
# is opened with (`uwf.engine.feature`), and names none.
FEATURES = {
    "workflows": set(),
    "threads": {"workflows"},
    "runs": {"threads", "workflows"},
    "queue": {"threads", "workflows"},
    "worker": {"queue", "threads", "archive", "audit"},
    "archive": {"threads"},
    "audit": set(),
    "bridge": {"queue"},
    "jsoncas": set(),
    "storecopy": {"audit", "jsoncas", "runs"},
    "doctor": {"audit", "queue"},
    "writer": {"queue"},
}
# A feature's pure model: these modules may import no service, no store, no config.
MODEL = {"events", "projection", "steps", "rules", "decide", "routing", "terms", "results",
         "order", "feature", "entry", "state", "planned"}
# The commands, below the surfaces: their declarations' shape, their context, the one
# invoker every surface calls (argument values in, a typed result or a refusal out).
INVOKER = "invoker"
# The surfaces: the command line, the agents, the web dashboard. Each calls the commands
# through the invoker; none imports another but the command line, which starts them.
TOP = {"cli", "agents", "dashboard"}
# The composition root: each feature's value, listed once (it imports `<feature>.feature`).
ROOT = "uwf.features"
# The one arrow up: `Store.open(path)` given no features lists uwf's, from the root, in
# this one function (as `process_settings` is the one read of the process's environment).
DEFAULT_FEATURES = ("uwf.store", "default_features", ROOT)


def imports(path: Path, module: str = "") -> list[str]:
    """The uwf modules `path` (the module `module`) imports, lazily too; the import of
    the root in `DEFAULT_FEATURES`' function aside."""
    tree = ast.parse(path.read_text("utf-8"))
    excused: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.FunctionDef) and (module, node.name) == DEFAULT_FEATURES[:2]):
            excused |= {id(inner) for inner in ast.walk(node)
                        if isinstance(inner, ast.ImportFrom) and inner.module == ROOT}
    found = []
    for node in ast.walk(tree):
        if id(node) in excused:
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return [name for name in found if name == "uwf" or name.startswith("uwf.")]


def is_model(name: str) -> bool:
    parts = name.split(".")
    return len(parts) >= 3 and parts[1] in FEATURES and parts[2] in MODEL


def allowed(module: str, name: str) -> bool:
    """May `module` (dotted, e.g. uwf.queue.sched) import `name`?"""
    if name in LEAVES:
        return True
    here, there = module.split(".")[1], name.split(".")[1]
    if here in BELOW_FEATURES:
        return there in BELOW_FEATURES[here]
    below = {"engine", "cas", "language"}
    if module == "uwf.store":
        return there in below | {"config"}
    if module == ROOT:  # each feature's value, nothing else of it
        parts = name.split(".")
        return there == "engine" or (there in FEATURES and parts[2:] == ["feature"])
    if here in FEATURES:
        reach = {here} | FEATURES[here]
        if is_model(module):  # pure: the layers below and the model of the features it may use
            return there in below or (is_model(name) and there in reach)
        return there in below | {"config", "store"} | reach
    if here == INVOKER:  # any layer below the surfaces, no surface
        return there not in TOP
    assert here in TOP, module
    return here == "cli" or there != "cli"


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append((".".join(parts), path))
    return found


@pytest.mark.parametrize("layer", sorted({*BELOW_FEATURES, *FEATURES, *TOP, INVOKER, "store",
                                          "features"}))
def test_a_layer_imports_only_what_the_map_allows(layer: str) -> None:
    wrong = [f"{module} imports {name}"
             for module, path in modules() if module.split(".")[1:2] == [layer]
             for name in imports(path, module) if not allowed(module, name)]
    assert wrong == []


def test_the_store_the_engine_and_the_audit_name_no_feature() -> None:
    """Below the features (and in the auditor) a feature is a value handed in: no
    import of one, lazy ones included, but the store's default list from the root."""
    lower = {"store", "engine", "cas", "config", "language", "audit"}
    named = [f"{module} imports {name}" for module, path in modules()
             if module.split(".")[1:2] and module.split(".")[1] in lower
             for name in imports(path, module)
             if name.split(".")[1:2] and name.split(".")[1] in set(FEATURES) - {"audit"}]
    assert named == []
    store = (PACKAGE / "store.py").read_text("utf-8")
    assert "from uwf.features import FEATURES" in store  # the one excused arrow is there
    assert ROOT not in imports(PACKAGE / "store.py", "uwf.store")
    assert ROOT in imports(PACKAGE / "store.py", "uwf.other")  # excused only there


def test_every_feature_with_events_exports_one_value() -> None:
    """A feature with events has a `feature.py` whose `FEATURE` the root lists."""
    with_events = {path.parent.name for path in PACKAGE.glob("*/events.py")
                   if path.parent.name in FEATURES}
    with_value = {path.parent.name for path in PACKAGE.glob("*/feature.py")}
    assert with_events <= with_value
    listed = {name.split(".")[1] for name in imports(PACKAGE / "features.py", ROOT)
              if name.endswith(".feature")}
    assert listed == with_value


def test_the_leaves_import_no_layer() -> None:
    for leaf in ("errors.py", "redact.py", "ids.py", "payload.py"):
        assert [n for n in imports(PACKAGE / leaf) if n not in LEAVES] == []


MAX_MODULE_LINES = 500  # one concept a module (issue 33, item 5)


def test_no_module_is_over_500_lines() -> None:
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text("utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, "split these modules by concept"


def test_every_module_belongs_to_a_layer() -> None:
    top = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
           if not p.name.startswith((".", "_")) and p.name != "py.typed"}
    assert top == {*BELOW_FEATURES, *FEATURES, *TOP, INVOKER, "store", "features", "errors",
                   "redact", "ids", "payload", "folders"}


def test_the_map_is_checked_by_a_rule_that_can_fail() -> None:
    assert not allowed("uwf.queue.projection", "uwf.store")
    assert not allowed("uwf.queue.events", "uwf.queue.service")
    assert not allowed("uwf.threads.service", "uwf.queue.service")
    assert not allowed("uwf.engine.journal", "uwf.cas.store")
    assert not allowed("uwf.store", "uwf.queue.service")
    assert not allowed("uwf.store", "uwf.queue.events")  # the store names no feature
    assert not allowed("uwf.store", ROOT)  # but in `default_features`
    assert not allowed("uwf.audit.verify", "uwf.queue.rules")
    assert not allowed("uwf.engine.feature", "uwf.threads.rules")
    assert not allowed(ROOT, "uwf.queue.service")
    assert allowed(ROOT, "uwf.queue.feature")
    assert allowed("uwf.queue.feature", "uwf.queue.order")
    assert allowed("uwf.worker.service", "uwf.queue.sched")
    assert not allowed("uwf.queue.service", "uwf.invoker.spec")  # features know no surface
    assert not allowed("uwf.invoker.invoke", "uwf.cli.render")
    assert not allowed("uwf.invoker.context", "uwf.cli.progress")
    assert not allowed("uwf.dashboard.calls", "uwf.cli.main")  # the invoker, not the CLI
    assert allowed("uwf.dashboard.calls", "uwf.invoker.invoke")
    assert allowed("uwf.cli.dashboard", "uwf.dashboard.server")  # the CLI starts it


# -- no circles ---------------------------------------------------------------------

# None left: the dashboard calls the commands through the invoker (`uwf.invoker`), handed
# the command table by the CLI that starts it (`Context.commands`), and imports no CLI
# module; `uwf mcp` serves the table it is run from the same way.
KNOWN_CIRCLES: list[set[str]] = []


def module_imports(path: Path, known: set[str]) -> set[str]:
    """The uwf modules `path` imports, lazily too, `TYPE_CHECKING` blocks aside (they
    run only under a type checker); `from P import M` of a module M counts as P.M."""
    tree = ast.parse(path.read_text("utf-8"))
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test)
                   for node in ast.walk(block)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name in known and name != "uwf"}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            part = set()
            while True:
                other = stack.pop()
                part.add(other)
                if other == module:
                    break
            if len(part) > 1:
                found.append(part)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    known = {module for module, _ in modules()}
    graph = {module: module_imports(path, known) - {module} for module, path in modules()}
    left = [sorted(part) for part in circles(graph)
            if not any({name.split(".")[0] + "." + name.split(".")[1] for name in part}
                       <= allowed_circle for allowed_circle in KNOWN_CIRCLES)]
    assert left == []


def test_the_circle_rule_can_fail() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []


# -- settings at the edge ---------------------------------------------------------------

# What reads the process's environment, working folder, HOME or wall clock. Below the
# entry points (`cli`, `agents`: processes of their own) only ENTRY_HELPERS may:
# `process_settings` (`Store.open(root)` given no settings), `expand_user` (a `~user`
# path, by the password database) and the engine's wall clock. A user's path is
# resolved at the edge (`Settings.path`: the command's HOME and working folder), so
# nothing below expands `~`, makes a path absolute from the process's folder, or reads
# the time but through a clock it is given.
PROCESS_READS = {("os", "environ"), ("os", "environb"), ("os", "getenv"), ("os", "getenvb"),
                 ("os", "putenv"), ("os", "unsetenv"), ("os", "getcwd"), ("os", "getcwdb"),
                 ("os", "chdir"), ("Path", "cwd"), ("Path", "home"), ("time", "time"),
                 ("time", "time_ns")}
# Read whatever they are called on: `Path(p).expanduser()`, `os.path.abspath(p)`.
ANY_OWNER = {"expanduser", "abspath"}
ENTRY_HELPERS = {("uwf.config.settings", "process_settings"),
                 ("uwf.config.settings", "expand_user"),
                 ("uwf.engine.clock", "system_clock")}


def process_reads(module: str, source: str) -> list[str]:
    """Each read of the process's environment, working folder, HOME or wall clock in
    `source`, as `line: os.environ`, outside the functions allowed to make them."""
    tree = ast.parse(source)
    allowed_lines: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.FunctionDef) and (module, node.name) in ENTRY_HELPERS
                and node.end_lineno is not None):
            allowed_lines |= set(range(node.lineno, node.end_lineno + 1))
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        reads: list[tuple[str, str]] = []
        if isinstance(node, ast.Attribute):
            owner = node.value  # os.environ, Path.cwd, pathlib.Path.home, Path(p).expanduser
            name = (owner.attr if isinstance(owner, ast.Attribute)
                    else owner.id if isinstance(owner, ast.Name) else "")
            reads = [(name, node.attr)]
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "os.path", "time",
                                                                 "posixpath"):
            reads = [(node.module.split(".")[-1], alias.name) for alias in node.names]
        else:
            continue
        found += [(node.lineno, node.col_offset,
                   f"{node.lineno}: {owner_name + '.' if owner_name else ''}{attr}")
                  for owner_name, attr in reads
                  if ((owner_name, attr) in PROCESS_READS or attr in ANY_OWNER)
                  and node.lineno not in allowed_lines]
    return [text for _, _, text in sorted(found)]


def test_nothing_below_the_entry_points_reads_the_environment_or_working_folder() -> None:
    """Settings are resolved once at the edge (`uwf.config.settings`) and passed down,
    so `main(argv)` can run in several threads at once, each with its own answers: no
    `os.environ`, `Path.cwd`, `expanduser`, `abspath` or `time.time` below it."""
    wrong = [f"{module} {read}" for module, path in modules()
             if module.split(".")[1:2] not in (["cli"], ["agents"])
             for read in process_reads(module, path.read_text("utf-8"))]
    assert wrong == []


def test_the_settings_rule_can_fail() -> None:
    reading = ("import os\nfrom pathlib import Path\nfrom os import getenv\n"
               "def process_settings():\n    return os.environ, Path.cwd()\n"
               "def other():\n    return os.environ.get('X'), Path.home(), os.getcwd()\n")
    assert process_reads("uwf.threads.service", reading) == [
        "3: os.getenv", "5: os.environ", "5: Path.cwd", "7: os.environ", "7: Path.home",
        "7: os.getcwd"]
    # Only the entry helper itself may read them.
    assert process_reads("uwf.config.settings", reading) == [
        "3: os.getenv", "7: os.environ", "7: Path.home", "7: os.getcwd"]
    assert process_reads("uwf.config.settings", "import pathlib\npathlib.Path.home()\n") == [
        "2: Path.home"]


def test_the_rule_catches_user_paths_and_the_clock_below_the_edge() -> None:
    """`~`, a relative path made absolute and the wall clock are the process's: below
    the edge each is a finding, but in the helpers named for them."""
    source = ("import os, time\nfrom pathlib import Path\nfrom os.path import abspath\n"
              "from time import time as now\n"
              "def f(p):\n    return Path(p).expanduser(), os.path.abspath(p), time.time()\n"
              "def g(p):\n    return os.path.expanduser(p), time.time_ns()\n"
              "def expand_user(p):\n    return Path(p).expanduser()\n"
              "def system_clock():\n    return time.time_ns()\n")
    assert process_reads("uwf.archive.folder", source) == [
        "3: path.abspath", "4: time.time", "6: expanduser", "6: path.abspath", "6: time.time",
        "8: path.expanduser", "8: time.time_ns", "10: expanduser", "12: time.time_ns"]
    assert process_reads("uwf.config.settings", source)[-2:] == [
        "8: time.time_ns", "12: time.time_ns"]
    assert process_reads("uwf.engine.clock", source)[-3:] == [
        "8: path.expanduser", "8: time.time_ns", "10: expanduser"]


# A service reads no `store.settings`: the command (the edge) resolves what the user gave
# with its own settings and passes the values down (issue 33, item 4). Modules named
# here may still read it, as many times as named; the count may only go down.
SETTINGS_READERS: dict[str, int] = {}  # none left: was 38 reads in services
EDGE = ("cli", "invoker", "dashboard", "mcp", "agents", "store", "config")


def below_the_edge() -> list[tuple[str, Path]]:
    """Modules outside the edge: a feature's `commands`, the surfaces, the store's
    opening and the settings."""
    return [(module, path) for module, path in modules()
            if module.split(".")[1:2] not in [[name] for name in EDGE]
            and not module.endswith(".commands")]


def settings_reads(source: str) -> int:
    """How many times `source` reads `store.settings` (or `self.store.settings`)."""
    return sum(1 for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Attribute) and node.attr == "settings"
               and ((isinstance(node.value, ast.Name) and node.value.id == "store")
                    or (isinstance(node.value, ast.Attribute) and node.value.attr == "store")))


def test_services_read_no_store_settings_beyond_the_few_named() -> None:
    """Outside the edge (a feature's `commands`, the surfaces, the store's opening)
    `store.settings` is read only where SETTINGS_READERS says, no more often."""
    found = {module: n for module, path in below_the_edge()
             if (n := settings_reads(path.read_text("utf-8")))}
    assert {module: n for module, n in found.items()
            if n > SETTINGS_READERS.get(module, 0)} == {}


def test_the_settings_count_can_fail() -> None:
    source = ("def f(store, self):\n    return store.settings.path, self.store.settings,"
              " settings.path, store.log\n")
    assert settings_reads(source) == 2


def test_an_agent_in_its_staging_folder_imports_no_store() -> None:
    """An agent process (uwf-mock, the kit) reads its context from, and writes its nodes
    to, its staging folder: what it imports for that must not load the store, the
    engine's views or SQLite (each agent process of a step would pay for them)."""
    import subprocess
    import sys

    probe = ("import sys\nimport uwf.agents.mock, uwf.threads.staging\n"
             "print(sorted(m for m in sys.modules if m in ('sqlite3', 'uwf.store', "
             "'uwf.engine.journal', 'uwf.threads.service', 'uwf.threads.agent')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)
    assert loaded.stdout.strip() == "[]"


def test_a_features_commands_and_results_are_cheap_to_import() -> None:
    """A surface (the CLI, an MCP server) loads every feature's argument declarations and
    result types up front: they must not load the store, the engine or SQLite."""
    import subprocess
    import sys

    cheap = sorted(f"uwf.{path.parent.name}.{path.stem}" for path in PACKAGE.glob("*/*.py")
                   if path.stem in ("commands", "results") and path.parent.name in FEATURES)
    assert "uwf.workflows.commands" in cheap
    probe = (f"import sys\nimport {', '.join(cheap)}\n"
             "print(sorted(m for m in sys.modules if m == 'sqlite3' or m == 'uwf.store' "
             "or m.startswith(('uwf.engine', 'uwf.cas')) or m.endswith('.service')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)
    assert loaded.stdout.strip() == "[]"


# A function below the edge that uses one part of the store (its CAS, its journal, its
# log, its views) takes that part, not the whole store (issue 33, item 4). Modules named
# here may still have such functions, as many as named; the count may only go down.
ONE_PART_TAKERS: dict[str, int] = {}  # none left


def one_part_takers(source: str) -> list[str]:
    """The functions of `source` with a parameter `store: Store` that use only one of
    its attributes (`store.cas`, `store.read()`, ...) and never pass it on whole."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or not any(
                arg.arg == "store" and isinstance(arg.annotation, ast.Name)
                and arg.annotation.id == "Store"
                for arg in [*function.args.args, *function.args.kwonlyargs]):
            continue
        parents = {child: node for node in ast.walk(function)
                   for child in ast.iter_child_nodes(node)}
        parts: set[str] = set()
        whole = False
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and node.id == "store" and isinstance(
                    node.ctx, ast.Load):
                parent = parents[node]
                if isinstance(parent, ast.Attribute) and parent.value is node:
                    parts.add(parent.attr)
                else:
                    whole = True
        if not whole and len(parts) == 1:
            found.append(function.name)
    return found


def test_a_function_that_uses_one_part_of_the_store_takes_that_part() -> None:
    found = {module: names for module, path in below_the_edge()
             if (names := one_part_takers(path.read_text("utf-8")))}
    assert {module: names for module, names in found.items()
            if len(names) > ONE_PART_TAKERS.get(module, 0)} == {}


def test_the_one_part_count_can_fail() -> None:
    source = ("def one(store: Store, n: int):\n    return store.cas.get(n), store.cas\n"
              "def two(store: Store):\n    return store.cas, store.log\n"
              "def passed(store: Store):\n    return store.cas, f(store)\n"
              "def other(store: ViewStore):\n    return store.checkpoints()\n"
              "async def read(*, store: Store):\n    return store.read()\n")
    assert one_part_takers(source) == ["one", "read"]
