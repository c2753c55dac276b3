"""Declaration of `uwf doctor`: whether this machine and store are healthy (the
arguments and the checks are the doctor's, `uwf.doctor`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uwf.doctor import commands as doctor
from uwf.doctor.commands import Doctor
from uwf.invoker.spec import Command

if TYPE_CHECKING:
    from uwf.doctor.results import Diagnosis
    from uwf.invoker.context import Context

_MARK = {"ok": "ok", "warn": "warn", "fail": "FAIL"}


def _doctor(args: Doctor, ctx: Context) -> Diagnosis:
    """The checks run with the command's settings; the store is opened (and closed) by
    the checks themselves, only when it is there."""
    return doctor.doctor(args, ctx.settings)


def _panel(payload: dict[str, Any]) -> str:
    checks = payload["checks"]
    width = max(len(check["name"]) for check in checks) + 2
    lines = [f"{_MARK[check['status']]:<6}{check['name']:<{width}}{check['detail']}"
             for check in checks]
    failed = sum(check["status"] == "fail" for check in checks)
    warned = sum(check["status"] == "warn" for check in checks)
    if failed or warned:
        lines.append(f"{failed} failed, {warned} to look at, of {len(checks)} checks")
    else:
        lines.append(f"all {len(checks)} checks ok")
    return "\n".join(lines)


DOCTOR_COMMANDS: list[Command[Any]] = [
    Command(("doctor",), "Check this machine and store, a line each with what to do: "
            "Python and the extras, the store's format and hash rule, the lock, the views, "
            "the log's tail, disk space, anchors, the config and its agents, and any "
            "PostgreSQL or MQTT server named (exit 1 when a check fails).",
            "uwf doctor --broker mqtt://localhost:1883", Doctor, _doctor, human=_panel,
            ok_exit=True, read_only=True),
]
