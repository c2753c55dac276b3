"""The write function of a one-call command on PostgreSQL (uwf/engine/pgwrite.py, issue 31):
its SQL, generated from the views' specs.

One function checks the head, appends the lines and writes the rows of any views
(`write_function(views)`); one more a view writes that view's rows alone (`only`):
no loop over the views written and no `CASE` trying each view's name in turn
(plpgsql sets up each `WHEN` it tries again in every transaction, ~2,300 of the
server's instructions each), nor the counts' statement for a view that keeps none.
And for the commonest command, one line and one row of one view written (not
removed), a function with nothing but its statements (`single`): no test of how many
lines or rows there are. Each is named by a digest of its text (`Procedure`), made on
first use and prepared once a connection (uwf/engine/pgdb.py's `prepared`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from uwf.engine.pgcounts import TABLE as COUNTS
from uwf.engine.pgcounts import merged
from uwf.engine.viewspec import ViewSpec

if TYPE_CHECKING:
    from uwf.engine.pglog import Procedure
    from uwf.engine.pgviews import PgViewStore

# What the write function does first, in one plpgsql expression: the lock's timeout,
# `synchronous_commit` off when the call is not durable (else the server's: its commit
# waits for the WAL flush), and the log's advisory lock. (Not uwf/engine/pgwrite.py's
# `LOCK`'s generic plans: these statements, an INSERT or UPDATE of given keys, plan in
# a moment, and a setting made costs its set-up and its undoing at the commit.)
ENTER = """
  done := set_config('lock_timeout', p_lock_ms || 'ms', true)
    || CASE WHEN p_durable THEN '' ELSE set_config('synchronous_commit', 'off', true) END
    || pg_advisory_xact_lock({log_lock})::text;
"""
# The shared checkpoint (uwf/engine/pgckpt.py) moved to the new head if it is at the
# head decided on (its seq and the digest of its line, computed when it was appended:
# no sha256 of it again) and the views joined to it are these: every joined view moves
# with it. Else the head moved: nothing is written. (A line appended past it without
# moving it makes the line's INSERT fail on its key, the whole call with it: the
# caller takes that as moved too.)
MOVE = """
  UPDATE uwf_views SET seq = p_seq + {count}, digest = p_last
    WHERE name = '' AND seq = p_seq AND digest = p_digest AND joined = p_joined;
  IF NOT FOUND THEN
    RETURN 'moved';
  END IF;"""
ONE_LINE = """
    WITH appended AS (INSERT INTO uwf_events (seq, line, ends)
      VALUES (p_seq + 1, {line}, {end}))
    INSERT INTO uwf_streams (subject, seq) VALUES ({subject}, p_seq + 1);"""
LINES = """
    WITH appended AS (INSERT INTO uwf_events (seq, line, ends)
      SELECT p_seq + x.o, x.line, x.ends FROM unnest(p_lines, p_ends) WITH ORDINALITY
        AS x(line, ends, o))
    INSERT INTO uwf_streams (subject, seq)
    SELECT x.subject, p_seq + x.o FROM unnest(p_subjects) WITH ORDINALITY AS x(subject, o);"""
COUNTED = f"""
  IF cardinality(p_counts) > 0 THEN
    INSERT INTO {COUNTS} (view, counts)
    SELECT u.v, jsonb_object_agg(u.k, u.n) FROM unnest(p_count_views, p_count_keys, p_counts)
      AS u(v, k, n) GROUP BY u.v
    ON CONFLICT (view) DO UPDATE SET counts = {merged(COUNTS + ".counts", "excluded.counts")};
  END IF;"""
PARAMS = ("boolean", "int", "bigint", "text", "text", "bytea[]", "bigint[]", "text[]",
          "text", "text[]", "text[]", "bytea[]", "text[]", "bigint[]", "text[]", "text[]",
          "text[]", "bigint[]", "text[]")
# A single line's and row's function takes them as values, not arrays of one: none
# received as an array (`array_recv`) or taken out of one.
SINGLE_PARAMS = ("boolean", "int", "bigint", "text", "text", "bytea", "bigint", "text",
                 "text", "text", "bytea", "text[]", "text", "text[]", "text[]", "bigint[]")


def write_function(views: PgViewStore, only: str | None = None, *,
                   single: bool = False) -> Procedure:
    """The write function for commands writing rows of the view `only` and no other
    (None: of any views); `single`: one line and one row of `only`, not removed."""
    from uwf.engine.pgoverlay import resets

    return _function(tuple(views.specs.values()),
                     tuple(resets(views.overlays.get(name)) for name in views.specs),
                     only, single and only is not None)


def _one_row(spec: ViewSpec, reset: str, *, single: bool = False) -> str:
    """The statement writing one row of `spec`'s view, its values given (`VALUES`): the
    first of the arrays', or (`single`) the values'."""
    from uwf.engine.pgquery import table

    cast = ["::bigint" if kind == "int" else "" for kind in spec.types]
    columns = "".join(f', "c_{column}"' for column in spec.columns)
    values = "".join(f", p_cols[{index + 1}]{cast[index]}" for index in range(len(cast)))
    key, value, text = ("p_key", "p_value", "p_text") if single else (
        "p_keys[1]", "p_values[1]", "p_texts[1]")
    return f"""
        INSERT INTO {table(spec.name)} (key, value{columns}, text)
        VALUES ({key}, {value}{values}, {text}) {_upsert(spec, reset)};"""


def _upsert(spec: ViewSpec, reset: str) -> str:
    """The update of a row there already: its value, text and columns, and its overlay
    emptied (`reset`: uwf/engine/pgoverlay.py; the value written is the whole row)."""
    updates = "".join(f', "c_{c}" = excluded."c_{c}"' for c in spec.columns)
    return f"ON CONFLICT (key) DO UPDATE SET value = excluded.value, text = excluded.text" \
           f"{updates}{reset}"


def _rows(spec: ViewSpec, reset: str) -> str:
    """The statements writing the rows of `spec`'s view given (one by `VALUES`)."""
    from uwf.engine.pgquery import table

    name = spec.name.replace("'", "''")
    cast = ["::bigint" if kind == "int" else "" for kind in spec.types]
    columns = "".join(f', "c_{column}"' for column in spec.columns)
    picked = "".join(f", p_cols[u.at + {index + 1}]{cast[index]}" for index in range(len(cast)))
    return f"""
      IF one THEN{_one_row(spec, reset)}
      ELSE
        IF array_position(p_values, NULL) IS NOT NULL THEN  -- a row removed: rare
          DELETE FROM {table(spec.name)} t USING unnest(p_views, p_keys, p_values) AS
            u(v, k, val) WHERE u.v = '{name}' AND u.val IS NULL AND t.key = u.k;
        END IF;
        INSERT INTO {table(spec.name)} (key, value{columns}, text)
        SELECT u.k, u.val{picked}, u.t FROM unnest(p_views, p_keys, p_values, p_at,
          p_texts) AS u(v, k, val, at, t) WHERE u.v = '{name}' AND u.val IS NOT NULL
        {_upsert(spec, reset)};
      END IF;"""


