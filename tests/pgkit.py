"""A throw-away PostgreSQL server for tests: the Debian server binaries (`initdb`,
`pg_ctl`), a cluster in a temp folder, listening only on a Unix socket there.

PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres`
system user and its commands run through `runuser`. `.ci/run` installs the server
packages when they are absent, so under CI=true a missing server fails the test
instead of skipping it. One server serves a whole test session (`pg_server`); each
test gets a database of its own (`pg_url`), or a `PgDatabase` opened on one
(`pg_database`).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from uwf.engine.pgdb import PgDatabase

_NAMES = itertools.count(1)


def pg_bin() -> Path:
    """The folder of the server binaries; skipped locally when absent, a failure under CI."""
    found = shutil.which("pg_ctl")
    if found is not None:
        return Path(found).resolve().parent  # /usr/local/bin/pg_ctl may be a link
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                      key=lambda path: int(path.parts[-3]))
    if versions:
        return versions[-1].parent
    if os.environ.get("CI") == "true":
        pytest.fail("the PostgreSQL server is not installed; .ci/run installs it with apt")
    pytest.skip("the PostgreSQL server is not installed (apt-get install postgresql)")


@dataclass
class Server:
    """A running cluster; `url(db)` is a libpq URL for one of its databases."""

    folder: Path
    bin: Path
    port: int = 5432
    # False (tests): `fsync=off`, `full_page_writes=off`, nothing waits for the disk.
    # True (benchmarks): the server's durable defaults.
    fsync: bool = False

    @property
    def socket_dir(self) -> Path:
        return self.folder / "socket"

    def _run(self, *command: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *command], capture_output=True, text=True, check=True,
                              timeout=120)

    def start(self) -> None:
        data = self.folder / "data"
        if not data.exists():
            data.mkdir(parents=True)
            self.socket_dir.mkdir()
            if os.geteuid() == 0:
                shutil.chown(self.folder, "postgres")
                shutil.chown(data, "postgres")
                shutil.chown(self.socket_dir, "postgres")
            self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres",
                      "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
        unsafe = "" if self.fsync else "-c fsync=off -c full_page_writes=off "
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-w", "-l",
                  str(self.folder / "server.log"), "-o",
                  f"-k {self.socket_dir} -c listen_addresses='' -p {self.port} "
                  f"{unsafe}-c max_connections=200", "start")

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-w",
                  "-m", "fast", "stop")

    def restart(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-w",
                  "-l", str(self.folder / "server.log"), "-m", "fast", "restart")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def create_database(self) -> str:
        """A new, empty database; its URL."""
        name = f"uwf_test_{os.getpid()}_{next(_NAMES)}"
        self._run(str(self.bin / "createdb"), "-h", str(self.socket_dir), "-p",
                  str(self.port), "-U", "postgres", name)
        return self.url(name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    """One server for the test session (per xdist worker), stopped at its end."""
    folder = Path(tempfile.mkdtemp(prefix="uwf-pg-"))
    server = Server(folder, pg_bin())
    server.start()  # `pg_ctl -w`: waits until the server accepts connections
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: Server) -> str:
    """The URL of a new, empty database of the session's server."""
    return pg_server.create_database()


@pytest.fixture
def pg_database(pg_url: str) -> Iterator[PgDatabase]:
    """A `PgDatabase` on a new, empty database, waiting at most 0.05 s for a lock (as the
    contract suite's other backends do: a test holds one on purpose); closed after."""
    database = PgDatabase(pg_url, lock_timeout=0.05)
    yield database
    database.close()
