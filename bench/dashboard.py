"""The dashboard's page render time against store size: 100,000 runs vs 100.

    python bench/dashboard.py [--quick] [--size N] [--small N] [--word WORD]
                              [--repeat R] [--dir DIR] [--fresh] [--keep]
                              [--wait-quiet S] [--profile]

Two stores of `bench/runs.py`'s mix of runs (`generate_runs`: 100,000 runs with
`--size`, 10,000 with `--quick`; and 100 with `--small`), views built once with
`uwf registry rebuild` (untimed), each served in this process by the dashboard's
own app (`create_app` over a `Context` naming the store, as `uwf dashboard`
builds it) through Starlette's TestClient: the whole ASGI path (the guard, the
route, the one worker thread, the commands, the template) without a socket.

Timed, each request end to end as the client sees it, R times (default 21; 15
with --quick), all interleaved in rotating order between the two stores:

- `/runs` (the first page), `/runs?status=failed`, `/runs?text=WORD`: the runs
  list; target big / small <= 1.5 (issue 22); and `/runs?status=failed&limit=9`,
  the same number of rows on both stores (the small one has 9 failed runs, so the
  page without a limit shows 9 rows against 50);
- `/runs/ID`, a completed run in the middle of each store: target <= 1.5;
- each of them with `?format=json` (the JSON twin: the CLI's payloads, no
  template), the same target;
- `/static/dashboard.css`, a file: the floor every request pays, not a target.

Each page is requested once first, untimed (it opens the store and warms the
caches), and checked: status 200, rows shown, the run found. With --profile,
each page over its target is profiled (cProfile) for one render on the big
store, in this thread: the page's commands (`uwf.dashboard.pages`) and its
template, as the app's worker runs them. Stores live in DIR/dashboard and are
deleted at the end unless --keep.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    add_common_args,
    begin,
    data_dir,
    fmt_ms,
    load,
    median,
    pressure,
    print_header,
    profile,
    remove_store,
    section,
    verdict,
)
from runs import add_store_args, build_current, generate_runs, middle_completed

TARGET_RATIO = 1.5
FLOOR = "/static/dashboard.css"


@dataclass
class Page:
    """One page (or its twin, or the floor) on both stores, and its timings."""

    label: str
    urls: dict[str, str]  # size -> URL
    target: bool = True
    times: dict[str, list[float]] = field(default_factory=lambda: {"small": [], "big": []})

    def wall(self, size: str) -> float:
        return median(self.times[size])

    @property
    def ratio(self) -> float:
        return self.wall("big") / self.wall("small")

    def ratios(self) -> list[float]:
        """Big / small within each round: both saw the same weather."""
        return [big / small for big, small in zip(self.times["big"], self.times["small"],
                                                  strict=True)]


def pages_of(ids: dict[str, str], word: str) -> list[Page]:
    made = []
    for label, path in (("/runs", "/runs"), ("/runs?status=failed", "/runs?status=failed"),
                        ("/runs?status=failed&limit=9", "/runs?status=failed&limit=9"),
                        (f"/runs?text={word}", f"/runs?text={word}"), ("/runs/ID", None)):
        urls = {size: path or f"/runs/{ids[size]}" for size in ids}
        made.append(Page(label, urls))
        twin = {size: url + ("&" if "?" in url else "?") + "format=json"
                for size, url in urls.items()}
        made.append(Page(label + ("&" if "?" in label else "?") + "format=json", twin))
    made.append(Page(FLOOR, dict.fromkeys(ids, FLOOR), target=False))
    return made


def context_for(root: Path, cwd: Path) -> Any:
    """The CLI's Context on the store at `root`, as `uwf dashboard --store ROOT` has it."""
    from uwf.cli.main import COMMANDS
    from uwf.invoker.context import Context

    environ = {key: value for key, value in os.environ.items() if not key.startswith("UWF_")}
    return Context(store_root=str(root), environ=environ, cwd=cwd, commands=COMMANDS)


@contextlib.contextmanager
def clients(roots: dict[str, Path], cwd: Path) -> Iterator[dict[str, Any]]:
    """A TestClient per store, each on its own app (its lifespan run)."""
    from starlette.testclient import TestClient

    from uwf.dashboard.app import create_app

    with contextlib.ExitStack() as stack:
        yield {size: stack.enter_context(TestClient(create_app(context_for(root, cwd))))
               for size, root in roots.items()}


def check_page(client: Any, page: Page, size: str) -> str:
    """One untimed request: what it showed (rows of how many, or the run found)."""
    url = page.urls[size]
    response = client.get(url)
    if response.status_code != 200:
        sys.exit(f"bench: GET {url} answered {response.status_code}:\n{response.text[:2000]}")
    if page.label == FLOOR:
        return f"{len(response.content):,} bytes"
    if "format=json" in url:
        payload = response.json()
        if "run show" in payload:
            shown = payload["run show"]
            if not shown.get("found"):
                sys.exit(f"bench: GET {url}: run not found")
            return f"found, {shown['run']['lifecycle']}, {len(payload['thread log'])} steps"
        found = payload["run search"]
        if not found["runs"]:
            sys.exit(f"bench: GET {url} listed no runs")
        return f"{len(found['runs'])} rows of {found['total']:,}"
    text = response.text
    if "uwf: error" in text:
        sys.exit(f"bench: GET {url} shows an error")
    return f"{len(text):,} bytes of HTML"


