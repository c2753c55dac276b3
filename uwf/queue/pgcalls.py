"""A lease and a complete on PostgreSQL in one round trip each (SPEC §11, issue 31).

On a store in PostgreSQL, `sched lease --limit N` and `sched complete` are one `CALL`
of a procedure that, under the log's advisory lock, reads the chain's head, checks that
every view is folded to it, decides as `uwf.queue.sched` does, appends the lines (their
`prev` computed in the server), folds them into the `queue` view, its kept counts, the
stream index and the checkpoints, NOTIFYs, and commits with `synchronous_commit` off
(the lock goes at that commit); then it commits a small synchronous transaction, so the
call returns only once a WAL flush covers the first commit, and the flushes of
concurrent callers group.

Written once: what the server writes is generated here from the Python definitions,
the envelope's and the events' fields (an event's data concatenated as msgspec writes
it) and the `queue` view's state (`QueueEntry`: its stored JSON edited in place, the
fields a lease or a complete changes replaced, found by their bytes: `pgjson.Splice`),
the statuses the transition table
(`uwf.queue.rules.TRANSITIONS`) lets a lease or a complete follow and the status it
leads to, the policy's defaults. The selection (pools, ceilings, backoff, queue order)
is `sched._choose`'s, restated in SQL; tests/contract/test_pgcalls.py holds the two to the same
answers, and `registry verify` (the views against a replay in Python) and `log verify`
to the same bytes.

What a call costs the server is mostly set-up: each statement's executor tree is set
up on every execution and each plpgsql expression once a transaction (every call is
one or two), so the procedures hold few statements and few expressions, and none
that a cheaper one answers (docs/benchmarks.md, "where the server's CPU goes").

A complete's line is msgspec's, built here but for its seq and its `prev`, which the
server puts in (`_middle`): the server builds it only when the command happens at the
log's later instant.

Only the command's success is decided in the server. Anything else (nothing to
lease, a wrong or expired lease, views behind the log, an empty log, a session label
json.dumps would escape, secrets to redact)
answers "not here", and the command runs the ordinary way (`journal.write_at`), which
words the refusal: each refusal is still written once, in Python.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import msgspec

from uwf.engine.clock import format_ts
from uwf.engine.events import Envelope, encode_line
from uwf.engine.pgckpt import AT_SHARED, joined
from uwf.engine.pgcounts import TABLE as COUNTS
from uwf.engine.pgwrite import CAN_FLUSH, FINISH, LOCK, OneCall
from uwf.engine.ulids import new_ulids
from uwf.queue.events import QueueCompleted, QueueLeased
from uwf.queue.pgentry import CHANGED, entry, overlay, policy
from uwf.queue.pgjson import Splice, json_text, renamed_first, struct_fields
from uwf.queue.pgmoves import complete_counts, count_key, lease_counts, quote
from uwf.queue.projection import Lease, QueueEntry
from uwf.queue.results import EntryRecord, Granted, Leased
from uwf.queue.rules import TERMINAL, TRANSITIONS, Policy, follows

if TYPE_CHECKING:
    from uwf.engine.journal import Journal
    from uwf.engine.pglog import PgLog, Procedure
    from uwf.store import Store

# A lease of more entries than this goes the ordinary way (its ids are minted first).
MOST = 64


# -- names and statuses ---------------------------------------------------------------

def _names(kind: type[msgspec.Struct]) -> dict[str, str]:
    """Each field's name in the JSON, by its attribute name."""
    return {field.name: field.encode_name for field in struct_fields(kind)}


# -- what the server runs, generated -------------------------------------------------------

def _to(status: str, kind: str) -> str:
    target = follows(status).get(kind)
    assert target is not None, (status, kind)
    return target


def _from(kind: str) -> list[str]:
    """The statuses the transition table lets `kind` follow."""
    return [status for status in TRANSITIONS if status is not None and kind in
            TRANSITIONS[status]]


def _sql_list(values: list[str]) -> str:
    return "ARRAY[" + ", ".join(quote(value) for value in values) + "]::text[]"


