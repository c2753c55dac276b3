"""A real MQTT broker for tests: Debian's mosquitto on a free loopback port.

`.ci/run` installs mosquitto when it is absent, so under CI=true a missing broker
fails the test instead of skipping it. The broker saves its sessions and queued
messages in its folder when it stops (`persistence true`), as a production broker
does, so a restart keeps what a persistent subscriber has not taken yet;
`Broker(folder, persistent=False)` forgets them. It never drops a message it queued
for a slow subscriber (`max_queued_messages 0`: no limit; mosquitto's default drops
beyond 1000).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def mosquitto() -> str:
    """The broker's executable; skipped locally when absent, a failure under CI."""
    found = shutil.which("mosquitto") or next(
        (path for path in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")
         if os.access(path, os.X_OK)), None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mosquitto is not installed; .ci/run installs it with apt")
        pytest.skip("mosquitto is not installed (apt-get install mosquitto)")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Broker:
    """One mosquitto process on 127.0.0.1:`port`; `restart()` keeps the port."""

    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    persistent: bool = True

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> None:
        config = self.folder / "mosquitto.conf"
        persistence = (f"persistence true\npersistence_location {self.folder}/\n"
                       if self.persistent else "persistence false\n")
        if os.geteuid() == 0:  # else it becomes `mosquitto`, who cannot write in the folder
            persistence += "user root\n"
        config.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
                          f"{persistence}max_queued_messages 0\n"
                          "log_dest stderr\nlog_type error\n", "utf-8")
        log = (self.folder / "mosquitto.log").open("ab")
        self.process = subprocess.Popen([mosquitto(), "-c", str(config)],
                                        stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mosquitto exited {self.process.returncode}: "
                                   f"{(self.folder / 'mosquitto.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"mosquitto did not listen on {self.port} within 60 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A running broker, stopped after the test."""
    folder = tmp_path / "broker"
    folder.mkdir()
    running = Broker(folder)
    running.start()
    try:
        yield running
    finally:
        running.stop()
