"""`uwf demo`: the whole system in one command, in a scratch store (docs/audit.md).

It registers the shipped example workflow, runs a thread to its end with
`uwf-mock` (a real agent subprocess per step), shows the run in the registry,
deletes the views and shows that every read prints the same bytes after the
rebuild, syncs and verifies a per-run archive, and then forges copies of the log
three ways (edit a field, delete a line, swap two lines) and shows `uwf log
verify` naming each; a fourth forgery (cutting the log's end, with its views
deleted) passes the chain and is caught by a signed anchor. Nothing outside the
scratch folder is read or written: no config, no key, no `UWF_HOME`.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from uwf.config.configfile import Config, WorkflowConfig
from uwf.payload import to_payload
from uwf.store import Store
from uwf.threads.results import LogRecord

PROMPT = "Fix the login bug in #42"
STEPS = ("register", "start", "run", "registry", "rebuild", "archive")
FORGERIES = 4


@dataclass
class Demo:
    """One run of the demo in `root`: `run()` yields each step and forgery as it is
    done; `steps` and `forgeries` keep them."""

    root: Path
    steps: list[dict[str, Any]] = field(default_factory=list)
    forgeries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def store_root(self) -> Path:
        return self.root / "store"

    def step(self, name: str, ok: bool, text: str, **details: Any) -> dict[str, Any]:
        entry = {"step": name, "ok": ok, "text": text, **details}
        self.steps.append(entry)
        return entry

    def forged(self, name: str, caught: bool, text: str, **details: Any) -> dict[str, Any]:
        entry = {"forgery": name, "caught": caught, "text": text, **details}
        self.forgeries.append(entry)
        return entry

    # -- the tour --------------------------------------------------------------------

    def run(self) -> Iterator[dict[str, Any]]:
        from uwf.archive import service as archive
        from uwf.archive import verify as archive_verify
        from uwf.runs import registry
        from uwf.runs import service as runs
        from uwf.threads.service import show_thread, start_thread
        from uwf.threads.stepping import run_thread
        from uwf.workflows.service import put_workflow

        files = self._files()
        with closing(Store.open(self.store_root)) as store:
            put = put_workflow(store, files / "solve-issue.yaml")
            yield self.step("register", True, f"registered workflow {put.name}",
                      workflow=put.workflow)
            thread = start_thread(store, put.name, PROMPT, repo=str(self.root),
                                  settings=store.settings).thread
            yield self.step("start", True, f"started thread {thread}: {PROMPT!r}", thread=thread)
            agent = " ".join(shlex.quote(part) for part in (
                sys.executable, "-m", "uwf.agents.mock", str(files / "mock-solve-issue.yaml")))
            done = run_thread(store, thread, agent=agent, config=_no_config(), timeout=60,
                              settings=store.settings)
            roles = [item.role for item in _history(store, thread)]
            yield self.step("run", done.done,
                      f"ran it to $END with uwf-mock in {done.steps} steps: "
                      + " -> ".join(roles), steps=done.steps, roles=roles)
            shown = registry.show(store)
            lifecycles = shown.runs.lifecycles or {}
            yield self.step("registry", lifecycles.get("completed") == 1,
                      "registry: " + ", ".join(f"{n} {state}" for state, n in
                                               lifecycles.items())
                      + f"; {len(shown.views)} views {shown.status}",
                      lifecycles=lifecycles)
            before = _reads(store, thread, show_thread, runs.show)
        shutil.rmtree(self.store_root / "views")
        with closing(Store.open(self.store_root)) as store:
            after = _reads(store, thread, show_thread, runs.show)
            events = store.log.head().seq
        same = before == after
        yield self.step("rebuild", same,
                  f"deleted the views; rebuilt from {events} events, thread show and run "
                  f"show print the same bytes (sha256 {_sha(after)[:16]})" if same else
                  "deleted the views; the rebuilt reads differ", events=events)
        with closing(Store.open(self.store_root)) as store:
            synced = archive.sync(store, self.root / "archive")
            checked = archive_verify.verify(store, self.root / "archive")
        summary = json.loads((self.root / "archive" / "runs" / thread / "summary.json")
                             .read_text("utf-8"))
        yield self.step("archive", checked.ok,
                  f"archive: runs/{thread}/ with {synced.appended} transition lines, "
                  f"graph.json, summary.json (outcome {summary['outcome']}); archive verify "
                  + ("ok" if checked.ok else "FAILED"), outcome=summary["outcome"])
        yield from self._forge()

    def _files(self) -> Path:
        """The shipped example workflow and mock script, as files on disk."""
        folder = self.root / "example"
        folder.mkdir()
        for name in ("solve-issue.yaml", "mock-solve-issue.yaml"):
            text = resources.files("uwf.agents").joinpath("demo", name).read_text("utf-8")
            (folder / name).write_text(text, "utf-8")
        return folder

    # -- forgeries -------------------------------------------------------------------

    def _forge(self) -> Iterator[dict[str, Any]]:
        lines = _log_lines(self.store_root)
        # A line in the middle with a string field to edit: the thread's start.
        started = next(n for n, raw in enumerate(lines) if b'"type":"thread.started"' in raw)
        middle = len(lines) // 2
        yield self._forgery("edit a field", lambda raws: _edit(raws, started),
                      f"changed the prompt in seq {started + 1}")
        yield self._forgery("delete a line", lambda raws: raws[:middle] + raws[middle + 1:],
                      f"deleted seq {middle + 1}")
        yield self._forgery("swap two lines", lambda raws: _swap(raws, middle),
                      f"swapped seq {middle + 1} and {middle + 2}")
        yield self._anchored_cut()

    def _forgery(self, name: str, change: Callable[[list[bytes]], list[bytes]],
                 what: str) -> dict[str, Any]:
        from uwf.audit import verify as audit

        copy = self._copy(name)
        _write_log(copy, change(_log_lines(copy)))
        with closing(Store.open(copy)) as store:
            result = audit.verify(store)
        problems = result.problems
        first = problems[0] if problems else None
        return self.forged(name, not result.ok,
                    f"{what}: log verify names it" + (
                        f" (seq {first.seq}: {first.problem})" if first else ""),
                    problems=len(problems), first=to_payload(first))

    def _anchored_cut(self) -> dict[str, Any]:
        """Cut the last batch and delete the views: the chain cannot see it, an anchor
        of the head made before does."""
        from uwf.audit import anchor
        from uwf.audit import verify as audit

        key = self.root / "keys" / "anchor.pem"
        anchor.new_key(key)
        copy = self._copy("anchored cut")
        with closing(Store.open(copy)) as store:
            made = anchor.make(store, key)
        path = self.root / "anchor.json"
        anchor.write(made, path)
        raws = _log_lines(copy)
        cut = max(n for n, raw in enumerate(raws) if b'"batch":[1,' in raw)
        _write_log(copy, raws[:cut])
        shutil.rmtree(copy / "views", ignore_errors=True)
        with closing(Store.open(copy)) as store:
            plain = audit.verify(store)
            loaded = anchor.load(path, anchor.load_public_key(key.with_name("anchor.pem.pub")))
            anchored = audit.verify(store, [(str(path), loaded)])
        problem = anchored.problems[0].problem if anchored.problems else None
        return self.forged("cut the end", not anchored.ok,
                    f"cut seq {cut + 1}..{len(raws)} and deleted the views: log verify alone "
                    + ("passes (no later line covers the end)" if plain.ok else "fails")
                    + "; with an anchor of the head it names it"
                    + (f" ({problem})" if problem else ""),
                    plainOk=plain.ok, problem=problem)

    def _copy(self, name: str) -> Path:
        copy = self.root / "forged" / name.replace(" ", "-")
        shutil.copytree(self.store_root, copy, ignore=shutil.ignore_patterns("lock"))
        return copy


def tour(keep: bool = False) -> Iterator[dict[str, Any]]:
    """Run the demo in a new temporary folder (removed unless `keep`): each step and
    forgery as it is done, then `{"result": ...}`, which says whether all went as
    shown (every step ok, every forgery caught)."""
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="uwf-demo-"))
    demo = Demo(root)
    try:
        yield from demo.run()
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    ok = (len(demo.steps) == len(STEPS) and all(step["ok"] for step in demo.steps)
          and len(demo.forgeries) == FORGERIES
          and all(forgery["caught"] for forgery in demo.forgeries))
    yield {"result": {"ok": ok, "folder": str(root) if keep else None, "steps": demo.steps,
                      "forgeries": demo.forgeries,
                      "caught": sum(f["caught"] for f in demo.forgeries),
                      "seconds": round(time.monotonic() - started, 2)}}


def run(keep: bool = False) -> dict[str, Any]:
    """The demo's result (see `tour`)."""
    result: dict[str, Any] = {}
    for entry in tour(keep):
        result = entry.get("result", result)
    return result


