"""Stores for the dashboard's tests (tests/e2e/test_dashboard*.py), made with the CLI and
uwf-mock: a finished run (whose prompt carries a `<script>`), a failed run and a queue
with a leased, a ready and a parked entry; and a real uvicorn serving the app on a
free loopback port in a thread."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import Cli
from tests.threadkit import Kit, make_kit

XSS = "<script>alert('owned')</script> Fix the login bug"


@dataclass
class Fleet:
    kit: Kit
    done: str  # a completed run (solve-issue, five steps)
    failed: str  # a run whose first step's agent failed
    entries: dict[str, str]  # queue entry id by status: leased, ready, parked

    @property
    def cli(self) -> Cli:
        return self.kit.cli


def new_cli(root: Path) -> Cli:
    """The `cli` fixture's store and environment, for a store a module shares."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    env["UWF_HOME"] = str(root / "store")
    env["XDG_CONFIG_HOME"] = str(root / "config")
    return Cli(root / "store", env)


def make_fleet(root: Path) -> Fleet:
    kit = make_kit(new_cli(root), root)
    config: dict[str, Any] = {
        "agents": {"mock": {"command": "uwf-mock", "args": [str(kit.mock_script())]},
                   "broken": {"command": "false"}},
        "defaultAgent": "mock"}
    kit.write_config(config)
    kit.put_workflow()
    done = kit.start(prompt=XSS)
    assert kit.ok("thread", "run", done)["done"] is True
    failed = kit.start(prompt="This one fails")
    assert kit.uwf("thread", "step", failed, "--agent", "broken").code == 1
    kit.ok("sched", "policy", "set", "--max-attempts", "1", "--max-concurrent", "2")
    parked = kit.ok("queue", "add", "--workflow", "solve-issue", "-p", "parks",
                    "--session", "s1")["entry"]["id"]
    lease = kit.ok("sched", "lease", "--limit", "1")["leases"][0]
    assert lease["id"] == parked
    kit.ok("sched", "release", parked, "--lease", lease["leaseId"], "--failed",
           "--reason", "tests fail")
    leased = kit.ok("queue", "add", "--workflow", "solve-issue", "-p", "leased",
                    "--session", "s1", "--priority", "10")["entry"]["id"]
    assert kit.ok("sched", "lease", "--limit", "1")["leases"][0]["id"] == leased
    ready = kit.ok("queue", "add", "--workflow", "solve-issue", "-p", "waits",
                   "--session", "s2")["entry"]["id"]
    return Fleet(kit, done, failed, {"leased": leased, "ready": ready, "parked": parked})


def context_of(cli: Cli, **extra: str) -> Any:
    """The CLI's Context for this store and environment, as `uwf dashboard` gets it
    (among uwf's commands)."""
    from uwf.cli.main import COMMANDS
    from uwf.invoker.context import Context

    return Context(environ={**cli.env, **extra}, cwd=cli.home.parent, commands=COMMANDS)


@contextmanager
def served(app: Any) -> Iterator[str]:
    """`app` on a real uvicorn at a free loopback port, in a thread; its base URL."""
    import uvicorn

    from uwf.dashboard.server import bind, url_of

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield url_of(sock).rstrip("/")
    finally:
        app.state.stopping.set()
        server.should_exit = True
        thread.join(10)
        sock.close()