def measure(clients_by_size: dict[str, Any], pages: list[Page], repeat: int) -> None:
    """`repeat` rounds; each requests every page on both stores, in rotating order."""
    order = [(page, size) for page in pages for size in ("small", "big")]
    for index in range(repeat):
        shift = index % len(order)
        for page, size in order[shift:] + order[:shift]:
            client = clients_by_size[size]
            start = time.perf_counter()
            response = client.get(page.urls[size])
            elapsed = time.perf_counter() - start
            if response.status_code != 200:
                sys.exit(f"bench: GET {page.urls[size]} answered {response.status_code}")
            page.times[size].append(elapsed)


def quartiles(values: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"{q1:.2f}-{q3:.2f}"


def render_once(root: Path, cwd: Path, url: str) -> Callable[[], object]:
    """One render of `url` in this thread, as the app's worker does it: the page's
    commands, then (unless `format=json`) its template. For cProfile, which sees only
    the thread it runs in (the app renders in a worker thread of its own)."""
    from urllib.parse import parse_qsl, urlsplit

    from uwf.dashboard import pages
    from uwf.dashboard.app import templates
    from uwf.dashboard.calls import Caller

    context = context_for(root, cwd)
    context.json = True
    context.progress = None
    caller = Caller(context)
    environment = templates()
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    as_json = query.pop("format", None) == "json"

    def build() -> object:
        if parts.path.startswith("/runs/"):
            page = pages.run(caller, parts.path.removeprefix("/runs/"))
        else:
            page = pages.PAGES[parts.path][1](caller, query)
        if as_json:
            return page.payloads()
        return environment.get_template(page.template).render(
            page=page, calls=page.calls, path=parts.path, head=context.store.log.head().seq,
            live="refresh", stream="/log/stream",
            nav=[(path, title) for path, (title, _) in pages.PAGES.items()], **page.extra)

    build()  # the store opened, its caches warm: as in the timed requests
    return build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    add_store_args(parser)
    parser.add_argument("--repeat", type=int,
                        help="timed requests of each page on each store (default 21; 15 "
                             "with --quick)")
    parser.add_argument("--quick", action="store_true", help="10,000 runs, 15 repeats")
    add_common_args(parser)
    parser.add_argument("--profile", action="store_true",
                        help="profile one render on the big store of each page over target")
    args = parser.parse_args(argv)
    if args.quick:
        args.size = 10_000
    args.repeat = args.repeat or (15 if args.quick else 21)

    base = data_dir(args.dir)
    work = base / "dashboard"
    work.mkdir(parents=True, exist_ok=True)
    print_header("dashboard: page render time against store size (in-process, TestClient)",
                 work)
    roots: dict[str, Path] = {}
    for size, count in (("small", args.small), ("big", args.size)):
        made = generate_runs(work / f"runs-{count}", count, args.word, fresh=args.fresh)
        seconds, status = build_current(made.root, dict(os.environ))
        roots[size] = made.root
        how = "reused" if made.reused else f"written in {made.seconds:.1f} s"
        print(f"{size}: {made.root}  {count:,} runs, {int(status['logSeq']):,} events ({how}; "
              f"`registry rebuild` {seconds:.1f} s; runs view "
              f"{status['views']['runs']['rows']:,} rows)")
    ids = {size: middle_completed(root) for size, root in roots.items()}
    cwd = work / "cwd"  # a folder in no repository: the pages' scope is the whole store
    cwd.mkdir(exist_ok=True)
    pages = pages_of(ids, args.word)
    label_width = max(len(page.label) for page in pages)

    with clients(roots, cwd) as by_size:
        section("pages (requested once, untimed: the store opened, caches warm)")
        for page in pages:
            seen = [check_page(by_size[size], page, size) for size in ("small", "big")]
            print(f"{page.label:<{label_width}}  small: {seen[0]};  big: {seen[1]}")
        begin(args.wait_quiet)
        print(pressure())
        measure(by_size, pages, args.repeat)

    section(f"result (medians of {args.repeat} requests each, interleaved; end: {load()}; "
            f"{pressure()})")
    print(f"{'page':<{label_width}} {'small':>9} {'big':>9} {'ratio':>6}  "
          f"{'per-round quartiles':<19}  target <= {TARGET_RATIO}")
    over: list[Page] = []
    for page in pages:
        met = page.ratio <= TARGET_RATIO
        if page.target and not met:
            over.append(page)
        print(f"{page.label:<{label_width}} {fmt_ms(page.wall('small')):>9} "
              f"{fmt_ms(page.wall('big')):>9} {page.ratio:6.2f}  "
              f"{quartiles(page.ratios()):<19}  "
              f"{verdict(met) if page.target else '(the floor)'}")

    section("targets (issue 22)")
    for page in pages:
        if page.target:
            print(f"{page.label}: {args.size:,} / {args.small:,} runs <= {TARGET_RATIO}: "
                  f"{verdict(page.ratio <= TARGET_RATIO)} ({page.ratio:.2f})")

    if args.profile:
        # A twin shares its page's commands: its HTML page's profile says where both go.
        chosen = [page for page in over if "format=json" not in page.label] or over
        for page in chosen or pages[:1]:
            why = "over target" if over else "none over target; the first page, for reference"
            section(f"profile: {page.label}, one render on the big store ({why})")
            profile(render_once(roots["big"], cwd, page.urls["big"]), top=12)

    if args.keep:
        print(f"\nstores kept in {work}")
    else:
        for root in roots.values():
            remove_store(root)
        shutil.rmtree(cwd, ignore_errors=True)
        with contextlib.suppress(OSError):  # other sizes' stores, kept earlier, stay
            work.rmdir()
        print(f"\nstores deleted ({', '.join(str(root) for root in roots.values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
