"""What `uwf doctor` returns: each check's name, how it stands and, when it does not
stand well, what is wrong and what to do, in one line."""

from __future__ import annotations

from typing import Literal

from uwf.payload import Result

Status = Literal["ok", "warn", "fail"]


class Check(Result):
    """One check: `ok`, `warn` (works, but worth a look) or `fail` (something a command
    will trip over); `detail` is one line: what was found, and for a warning or a
    failure, what to do about it."""

    name: str
    status: Status
    detail: str


class Diagnosis(Result):
    """Every check in a fixed order; `ok` is false when one failed (exit 1)."""

    ok: bool
    store: str
    checks: list[Check]


def ok(name: str, detail: str) -> Check:
    return Check(name=name, status="ok", detail=detail)


def warn(name: str, what: str, fix: str) -> Check:
    return Check(name=name, status="warn", detail=f"{what}; {fix}")


def fail(name: str, what: str, fix: str) -> Check:
    return Check(name=name, status="fail", detail=f"{what}; {fix}")