# -- helpers -----------------------------------------------------------------------------

def _no_config() -> Config:
    """No providers, no agents, no `.env`: the demo names its agent itself."""
    return Config(WorkflowConfig(), None, None)


def _history(store: Store, thread: str) -> list[LogRecord]:
    from uwf.threads.service import iter_log

    return list(iter_log(store, thread))


def _reads(store: Store, thread: str, *reads: Callable[[Store, str], Any]) -> bytes:
    return b"".join(json.dumps(to_payload(read(store, thread)), sort_keys=True).encode()
                    + b"\n" for read in reads)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _segments(root: Path) -> list[Path]:
    return sorted((root / "events").glob("*.jsonl"))


def _log_lines(root: Path) -> list[bytes]:
    return [raw for path in _segments(root) for raw in path.read_bytes().splitlines()]


def _write_log(root: Path, raws: list[bytes]) -> None:
    """The forged lines, as one segment named for seq 1 (what a forger would leave)."""
    for path in _segments(root):
        path.unlink()
    (root / "events" / f"{1:020d}.jsonl").write_bytes(b"".join(raw + b"\n" for raw in raws))


def _edit(raws: list[bytes], index: int) -> list[bytes]:
    edited = list(raws)
    edited[index] = edited[index].replace(b"login", b"logout", 1)
    return edited


def _swap(raws: list[bytes], index: int) -> list[bytes]:
    swapped = list(raws)
    swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
    return swapped
