"""The checks of servers: a PostgreSQL database reached and answering, an MQTT broker
reached and accepting a connection. A URL's password is never printed."""

from __future__ import annotations

import math
from collections.abc import Mapping

from uwf.doctor.machine import installed
from uwf.doctor.results import Check, fail, ok
from uwf.engine.dburl import is_database_url, shown
from uwf.errors import UsageError, UwfError


def check_database_url(url: str) -> None:
    """A --database that is no PostgreSQL URL is a usage error (nothing is reached)."""
    if not is_database_url(url):
        raise UsageError(f"argument --database: {shown(url)!r} is not a postgresql:// URL",
                         "give postgresql://USER@HOST[:PORT]/DB")


def postgres(url: str, timeout: float, name: str = "postgres") -> Check:
    """Connect to `url` and ask the server's version; the first line of what failed."""
    where = shown(url)
    if not installed("postgres"):
        return fail(name, f"cannot reach {where}: psycopg is not installed",
                    "pip install 'uwf[postgres]'")
    from urllib.parse import urlsplit

    import psycopg

    try:
        # connect_timeout is whole seconds, at least 2 (libpq's floor).
        with psycopg.connect(url, connect_timeout=max(2, math.ceil(timeout)),
                             autocommit=True) as connection:
            row = connection.execute("SHOW server_version").fetchone()
    except (psycopg.Error, OSError) as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        try:
            password = urlsplit(url).password
        except ValueError:
            password = None
        if password:
            said = said.replace(password, "***")
        return fail(name, f"cannot reach {where}: {said}",
                    "check that the server runs, the database exists and the URL's user "
                    "may log in")
    version = str(row[0]).split()[0] if row else "?"
    return ok(name, f"{where}: PostgreSQL {version}")


def mqtt(url: str, password_env: str | None, environ: Mapping[str, str],
         timeout: float) -> Check:
    """Connect to the broker (as the bridge and the worker do) and let go."""
    from uwf.queue.broker import parse_broker, where

    broker = parse_broker(url, password_env)  # a malformed URL: a usage error
    if not installed("mqtt"):
        return fail("mqtt", f"cannot reach {where(broker)}: paho-mqtt is not installed",
                    "pip install 'uwf[mqtt]'")
    from uwf.queue.broker import Connection

    try:
        with Connection(broker, environ, timeout=timeout):
            pass
    except UsageError:
        raise
    except UwfError as error:
        return fail("mqtt", error.what, error.next_action or "check that the broker runs")
    return ok("mqtt", f"{where(broker)}: connected")
