"""`!include PATH` in workflow YAML: a value taken from another file.

The include is resolved on the composed YAML nodes, before anything is checked or
built: the `!include` scalar is replaced by the nodes of the file it names (a `.yaml`,
`.yml` or `.json` file parsed as YAML; any other file its text, one string). So the
limits `load_yaml` enforces (values with aliases expanded, depth, JSON's kinds of value)
are measured over the whole document, includes and all, and the bytes over every file
read together. Each file is read once, through uwf.config.inputfile (a FIFO or a device
is refused unopened), however often it is included.

A path is relative to the folder of the file that includes it (links followed) and
must lead, links followed, inside the boundary: the git top level of the workflow
file (the nearest folder up holding `.git`), else the workflow file's own folder. An
include of a file being included (a cycle), or a chain deeper than MAX_INCLUDE_DEPTH,
is refused. See docs/workflows.md#include.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uwf.config.inputfile import LIMITS_DOC, open_input, size_words
from uwf.errors import Rejected, UwfError

INCLUDE_TAG = "!include"
# Parsed as YAML (JSON is YAML); a file with any other suffix is included as its text.
YAML_SUFFIXES = (".yaml", ".yml", ".json")
# Files including files including files...: deeper than this is refused (a chain of
# includes does not nest the values, so MAX_DEPTH alone would not bound it).
MAX_INCLUDE_DEPTH = 32

_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_SHOWN_PATH_CHARS = 120

# Makes a loader for a YAML text; its marks are named after the stream's `name`.
LoaderFor = Callable[[Any], Any]


def boundary_of(workflow_file: Path) -> Path:
    """The folder includes must stay inside: the git top level of `workflow_file`
    (already resolved), else its folder."""
    for folder in (workflow_file.parent, *workflow_file.parent.parents):
        if (folder / ".git").exists():
            return folder
    return workflow_file.parent


def splice_includes(root: Any, path: Path, bytes_left: int, limit: int,
                    loader_for: LoaderFor) -> Any:
    """`root`, the composed node of the workflow file `path`, with every `!include` in
    it (and in the files it includes) replaced by the included nodes.

    `bytes_left` is what the included files may add to the bytes already read (the
    whole is at most `limit`). Every refusal is Rejected, naming the including file,
    the include's line and YAML path, and the path it gives.
    """
    top = path.resolve()
    splicer = _Splicer(top, boundary_of(top), bytes_left, limit, loader_for)
    return splicer.splice(root, top, (top,))


@dataclass
class _Splicer:
    top: Path
    boundary: Path
    bytes_left: int
    limit: int
    loader_for: LoaderFor
    # Each file's nodes, spliced, by its resolved path: read once, however often included.
    done: dict[Path, Any] = field(default_factory=dict)

    def splice(self, root: Any, file: Path, chain: tuple[Path, ...], base: str = "") -> Any:
        """`root` (nodes of `file`, reached through `chain`, at the YAML path `base` of
        the whole document) with its includes replaced, in place; the root itself may be
        one. Iterative: a deep file cannot exhaust the stack; each collection is visited
        once, however many aliases name it."""
        import yaml

        if root.tag == INCLUDE_TAG:
            return self.include(root, file, base, chain)
        visited: set[int] = set()
        stack: list[tuple[Any, str]] = [(root, base)]
        while stack:
            node, where = stack.pop()
            if isinstance(node, yaml.ScalarNode) or id(node) in visited:
                continue
            visited.add(id(node))
            if isinstance(node, yaml.SequenceNode):
                for index, child in enumerate(node.value):
                    child_where = f"{where}[{index}]"
                    if child.tag == INCLUDE_TAG:
                        node.value[index] = self.include(child, file, child_where, chain)
                    else:
                        stack.append((child, child_where))
                continue
            for index, (key, value) in enumerate(node.value):
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                child_where = f"{where}.{name}" if where else str(name)
                new_key, new_value = key, value
                if key.tag == INCLUDE_TAG:
                    new_key = self.include(key, file, child_where, chain)
                if value.tag == INCLUDE_TAG:
                    new_value = self.include(value, file, child_where, chain)
                else:
                    stack.append((value, child_where))
                node.value[index] = (new_key, new_value)
        return root

    def include(self, node: Any, file: Path, where: str, chain: tuple[Path, ...]) -> Any:
        """The nodes that the `!include` node `node` of `file`, at the YAML path `where`,
        stands for. (A file included from two places is named by the first's paths.)"""
        import yaml

        at = (f"{file}: at line {node.start_mark.line + 1}, column "
              f"{node.start_mark.column + 1}: {where or '(root)'}: ")
        value = node.value if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(value, str) or not value.strip():
            raise Rejected(f"{at}!include takes a file path (a string)",
                           "write `!include path/to/file`, relative to this file's folder")
        shown = value if len(value) <= _SHOWN_PATH_CHARS else value[:_SHOWN_PATH_CHARS] + "..."
        prefix = f"{at}!include {shown}: "
        try:
            target = (file.parent / value).resolve()  # an absolute `value` stays itself
        except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a link loop
            raise Rejected(f"{prefix}cannot resolve the path: {exc}", "fix the path") from None
        if not target.is_relative_to(self.boundary):
            inside = (f"the repo {self.boundary}" if (self.boundary / ".git").exists()
                      else f"{self.boundary}, the folder of {self.top} (not in a git repo)")
            raise Rejected(f"{prefix}{target} is outside {inside}",
                           "include only files inside it (links are followed)")
        if target in chain:
            cycle = " -> ".join(str(part) for part in (*chain, target))
            raise Rejected(f"{prefix}an include cycle: {cycle}",
                           "remove one of these includes")
        if len(chain) > MAX_INCLUDE_DEPTH:
            raise Rejected(f"{prefix}includes nested more than {MAX_INCLUDE_DEPTH} deep",
                           f"include the files from fewer levels; {LIMITS_DOC}")
        if target in self.done:
            return self.done[target]
        text = self.read(target, prefix)
        if target.suffix.lower() in YAML_SUFFIXES:
            spliced = self.splice(self.compose(text, target, node, prefix), target,
                                  (*chain, target), where)
        else:
            spliced = yaml.ScalarNode(_STR, text, node.start_mark, node.end_mark)
        self.done[target] = spliced
        return spliced

    def read(self, target: Path, prefix: str) -> str:
        """The text of `target`, its bytes taken from what the whole may still read."""
        try:
            with open_input(target, self.bytes_left, error=Rejected) as handle:
                data = handle.read(self.bytes_left + 1)
        except UwfError as exc:  # not a regular file (refused unopened), missing, denied
            raise Rejected(f"{prefix}{exc.what}", exc.next_action) from None
        except OSError as exc:
            raise Rejected(f"{prefix}cannot read {target}: {exc.strerror or exc}",
                           "check the path and its permissions") from None
        if len(data) > self.bytes_left:
            raise Rejected(f"{self.top} and the files it includes are more than "
                           f"{size_words(self.limit)} together (passed while reading "
                           f"{target}, for {prefix.removesuffix(': ')})",
                           f"include less, or shorten the files; {LIMITS_DOC}")
        self.bytes_left -= len(data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Rejected(f"{prefix}cannot read {target}: {exc}",
                           "include a UTF-8 text or YAML file") from None

    def compose(self, text: str, target: Path, include: Any, prefix: str) -> Any:
        """The YAML nodes of `text` (the file `target`): its marks name `target`."""
        import yaml

        stream = io.StringIO(text)
        stream.name = os.fspath(target)  # read by the loader for its marks' name
        loader = self.loader_for(stream)
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            said = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise Rejected(f"{prefix}{target}: malformed YAML{where}: {said}",
                           "fix the YAML") from None
        except RecursionError:  # the pure-Python parser on deep nesting
            raise Rejected(f"{prefix}{target}: nested too deep", LIMITS_DOC) from None
        finally:
            loader.dispose()
        if node is None:  # an empty file: null, as an empty workflow file is
            return yaml.ScalarNode(_NULL, "", include.start_mark, include.end_mark)
        return node
