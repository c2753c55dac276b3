"""What each piece of a PostgreSQL lease+complete cycle costs the server, measured by
taking it out (issue 31): the backend's instructions a cycle, counted exactly.

    python bench/pg_server_ablate.py [--only NAME,...] [--short N] [--long N]
                                     [--entries N] [--dir DIR]

As bench/pg_server_instructions.py (one throw-away cluster under callgrind, a cycle's
instructions the difference of two runs' backends over the difference of their cycles,
set-up and warm-up left out), with one uwf store a variant, all in the same cluster:
`base` (the procedures as uwf/queue/pgcalls.py makes them; measured before the variants
and again after them) and each scratch change of
ABLATIONS, a rewrite of the procedures' generated text (a regular expression and its
replacement), put in this process only: the procedures' names are digests of their text,
so each variant is a procedure of its own on the server. A variant's difference from
`base` is what the piece costs; one that doubles a piece (`x2`) measures it where taking
it out would change what the cycle does. Scratch measures, not uwf: some variants leave
views that `registry verify` would refuse (their stores are thrown away).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from common import add_common_args, code_version, env_with, fresh_dir
from pg_queue_bench import fill_pg_store
from pg_server_instructions import PORT, WARM, _instructions, _uwf_cycles, under_callgrind

from tests.pgkit import Server, pg_bin  # the tests' throw-away server

# name: (what it takes out or doubles, [(pattern, replacement), ...]); each pattern must
# match the lease's or the complete's text (re.S; the replacement as re.sub's).
ABLATIONS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "streams": ("the stream index's row (uwf_streams), each call", [
        (r"\),\n      indexed AS \(INSERT INTO uwf_streams \(subject, seq\) VALUES "
         r"\('queue/' \|\| \w+, s\)\)", ")")]),
    "counts": ("the kept counts' UPDATE (the checkpoint's move kept), each call", [
        (r"UPDATE uwf_counts SET counts = jsonb_strip_nulls\(.*?RETURNING '' INTO STRICT "
         r"done;", "SELECT '' INTO STRICT done;")]),
    "counts-expr": ("the kept counts' jsonb expression (`SET counts = counts`)", [
        (r"SET counts = jsonb_strip_nulls\(.*?\)\)\n     WHERE view = 'queue' RETURNING",
         "SET counts = counts\n     WHERE view = 'queue' RETURNING")]),
    "policy": ("the lease's read of the policy kept parsed (its row joined)", [
        (r"SELECT v.e_policy, v.key IS NOT NULL AND v.e_policy IS NULL,",
         "SELECT '{\"maxConcurrent\": 64}'::jsonb, false,"),
        (r"\n    LEFT JOIN uwf_v_sched v ON v.key = 'policy';", ";")]),
    "pools": ("the lease's pools found (the last label of the ready pools' index)", [
        (r"FROM \(SELECT max\(q.c_ready_pool\) AS hi FROM uwf_v_queue q\s+WHERE "
         r"q.c_ready_pool IS NOT NULL AND p_session IS NULL\) m",
         "FROM (SELECT ''::text AS hi) m")]),
    "active": ("the lease's count of its pool's live leases (a statement)", [
        (r"SELECT count\(\*\) INTO active FROM uwf_v_queue q WHERE q.c_status = 'leased'"
         r"\s+AND q.c_session[^;]*;", "active := 0;")]),
    "head-ts": ("the head's instant read from its line", [
        (r"head_ts := split_part\([^\n]*\n", "head_ts := p_ts;\n")]),
    "notify": ("the NOTIFY", [
        (r"'ok' \|\| pg_notify\('uwf_events', s::text\)::text", "'ok'")]),
    "fields-x2": ("the entry's attempts found in its JSON (2 positions), doubled", [
        (r"at := ARRAY\[position[^;]*;", r"\g<0> \g<0>")]),
    "expr+10": ("ten trivial plpgsql expressions added to the complete", [
        (r"  s := h.seq \+ 1;\n", "  s := h.seq + 1;\n" + "  s := s + 0;\n" * 10)]),
}

AGAIN = "base-again"
BASES = ("base", AGAIN)


def _rewritten(make: Callable[[], Any], changes: list[tuple[str, str]],
               hits: list[int]) -> Callable[[], Any]:
    @functools.cache
    def made() -> Any:
        from uwf.engine.pglog import Procedure

        procedure = make()
        create = procedure.create
        for index, (pattern, replacement) in enumerate(changes):
            create, count = re.subn(pattern, replacement, create, flags=re.S)
            hits[index] += count
        return Procedure(procedure.base, procedure.params, create)
    return made


@contextmanager
def variant(name: str) -> Iterator[None]:
    """uwf/queue/pgcalls.py's procedures rewritten as ABLATIONS[name] says, here."""
    from uwf.queue import pgcalls

    if name in BASES:
        yield
        return
    changes = ABLATIONS[name][1]
    kept = pgcalls.lease_procedure, pgcalls.complete_procedure
    hits = [0] * len(changes)
    pgcalls.lease_procedure = _rewritten(kept[0], changes, hits)  # type: ignore[assignment]
    pgcalls.complete_procedure = _rewritten(kept[1], changes, hits)  # type: ignore[assignment]
    try:
        pgcalls.lease_procedure()
        pgcalls.complete_procedure()
        missing = [changes[index][0] for index, count in enumerate(hits) if not count]
        if missing:
            raise SystemExit(f"{name}: no match in the procedures for {missing}")
        yield
    finally:
        pgcalls.lease_procedure, pgcalls.complete_procedure = kept


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--only", help="the variants, comma-separated (default: all)")
    parser.add_argument("--short", type=int, default=50)
    parser.add_argument("--long", type=int, default=150)
    parser.add_argument("--entries", type=int, default=2000)
    add_common_args(parser)
    args = parser.parse_args(argv)
    # `base` is measured before the variants and again after them (the drift).
    names = ["base", *(args.only.split(",") if args.only else ABLATIONS), AGAIN]
    unknown = [name for name in names if name not in BASES and name not in ABLATIONS]
    if unknown:
        raise SystemExit(f"no such variant: {', '.join(unknown)}; known: "
                         f"{', '.join(ABLATIONS)}")
    for name in names:  # each rewrite matches before anything is started
        with variant(name):
            pass
    work = fresh_dir(args.dir, "pgablate")
    print(f"# the server's instructions a lease+complete cycle, by variant; {code_version()}")
    server = Server(work / "pg", pg_bin(), port=PORT)
    server.start()
    urls = {name: server.create_database() for name in names}
    for url in urls.values():
        fill_pg_store(url, work, args.entries + 2 * (WARM + args.long),
                      env_with(UWF_DURABILITY="fsync"))
    server.stop()
    os.environ.update(UWF_DURABILITY="fsync", UWF_LOCK_TIMEOUT="60")
    pids: dict[tuple[str, int], int] = {}
    with under_callgrind(server, work, *urls.values()) as out:
        for name in names:
            with variant(name):
                for count in (args.short, args.long):
                    pids[(name, count)] = _uwf_cycles(urls[name], count)
    spent = {name: (_instructions(out, pids[(name, args.long)])
                    - _instructions(out, pids[(name, args.short)])) / (args.long - args.short)
             for name in names}
    for name in names:
        what = "the procedures as made" if name in BASES else ABLATIONS[name][0]
        print(f"{name:>12}: {spent[name]:>10,.0f} instructions a cycle "
              f"({spent[name] - spent['base']:>+9,.0f})  {what}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