_PARAMS_HEAD = ("boolean", "int", "bigint", "text", "text")
# What every command's procedure does first: the lock, the head, the instant, the views'
# check. Sets `h` (the head row: seq, line, ends, its digest, whether the views are at
# it) and `flush`. The instant is the caller's clock, read just before the call,
# or the log's last instant when another writer logged a later one meanwhile: a command
# is judged at an instant no earlier than any before it (SPEC §8: at the log's clock,
# the ceiling holds). Every call that needs no result is an assignment to `done`, not a
# PERFORM: plpgsql evaluates an assignment's expression itself, where a PERFORM is a
# statement run by the executor (set up, run and ended on every call).
_ENTER = """{lock}
  -- The head, and the views at it (every one joined to the shared checkpoint, and that
  -- at the head: uwf/engine/pgckpt.py): the digest of the head's line is the one the
  -- checkpoint holds (computed, in the server or in Python, when that line was
  -- appended), not computed again (a sha256 in the server costs an OpenSSL fetch).
  SELECT e.seq, e.line, e.ends, c.ok, c.seq AS at, c.digest INTO h
    FROM (SELECT * FROM uwf_events ORDER BY seq DESC LIMIT 1) e, {at_shared} c;
  -- Every view joined at the head: the queue's and the policy's tables among them
  -- (`_server` calls only with both named; a joined view's table is made when it is
  -- first folded), so no statement here looks them up in the catalog. (No head: an
  -- empty log, the ordinary way's too.)
  IF NOT FOUND OR NOT h.ok OR h.at IS DISTINCT FROM h.seq THEN
    o_status := 'stale'; RETURN;
  END IF;
  -- The head's instant: the envelope's third field (after its seq and its id, a string,
  -- where no unescaped quote can be), read without parsing the whole line.
  head_ts := split_part(split_part(convert_from(h.line, 'UTF8'), ',"ts":"', 2), '"', 1);
  IF p_ts < head_ts OR head_ts = '' OR strpos(head_ts, '\\') > 0 THEN
    IF head_ts = '' OR strpos(head_ts, '\\') > 0 THEN  -- an escape: parsed after all
      head_ts := convert_from(h.line, 'UTF8')::jsonb ->> 'ts';
    END IF;
    IF p_ts < head_ts THEN  -- another writer logged a later instant: this happens then
      p_ts := head_ts;
      p_now := (extract(epoch FROM head_ts::timestamptz) * 1000)::bigint;
      o_now := p_now;{moved}
    END IF;
  END IF;
"""


def enter(log_lock: int, moved: str = "") -> str:
    """`_ENTER`; `moved`: what else a command does when it happens at the log's
    later instant."""
    return _ENTER.format(lock=LOCK.format(log_lock=log_lock, can_flush=CAN_FLUSH),
                         at_shared=AT_SHARED, moved=moved)


def _line(kind: str, key: str, k: str = "k", n: str = "n", *, prev: str = "prev",
          ends: str = "ends") -> str:
    """SQL building an event line (`s`, `ids[k]`, `p_ts`, the subject of the entry
    `key`, the `k`-th of `n`, `data_json`, the digest `prev`) in the envelope's field
    order, and the offset past it (`ends`, from the offset `ends` before it). Each
    value used where it is, not kept in a variable first: every plpgsql assignment is
    an expression set up again on every call."""
    return f"""
    line := convert_to('{{"seq":' || s || ',"id":' || to_json(p_ids[{k}])::text || ',"ts":'
      || to_json(p_ts)::text || ',"type":"{kind}","subject":' || to_json({_subject(key)})::text
      || ',"batch":[' || {k} || ',' || {n} || '],"data":' || data_json || ',"prev":"' || {prev}
      || '"}}', 'UTF8');
    ends := {ends} + octet_length(line) + 1;"""


def _subject(key: str) -> str:
    """SQL: the subject of the queue entry `key` (SQL)."""
    return f"'queue/' || {key}"


def _write(key: str, status: str, lease_expires: str, overlay: str, returning: str = "", *,
           several: bool) -> str:
    """SQL appending the line (`line`, `s`, `ends`) with its stream entry, and writing
    the entry `key`'s (SQL) new state to its row: the declared columns as
    `QueueProjection.column_values` does for the status `status` (a live entry's key
    stays its live key; never ready: no pool; no backoff; the lease's expiry
    `lease_expires`) and the overlay's columns (`overlay`, assignments: uwf/queue/
    pgentry.py), its `value` left as it is; one statement. Then `prev` moves past the
    line, and with `several` (a command writing more than one entry) the old status and
    pool are kept for the counts' moves. The pool stays NULL, as declared: no command
    here makes an entry ready."""
    live_statuses = [status for status in TRANSITIONS if status is not None
                     and status not in TERMINAL]
    return f"""
    WITH appended AS (INSERT INTO uwf_events (seq, line, ends) VALUES (s, line, ends)),
      indexed AS (INSERT INTO uwf_streams (subject, seq) VALUES ({_subject(key)}, s))
    UPDATE uwf_v_queue SET c_status = {quote(status)},
      c_live_key = {"c_live_key" if status in live_statuses else "NULL"},
      c_lease_expires = {lease_expires}, c_eligible_at = NULL, c_ready_pool = NULL,
      e_at = p_ts, e_events = coalesce(e_events, 0) + 1, {overlay}
     WHERE key = {key}{returning};
    prev := left(encode(sha256(line), 'hex'), 32);""" + ("""
    IF n > 1 THEN
      old_statuses := old_statuses || old_status; old_pools := old_pools || old_pool;
    END IF;""" if several else "")


