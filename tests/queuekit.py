"""Helpers for the queue and scheduler tests: `uwf` as a real process on a temporary
store, each call checked for its exit code, and every refusal checked for one line on
stderr and an unchanged log."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLE, Cli

T0 = "2026-12-01T10:00:00.000Z"


def at(seconds: float) -> str:
    """The instant `seconds` after T0, as RFC 3339 with ms."""
    from uwf.engine.clock import format_ts, parse_instant

    return format_ts(parse_instant(T0) + round(seconds * 1000))


@dataclass
class Queue:
    cli: Cli

    def ok(self, *args: str, now: str | None = None) -> Any:
        """Run `uwf ARGS --json`, expect exit 0, return the parsed payload."""
        extra = ["--now", now] if now is not None else []
        result = self.cli.run(*args, "--json", *extra)
        assert result.code == 0, f"uwf {' '.join(args)}: {result.err}"
        return json.loads(result.out)

    def text(self, *args: str, now: str | None = None) -> str:
        extra = ["--now", now] if now is not None else []
        result = self.cli.run(*args, *extra)
        assert result.code == 0, f"uwf {' '.join(args)}: {result.err}"
        return result.out.strip()

    def refused(self, code: int, *args: str, now: str | None = None) -> str:
        """Run `uwf ARGS`: refused with exit `code`, one line, nothing written
        (`Cli.refuses`)."""
        extra = ["--now", now] if now is not None else []
        return self.cli.refuses(code, *args, *extra)

    def add(self, *args: str, now: str | None = None, prompt: str = "Fix the login bug"
            ) -> str:
        """Queue an entry of the example workflow; its id."""
        payload = self.ok("queue", "add", "--workflow", "solve-issue", "-p", prompt, *args,
                          now=now)
        return str(payload["entry"]["id"])

    def entry(self, entry_id: str, now: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = self.ok("queue", "show", entry_id, now=now)
        return payload

    def lease(self, *args: str, now: str | None = None) -> list[dict[str, Any]]:
        leases: list[dict[str, Any]] = self.ok("sched", "lease", *args, now=now)["leases"]
        return leases

    def policy(self, *args: str) -> dict[str, Any]:
        policy: dict[str, Any] = self.ok("sched", "policy", "set", *args)["policy"]
        return policy

    def events(self) -> list[dict[str, Any]]:
        out = self.text("log", "tail", "-n", "1000000", "--json")
        return [json.loads(line) for line in out.splitlines()]

    def batch(self, path: Path, lines: list[Any]) -> Path:
        path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                                for line in lines), "utf-8")
        return path


def queue_on(cli: Cli) -> Queue:
    """A store with the example workflow registered."""
    kit = Queue(cli)
    kit.ok("workflow", "put", str(EXAMPLE))
    return kit
