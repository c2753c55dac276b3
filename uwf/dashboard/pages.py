"""Each page: the commands it calls (with which arguments from its query) and what its
template gets besides their payloads. A page's JSON twin is `{command: payload}` of
exactly those calls, so the HTML never shows what the CLI would not print."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from uwf.dashboard.calls import Called, Caller
from uwf.dashboard.graph import END, Graph, layout

Query = Mapping[str, str]
# The lifecycles in the order the bar shows them (uwf.runs.terms.LIFECYCLES).
LIFECYCLES = ("running", "waiting", "blocked", "failed", "completed", "cancelled", "queued",
              "stalled", "archived")
DETAIL_CHARS = 20_000  # a step's detail shown at most this long


@dataclass
class Page:
    """What a page shows: its template, the calls by command, and extra values."""

    template: str
    title: str
    calls: dict[str, Called]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> int:
        """The first call's status: the page is that command's page."""
        return next(iter(self.calls.values())).status

    def payloads(self) -> dict[str, Any]:
        """The JSON twin: each command's `--json` payload (or its error), by command."""
        return {name: called.payload for name, called in self.calls.items()}


def _pick(query: Query, *names: str) -> dict[str, str | None]:
    return {name: (query.get(name) or None) for name in names}


# The filters' words on the pages, for a value a command refuses (a query parameter
# not in a form is named as the query names it).
LABELS = {"status": "lifecycle", "limit": "per page", "n": "last", "run": "run id",
          "thread": "run id"}
QUEUE_LABELS = {**LABELS, "status": "status"}


def _calls(caller: Caller, *calls: tuple[str, Mapping[str, Any]],
           labels: Mapping[str, str] = LABELS) -> dict[str, Called]:
    return {name: caller.call(name, arguments, labels) for name, arguments in calls}


def runs(caller: Caller, query: Query) -> Page:
    """`run search` with the page's filters, `run counts` (the lifecycle bar), and the
    runs waiting for an answer first, with their questions (`thread list --waiting`)."""
    filters = _pick(query, "workflow", "status", "text", "repo", "limit", "offset")
    calls = _calls(caller, ("run search", filters), ("run counts", {}),
                   ("thread list", {"waiting": True}))
    return Page("runs.html", "Runs", calls, {"filters": filters,
                                              "bar": _bar(calls["run counts"])})


def history(caller: Caller, query: Query) -> Page:
    filters = _pick(query, "workflow", "status", "limit", "offset")
    return Page("history.html", "History", _calls(caller, ("history", filters)),
                {"filters": filters})


def run(caller: Caller, run_id: str) -> Page:
    """`run show`, its thread's `thread log` and its workflow's `workflow show`; and,
    while it waits for an answer, `thread show` (the question and its schema)."""
    calls = _calls(caller, ("run show", {"run": run_id}))
    shown = calls["run show"].payload if calls["run show"].status == 200 else {}
    record = shown.get("run") or shown.get("lastKnown")
    if record is not None:
        calls.update(_calls(caller, ("thread log", {"thread": run_id}),
                            ("workflow show", {"ref": record["workflow"]["hash"]})))
        if record.get("lifecycle") == "waiting":
            calls.update(_calls(caller, ("thread show", {"thread": run_id})))
    extra: dict[str, Any] = {"record": record, "found": shown.get("found", False),
                             "run_id": run_id}
    steps = calls.get("thread log")
    records = steps.payload if steps is not None and steps.status == 200 else []
    extra["steps"] = [_step(caller, step) for step in records]
    extra["span"] = _span(records)
    definition = calls.get("workflow show")
    if record is not None and definition is not None and definition.status == 200:
        visited = [(str(step["role"]), str(step["status"])) for step in records]
        if record.get("loopStage") == END and shown.get("found"):
            visited.append((END, ""))
        extra["graph"] = layout(definition.payload["definition"], visited)
    return Page("run.html", f"Run {run_id}", calls, extra)


def queue(caller: Caller, query: Query) -> Page:
    """`queue list` with its filters, `queue counts` (per status, and the throughput)
    and `sched plan` (why the rest waits)."""
    filters = _pick(query, "status", "session", "repo", "limit", "offset")
    if filters["limit"] is None:
        filters["limit"] = "100"
    calls = _calls(caller, ("queue list", filters), ("queue counts", {}), ("sched plan", {}),
                   labels=QUEUE_LABELS)
    return Page("queue.html", "Queue", calls, {"filters": filters})


def log(caller: Caller, query: Query) -> Page:
    """`log tail` (default the last 50) with its type and subject filters."""
    filters = _pick(query, "type", "subject", "n")
    if filters["n"] is None:
        filters["n"] = "50"
    calls = _calls(caller, ("log tail", filters))
    return Page("log.html", "Event log", calls, {"filters": filters})


def verify(caller: Caller, query: Query) -> Page:
    """`log verify` and `registry verify`, their problems named."""
    return Page("verify.html", "Verify", _calls(caller, ("log verify", {}),
                                                 ("registry verify", {})))


PAGES: dict[str, tuple[str, Callable[[Caller, Query], Page]]] = {
    "/runs": ("Runs", runs), "/queue": ("Queue", queue), "/history": ("History", history),
    "/log": ("Log", log), "/verify": ("Verify", verify)}


# -- what the templates get besides payloads -----------------------------------------------

def _bar(called: Called) -> list[dict[str, Any]]:
    """`run counts`'s lifecycles as segments of a 100-wide bar."""
    if called.status != 200:
        return []
    counts = called.payload.get("lifecycles") or {}
    total = sum(counts.values())
    segments, at = [], 0.0
    for state in [*LIFECYCLES, *sorted(set(counts) - set(LIFECYCLES))]:
        count = counts.get(state, 0)
        if count:
            width = 100 * count / total
            segments.append({"state": state, "count": count, "x": round(at, 3),
                             "width": round(width, 3)})
            at += width
    return segments


def _step(caller: Caller, step: dict[str, Any]) -> dict[str, Any]:
    """A `thread log` record with its output pretty and its detail node's text (or that
    the node is missing)."""
    detail, missing = _detail(caller, step.get("detail"))
    started, completed = step.get("startedAtMs"), step.get("completedAtMs")
    return {**step, "outputText": json.dumps(step.get("output"), indent=2, ensure_ascii=False),
            "detailText": detail, "detailMissing": missing,
            "started": _instant(started), "completed": _instant(completed),
            "seconds": (completed - started) / 1000 if started and completed else None}


def _detail(caller: Caller, hash_: Any) -> tuple[str | None, bool]:
    if not isinstance(hash_, str) or not hash_:
        return None, False
    from uwf.errors import UwfError

    try:
        payload = caller.context.store.cas.get(hash_).payload
    except UwfError:
        return None, True
    text = payload if isinstance(payload, str) else json.dumps(payload, indent=2,
                                                               ensure_ascii=False)
    if caller.context.redact is not None:
        from uwf.invoker.text import masked

        text = masked(text, caller.context.redact)
    return text[:DETAIL_CHARS], False


def _span(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's first start and last end (ms), for the timeline's bars."""
    starts = [r["startedAtMs"] for r in records if isinstance(r.get("startedAtMs"), int)]
    ends = [r["completedAtMs"] for r in records if isinstance(r.get("completedAtMs"), int)]
    if not starts or not ends or max(ends) <= min(starts):
        return None
    return {"start": min(starts), "end": max(ends)}


def _instant(ms: Any) -> str | None:
    if not isinstance(ms, int):
        return None
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


__all__ = ["PAGES", "Graph", "Page"]