def _changes(kind: str, changed: tuple[str, ...]) -> None:
    """What a `kind` command changes of a QueueEntry, checked against what the overlay
    holds (uwf/queue/pgentry.py) and what `evolve` changes (the status it leads to is
    not ready, so no pool; it follows only live statuses)."""
    moved = follows(_from(kind)[0]).get(kind)
    assert moved is not None
    assert moved != "ready"
    assert all(status not in TERMINAL for status in _from(kind)), kind
    assert set(changed) <= set(CHANGED), changed


# The variables every command's procedure declares.
_DECLARE = """
  h record; head_ts text; flush boolean; done text; s bigint;
  ends bigint; prev text; line bytea; subject text; data_json text; raw bytea;
  entry_key text; old_status text; old_pool text; at int[];
  old_statuses text[]; old_pools text[];"""


@functools.cache
def lease_procedure() -> Procedure:
    """`sched lease --limit N [--session S]`, decided in the server."""
    from uwf.engine.pglog import CHANNEL, LOG_LOCK, Procedure

    policy = _names(Policy)
    defaults = Policy()
    leased_status = _to("ready", "leased")
    pool_key = count_key("ready_pool", '"')  # a pool's count's key up to its label
    data = json_text(QueueLeased, {"lease_id": "p_lease_ids[k]", "expires_at_ms": "o_expires",
                                   "attempt": "o_attempts[k]", "session": "p_session"})
    lease_json = renamed_first(data, json_text(Lease, {
        "id": "p_lease_ids[k]", "expires_at_ms": "o_expires", "attempt": "o_attempts[k]",
        "session": "p_session"}), "data_json")
    _changes("leased", ("updated_at", "status", "lease", "next_eligible_at_ms", "events"))
    # The entry's attempts, read from its JSON (no command here changes them).
    edit = Splice(QueueEntry, "raw", "at", changed=(), read=("attempts",))
    # A pool (`label`): refused when its label as read is not what it stands for (an
    # escape); its ceiling; its live leases, a range of the (status, lease_expires) index.
    # The default pool is '' (no session: `sched`'s DEFAULT_POOL), a session's label never
    # empty (`lease` sends a session of "" the ordinary way).
    pool = f"""    IF label ~ '[^ -~]' OR (p_session IS NULL AND strpos(label, chr(92)) > 0) THEN
      o_status := 'label'; RETURN;
    END IF;
    ceiling := coalesce(CASE WHEN label <> ''
        THEN (pol -> '{policy['sessions']}' ->> label)::int END,
      (pol ->> '{policy['max_concurrent']}')::int, {defaults.max_concurrent});
    SELECT count(*) INTO active FROM uwf_v_queue q WHERE q.c_status = 'leased'
       AND q.c_session IS NOT DISTINCT FROM nullif(label, '') AND q.c_lease_expires > p_now;"""
    create = f"""
CREATE OR REPLACE PROCEDURE {{name}}(
  p_durable boolean, p_lock_ms int, p_now bigint, p_ts text, p_joined text,
  p_session text, p_limit int, p_lease_ids text[], p_ids text[],
  INOUT o_status text DEFAULT NULL, INOUT o_now bigint DEFAULT NULL,
  INOUT o_keys text[] DEFAULT NULL, INOUT o_expires bigint DEFAULT NULL,
  INOUT o_attempts int[] DEFAULT NULL)
LANGUAGE plpgsql AS $proc$
DECLARE{_DECLARE}
  k int; n int; pol jsonb; unparsed boolean; total int; label text; ceiling int;
  active int; r record; pools text[];
  keys text[]; prios bigint[]; enqs text[];
BEGIN
{enter(LOG_LOCK)}
  -- The policy (kept parsed in its row's overlay: uwf/queue/pgentry.py) and the pools
  -- in one statement (each statement is set up on every call). The pools with ready
  -- entries: the last label of the ready pools' index (one lookup, at its end: its
  -- start holds the entries leased since the last vacuum); '' there, the default
  -- pool's, is the least label, so the only one. Else every pool is listed from the
  -- kept counts below.
  SELECT v.e_policy, v.key IS NOT NULL AND v.e_policy IS NULL,
         CASE WHEN p_session IS NOT NULL THEN ARRAY[p_session]
              WHEN m.hi IS NULL THEN '{{}}'::text[] WHEN m.hi = '' THEN ARRAY[''] END
    INTO pol, unparsed, pools
    FROM (SELECT max(q.c_ready_pool) AS hi FROM uwf_v_queue q
           WHERE q.c_ready_pool IS NOT NULL AND p_session IS NULL) m
    LEFT JOIN uwf_v_sched v ON v.key = 'policy';
  IF pools IS NULL THEN  -- a pool of a session, or several ('' first, then by label)
    -- A pool's label as stored (json.dumps): one with an escape (a quote, a
    -- backslash, anything past ASCII) keeps its backslash here and is refused
    -- below, so no JSON is parsed.
    pools := ARRAY(SELECT x.label FROM (SELECT substr(c.key, {len(pool_key) + 1},
                 length(c.key) - {len(pool_key) + 1}) AS label
               FROM {COUNTS} t, jsonb_each_text(t.counts) c WHERE t.view = 'queue'
                 AND starts_with(c.key, {quote(pool_key)}) AND c.value::bigint > 0) x
             ORDER BY x.label <> '', x.label COLLATE "C");
  END IF;
  IF unparsed THEN  -- written since it was last parsed: parsed once, kept
    UPDATE uwf_v_sched v SET e_policy = convert_from(v.value, 'UTF8')::jsonb -> 'policy'
     WHERE v.key = 'policy' RETURNING v.e_policy INTO pol;
  END IF;
  IF pol ->> '{policy['max_total']}' IS NOT NULL THEN
    SELECT count(*) INTO total FROM uwf_v_queue q
     WHERE q.c_status = 'leased' AND q.c_lease_expires > p_now;
    p_limit := least(p_limit, (pol ->> '{policy['max_total']}')::int - total);
    IF p_limit <= 0 THEN o_status := 'none'; RETURN; END IF;
  END IF;
  -- A pool's ready entries out of backoff: a range of the (ready_pool, priority,
  -- enqueued_at, key) index, in its order (NULLS FIRST).
  IF cardinality(pools) = 1 THEN  -- one pool: that order is the answer's, no sort
    label := pools[1];
{pool}
    o_keys := ARRAY(SELECT q.key FROM uwf_v_queue q WHERE q.c_ready_pool = label
       AND (q.c_eligible_at IS NULL OR q.c_eligible_at <= p_now)
     ORDER BY q.c_priority NULLS FIRST, q.c_enqueued_at NULLS FIRST,
           q.key NULLS FIRST LIMIT greatest(least(ceiling - active, p_limit), 0));
  ELSE  -- none, or several: their entries sorted together after
    FOREACH label IN ARRAY pools LOOP
{pool}
      CONTINUE WHEN ceiling - active <= 0;
      FOR r IN SELECT q.key, q.c_priority, q.c_enqueued_at FROM uwf_v_queue q
         WHERE q.c_ready_pool = label
           AND (q.c_eligible_at IS NULL OR q.c_eligible_at <= p_now)
         ORDER BY q.c_priority NULLS FIRST, q.c_enqueued_at NULLS FIRST,
               q.key NULLS FIRST LIMIT least(ceiling - active, p_limit)
      LOOP
        keys := keys || r.key; prios := prios || r.c_priority;
        enqs := enqs || r.c_enqueued_at;
      END LOOP;
    END LOOP;
    SELECT coalesce(array_agg(x.key ORDER BY x.prio, x.enq COLLATE "C", x.key COLLATE "C"),
                    '{{}}')
      INTO o_keys FROM (SELECT * FROM unnest(keys, prios, enqs) AS u(key, prio, enq)
                        ORDER BY prio, enq COLLATE "C", key COLLATE "C" LIMIT p_limit) x;
  END IF;
  n := cardinality(o_keys);
  IF n = 0 THEN o_status := 'none'; RETURN; END IF;
  s := h.seq; ends := h.ends; prev := h.digest;
  o_expires := p_now + coalesce((pol ->> '{policy['lease_ttl_ms']}')::bigint,
                                {defaults.lease_ttl_ms});
  FOR k IN 1 .. n LOOP
    entry_key := o_keys[k];
    SELECT q.value, q.c_status, q.c_ready_pool INTO raw, old_status, old_pool
      FROM uwf_v_queue q WHERE q.key = entry_key;
    IF old_status <> ALL({_sql_list(_from("leased"))}) THEN
      RAISE EXCEPTION 'queue entry % is %, not ready', entry_key, old_status;
    END IF;
    at := {edit.positions()};
    IF 0 = ANY(at) THEN  -- a hand edit: the ordinary way reads any JSON
      IF k = 1 THEN o_status := 'stale'; RETURN; END IF;
      RAISE EXCEPTION 'queue entry %''s row is not the JSON uwf writes', entry_key;
    END IF;
    o_attempts := o_attempts || ({edit.read("attempts")}::int + 1);
    data_json := {data};
    s := s + 1;
{_line(QueueLeased.type, "entry_key")}
{_write("entry_key", leased_status, "o_expires", f"e_lease = {lease_json}", several=True)}
  END LOOP;
{lease_counts(_from("leased"), _to("ready", "leased"))}
{FINISH.format(channel=quote(CHANNEL))}
END $proc$"""
    return Procedure("uwf_lease", (*_PARAMS_HEAD, "text", "int", "text[]", "text[]"), create)


