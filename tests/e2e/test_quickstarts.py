"""The docs' quick starts run as they are written (issue 32): the shell blocks marked
`<!-- quickstart: NAME -->` in docs/hosts.md (a PostgreSQL server of one's own, no
sudo) and docs/mqtt.md (a mosquitto broker of one's own), each followed by its
`NAME stop` block, in a scratch folder, against the real server; so the docs cannot
drift from what works. Skipped locally when the server is not installed, a failure
under CI (`.ci/run` installs the packages), as tests/pgkit.py and tests/brokerkit.py
do."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerkit import free_port, mosquitto
from tests.conftest import BIN, ROOT
from tests.pgkit import pg_bin


def quickstart(doc: str, name: str) -> str:
    """The shell block right after `<!-- quickstart: NAME -->` in docs/DOC."""
    text = (ROOT / "docs" / doc).read_text("utf-8")
    found = re.search(rf"<!-- quickstart: {re.escape(name)} -->\n```sh\n(.*?)```", text, re.S)
    assert found is not None, f"no quickstart {name!r} in docs/{doc}"
    return found.group(1)


def run_quickstart(doc: str, name: str, env: dict[str, str]) -> str:
    """The quick start then its stop block (stopped even when the start fails part
    way), in bash from the repository's root, as a reader pastes them; its output."""
    script = (f"trap {_quoted(quickstart(doc, f'{name} stop'))} EXIT\n"
              f"{quickstart(doc, name)}")
    done = subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"})
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A scratch folder any user can reach (as root, the server runs as `postgres`,
    who cannot enter pytest's own temporary folders)."""
    folder = Path(tempfile.mkdtemp(prefix="uwf-quickstart-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_postgresql_quick_start(reachable: Path) -> None:
    pg_bin()  # skipped (or failed under CI) without the server
    out = run_quickstart("hosts.md", "postgresql",
                         {**os.environ, "PGROOT": str(reachable / "pg"), "HOME": str(reachable)})
    # `uwf registry show`'s JSON (then what stopping the server says)
    shown, _ = json.JSONDecoder().raw_decode(out[out.index('{\n  "store"'):])
    assert shown["store"] == f"postgresql://uwf@/uwf?host={reachable}/pg/socket"
    assert shown["status"] == "valid"
    assert shown["counts"]["workflows"] == 1
    assert not (reachable / "pg" / "data" / "postmaster.pid").exists()  # stopped


def test_the_mosquitto_quick_start(reachable: Path) -> None:
    mosquitto()  # skipped (or failed under CI) without the broker
    if shutil.which("mosquitto_sub") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mosquitto-clients is not installed; .ci/run installs it with apt")
        pytest.skip("mosquitto-clients is not installed (apt-get install mosquitto-clients)")
    out = run_quickstart("mqtt.md", "mosquitto",
                         {**os.environ, "MQROOT": str(reachable / "mqtt"),
                          "MQPORT": str(free_port()), "HOME": str(reachable)})
    seen = [json.loads(line) for line in out.splitlines() if line.startswith('{"seq"')]
    assert [(event["seq"], event["type"]) for event in seen] == [
        (1, "store.created"), (2, "workflow.registered")]