@functools.cache
def _function(specs: tuple[ViewSpec, ...], resets: tuple[str, ...], only: str | None,
              single: bool) -> Procedure:
    """`resets`: each view's overlay emptied by an upsert (uwf/engine/pgoverlay.py)."""
    from uwf.engine.pglog import CHANNEL, LOG_LOCK, Procedure

    by_name = {spec.name: spec for spec in specs}
    reset = {spec.name: text for spec, text in zip(specs, resets, strict=True)}
    counted = any(spec.counted for spec in specs if only in (None, spec.name))
    if single:
        body = (MOVE.format(count=1) + ONE_LINE.format(line="p_line", end="p_end",
                                                       subject="p_subject")
                + _one_row(by_name[str(only)], reset[str(only)], single=True))
        head = "p_seq + 1"
    else:
        if only is not None:
            written = _rows(by_name[only], reset[only])
        else:  # the views written, each once (`p_written`): an array's loop, not a cursor
            cases = "".join("\n    WHEN '" + name.replace("'", "''") + "' THEN"
                            + _rows(spec, reset[name]) for name, spec in by_name.items())
            written = f"""
  FOREACH view_name IN ARRAY p_written LOOP
    CASE view_name{cases}
    END CASE;
  END LOOP;"""
        body = f"""{MOVE.format(count="cardinality(p_lines)")}
  IF cardinality(p_lines) = 1 THEN{ONE_LINE.format(
      line="p_lines[1]", end="p_ends[1]", subject="p_subjects[1]")}
  ELSE{LINES}
  END IF;
  one := cardinality(p_keys) = 1 AND p_values[1] IS NOT NULL;{written}"""
        head = "p_seq + cardinality(p_lines)"
    params = """p_line bytea, p_end bigint, p_subject text, p_last text, p_key text,
  p_value bytea, p_cols text[], p_text text,""" if single else """p_lines bytea[],
  p_ends bigint[], p_subjects text[], p_last text, p_views text[], p_keys text[],
  p_values bytea[], p_cols text[], p_at bigint[], p_texts text[],"""
    create = f"""
CREATE OR REPLACE FUNCTION {{name}}(
  p_durable boolean, p_lock_ms int, p_seq bigint, p_digest text, p_joined text,
  {params} p_count_views text[], p_count_keys text[], p_counts bigint[]{
      "" if single else ", p_written text[]"})
RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
  done text; view_name text; one boolean;
BEGIN
{ENTER.format(log_lock=LOG_LOCK)}{body}{COUNTED if counted else ""}
  RETURN 'ok' || pg_notify('{CHANNEL}', ({head})::text)::text;
END $fn$"""
    return Procedure("uwf_write", SINGLE_PARAMS if single else PARAMS, create,
                     function=True, conflict=True)