@functools.cache
def complete_procedure() -> Procedure:
    """`sched complete ID --lease L`, decided in the server."""
    from uwf.engine.pglog import CHANNEL, LOG_LOCK, Procedure

    held = _names(Lease)
    drained = _to("leased", "completed")
    data = json_text(QueueCompleted, {"lease_id": "p_lease_id", "run": "p_run"})
    _changes("completed", ("updated_at", "status", "run", "lease", "next_eligible_at_ms",
                           "events"))
    # A lease granted the ordinary way is in the entry's JSON (its overlay empty).
    edit = Splice(QueueEntry, "raw", "at", changed=(), read=("lease",))
    held_by = "starts_with(held, '{\"" + held["id"] + "\":' || to_json(p_lease_id)::text || ',')"
    create = f"""
CREATE OR REPLACE PROCEDURE {{name}}(
  p_durable boolean, p_lock_ms int, p_now bigint, p_ts text, p_joined text,
  p_key text, p_lease_id text, p_run text, p_ids text[], p_middle bytea,
  INOUT o_status text DEFAULT NULL, INOUT o_now bigint DEFAULT NULL,
  INOUT o_value bytea DEFAULT NULL, INOUT o_run text DEFAULT NULL,
  INOUT o_events int DEFAULT NULL)
LANGUAGE plpgsql AS $proc$
DECLARE{_DECLARE}
  expires bigint; held text; whole boolean;
BEGIN
{enter(LOG_LOCK, " p_middle := NULL;")}
  SELECT q.c_status, q.c_lease_expires, q.e_lease, q.e_at IS NULL
    INTO old_status, expires, held, whole FROM uwf_v_queue q WHERE q.key = p_key;
  IF held IS NULL AND whole THEN  -- leased the ordinary way: the lease in its JSON
    SELECT q.value INTO raw FROM uwf_v_queue q WHERE q.key = p_key;
    at := {edit.positions()};
    IF 0 <> ALL(at) THEN held := {edit.read("lease")}; END IF;
  END IF;
  -- The entry leased; the lease's id as msgspec wrote it (an id it escapes otherwise is
  -- refused here, and the ordinary way judges it); its expiry is the row's column.
  IF NOT FOUND OR old_status <> ALL({_sql_list(_from("completed"))}) OR held IS NULL
     OR expires IS NULL OR expires <= p_now OR NOT {held_by} THEN
    o_status := 'refused'; RETURN;
  END IF;
  s := h.seq + 1;
  IF p_middle IS NULL THEN  -- at the log's later instant: the line built here
    data_json := {data};
{_line(QueueCompleted.type, "p_key", "1", "1", prev="h.digest", ends="h.ends")}
  ELSE  -- the line as the caller built it (`_middle`), its seq and prev put in
    line := convert_to('{{"seq":' || s, 'UTF8') || p_middle
      || convert_to('"' || h.digest || '"}}', 'UTF8');
    ends := h.ends + octet_length(line) + 1;
  END IF;
{_write("p_key", drained, "NULL", "e_lease = NULL, e_run = coalesce(to_json(p_run)::text, e_run)",
        " RETURNING value, e_run, e_events INTO o_value, o_run, o_events", several=False)}
{complete_counts(_from("completed"), _to("leased", "completed"))}
{FINISH.format(channel=quote(CHANNEL))}
END $proc$"""
    return Procedure("uwf_complete", (*_PARAMS_HEAD, "text", "text", "text", "text[]",
                                       "bytea"), create)


