"""A store value that names a PostgreSQL database, and how it may be printed.

Cheap to import (every command reads its store value; `uwf.engine.pgdb`, which holds
the connections, loads logging and, when a database opens, psycopg).
"""

from __future__ import annotations

URL_SCHEMES = ("postgresql", "postgres")


def is_database_url(value: str) -> bool:
    """Whether a store value names a PostgreSQL database, not a folder."""
    return value.split("://", 1)[0] in URL_SCHEMES and "://" in value


def shown(url: str) -> str:
    """`url` as it may be printed: no password, and the host and database kept."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://?"
    user = f"{parts.username}@" if parts.username else ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    query = f"?{parts.query}" if parts.query and "password" not in parts.query else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}{query}"


def where(url: str) -> str:
    """The server and database of `url`, as an error names them."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "the database"
    host = parts.hostname or _query_host(parts.query) or "the local socket"
    database = parts.path.lstrip("/") or "the default database"
    return f"database {database} on {host}"


def _query_host(query: str) -> str | None:
    for item in query.split("&"):
        name, _, value = item.partition("=")
        if name == "host" and value:
            return value
    return None