# -- calling them ------------------------------------------------------------------------

def _server(journal: Journal) -> tuple[PgLog, dict[str, str]] | None:
    """The log and the views' signatures when the store is on a server whose views can
    be folded there (no secrets to redact: that is Python's)."""
    from uwf.engine.pglog import PgLog

    log = journal.log
    if not isinstance(log, PgLog) or journal.redact is not None:
        return None
    from uwf.engine.pgviews import PgViewStore  # psycopg is there: the log is on a server

    views = journal.views
    if not isinstance(views, PgViewStore):
        return None
    signatures = views.signatures()
    if (views.overlays.get("queue") != overlay() or views.overlays.get("sched") != policy()
            or not {"queue", "sched"} <= signatures.keys()):
        return None  # the queue's row not as the procedures write it
    return log, signatures


def _moved(journal: Journal) -> None:
    """The head this call moved is not the one a one-call write kept (uwf/engine/pgwrite.py):
    it looks again rather than try a call bound to fail first."""
    first = journal.first
    if isinstance(first, OneCall):
        first.forget()


def _head_args(log: PgLog, now: int, signatures: dict[str, str]) -> list[Any]:
    lock_ms = max(round(log.db.lock_timeout * 1000), 1)
    return [log.durable, lock_ms, now, format_ts(now), joined(signatures)]


_OPEN, _CLOSE = b'{"seq":0', b'""}'


def _middle(envelope: Envelope) -> bytes:
    """The line msgspec writes for `envelope` (seq 0, prev empty) between its seq and
    its prev's value: the server puts those in (`,"prev":` is the middle's end)."""
    raw = encode_line(envelope)
    assert raw.startswith(_OPEN), raw
    assert raw.endswith(_CLOSE), raw
    return raw[len(_OPEN):-len(_CLOSE)]


def lease(store: Store, limit: int | None, session: str | None) -> Leased | None:
    """`sched.lease` in one round trip; None: run it the ordinary way."""
    server = _server(store.journal)
    if server is None or limit is None or not 1 <= limit <= MOST or session == "":
        return None
    log, signatures = server
    now = store.clock()
    lease_ids = new_ulids(now, limit)  # the k-th lease granted takes the k-th
    got = log.call(lease_procedure(), [*_head_args(log, now, signatures), session, limit,
                                       lease_ids, new_ulids(now, limit)])
    if got is None or got[0] != "ok":
        return None
    _moved(store.journal)
    _status, moved_to, keys, expires, attempts = got
    now = now if moved_to is None else moved_to  # the log's later instant, if so
    return Leased(now=format_ts(now), granted=len(keys), leases=[
        Granted(id=key, lease_id=lease_id, lease_expires_at=format_ts(expires),
                attempt=attempt)
        for key, lease_id, attempt in zip(keys, lease_ids[:len(keys)], attempts, strict=True)])


def complete(store: Store, entry_id: str, lease_id: str, run: str | None
             ) -> EntryRecord | None:
    """`sched.complete` in one round trip; None: run it the ordinary way."""
    from uwf.queue.service import record

    server = _server(store.journal)
    if server is None:
        return None
    log, signatures = server
    now = store.clock()
    ids = new_ulids(now, 1)
    middle = _middle(Envelope(
        seq=0, id=ids[0], ts=format_ts(now), type=QueueCompleted.type,
        subject=f"queue/{entry_id}", batch=(1, 1),
        data=QueueCompleted(lease_id=lease_id, run=run), prev=""))
    got = log.call(complete_procedure(), [*_head_args(log, now, signatures), entry_id,
                                          lease_id, run, ids, middle])
    if got is None or got[0] != "ok":
        return None
    _moved(store.journal)
    _status, moved_to, value, run_json, events = got
    return record(entry(bytes(value), ts=format_ts(now if moved_to is None else moved_to),
                        status=_to("leased", "completed"), lease=None, run_json=run_json,
                        events=events))
