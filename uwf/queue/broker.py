"""An MQTT connection for jobs over MQTT (docs/mqtt.md), with paho-mqtt (the `mqtt`
extra), loaded only when a job talks to its broker.

`parse_broker` reads `mqtt://[user@]host[:port]` (`mqtts://` for TLS, port 8883 by
default) into the `BrokerRef` a queue entry records; the password is never part of
it: `password_env` names the variable that holds it, read from the command's
environment when it connects. Every failure to reach the broker is one
`BrokerUnavailable` naming host and port (never the credentials).

`Connection.publish` waits for each message's acknowledgement; `publish_all`
keeps up to a window of them in flight and counts the acknowledgements as they
come (paho's on_publish), for a stream of many (`uwf bridge mqtt`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from uwf.errors import BrokerUnavailable, UsageError
from uwf.queue.events import BrokerRef

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
CONNECT_TIMEOUT_S = 5.0
# How many messages `publish_all` keeps awaiting their acknowledgement at once.
WINDOW = 1000


def parse_broker(url: str, password_env: str | None = None) -> BrokerRef:
    """`mqtt://[user@]host[:port]` as a BrokerRef; a usage error for anything else (a
    password in the URL included: give it by --broker-password-env)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"broker {url!r} is not an mqtt:// URL: {exc}",
                         "give mqtt://HOST:PORT") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise UsageError(f"broker {_shown(url)!r} is not an mqtt:// or mqtts:// URL",
                         "give mqtt://HOST:PORT")
    if parts.password is not None:
        raise UsageError("the broker URL holds a password, which would be recorded in the log",
                         "put it in an environment variable and name it with "
                         "--broker-password-env")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError(f"broker {_shown(url)!r} has a path or query", "give mqtt://HOST:PORT")
    return BrokerRef(host=parts.hostname, port=port or DEFAULT_PORTS[parts.scheme],
                     tls=parts.scheme == "mqtts",
                     username=None if parts.username is None else unquote(parts.username),
                     password_env=password_env)


def check_topic_prefix(prefix: str) -> str:
    """A topic prefix a job's events can be published under: no wildcards, no NUL, not
    empty, no leading or trailing `/`."""
    if not prefix.strip("/") or any(c in prefix for c in "+#\x00") or prefix != prefix.strip("/"):
        raise UsageError(f"topic prefix {_shown(prefix)!r} is not a topic to publish to",
                         "give levels such as team/jobs/42, without + # or a / at either end")
    return prefix


def _shown(url: str) -> str:
    return url if len(url) <= 80 else url[:77] + "..."


def where(broker: BrokerRef) -> str:
    return f"{broker.host}:{broker.port}"


class _Closed:
    """What a closed Connection holds instead of its client."""

    def __getattr__(self, name: str) -> Any:
        raise BrokerUnavailable("the connection to the MQTT broker is closed",
                                "connect again")


_CLOSED: Any = _Closed()


@dataclass(frozen=True)
class Message:
    topic: str
    payload: bytes


class Connection:
    """One client connected to a broker: publish with acknowledgement, or subscribe and
    take messages as they come. Closed with `close()` (or as a context manager)."""

    def __init__(self, broker: BrokerRef, environ: Mapping[str, str], *,
                 client_id: str = "", clean: bool = True,
                 timeout: float = CONNECT_TIMEOUT_S) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.broker = broker
        self.messages: queue.Queue[Message] = queue.Queue()
        self._connected = threading.Event()
        self._refused: list[str] = []
        self._subscriptions: list[tuple[str, int]] = []
        # The message ids acknowledged and not yet taken by `publish_all`, and the one it
        # waits for (the oldest in flight); the condition wakes it for that one only.
        self._acks: set[int] = set()
        self._awaited: int | None = None
        self._acked = threading.Condition()
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                             clean_session=clean if client_id else True)
        if broker.username is not None:
            password = None
            if broker.password_env is not None:
                password = environ.get(broker.password_env)
                if password is None:
                    raise UsageError(f"{broker.password_env} is not set",
                                     "set it to the broker's password")
            client.username_pw_set(broker.username, password)
        if broker.tls:
            client.tls_set()
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_publish = self._on_publish
        client.reconnect_delay_set(min_delay=1, max_delay=5)
        # No limit of paho's own (set before connecting): `publish_all` keeps its window,
        # and with a limit paho walks every message in flight at each acknowledgement.
        client.max_inflight_messages_set(0)
        self.client: Any = client
        try:
            client.connect(broker.host, broker.port, keepalive=30)
        except (OSError, ValueError) as exc:
            raise self.unavailable(exc.strerror if isinstance(exc, OSError) and exc.strerror
                                   else str(exc)) from None
        client.loop_start()
        if not self._connected.wait(timeout):
            self.close()
            raise self.unavailable(self._refused[-1] if self._refused else
                                   f"no answer within {timeout:g} s")

    def unavailable(self, reason: str) -> BrokerUnavailable:
        return BrokerUnavailable(f"the MQTT broker {where(self.broker)} is unavailable: "
                                 f"{reason}", "start it or check --broker; nothing recorded "
                                 "is lost")

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any,
                    properties: Any) -> None:
        if reason.is_failure:
            self._refused.append(f"it refused the connection ({reason})")
            return
        for topic, qos in self._subscriptions:  # again after a reconnect
            client.subscribe(topic, qos)
        self._connected.set()

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any,
                       properties: Any) -> None:
        self._connected.clear()
        with self._acked:
            self._acked.notify_all()  # `publish_all` stops waiting: the rest is not acked

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any,
                    properties: Any) -> None:
        with self._acked:
            self._acks.add(mid)
            if mid == self._awaited:
                self._acked.notify_all()

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        self.messages.put(Message(message.topic, bytes(message.payload)))

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def publish(self, topic: str, payload: bytes, qos: int = 1,
                timeout: float = CONNECT_TIMEOUT_S) -> None:
        """Send `payload` and wait for the broker's acknowledgement (QoS 1 and 2)."""
        deadline = time.monotonic() + timeout
        info = self.client.publish(topic, payload, qos=qos)
        while not info.is_published():
            if time.monotonic() > deadline:
                raise self.unavailable(f"no acknowledgement within {timeout:g} s")
            time.sleep(0.002)

    def publish_all(self, messages: Iterable[tuple[str, bytes]], qos: int = 1, *,
                    window: int = WINDOW, timeout: float = CONNECT_TIMEOUT_S,
                    stopped: Callable[[], bool] = lambda: False) -> int:
        """Publish (topic, payload)s in order, up to `window` of them awaiting the
        broker's acknowledgement at once; return how many, from the first, were
        acknowledged: all of them, or fewer when the connection dropped, no
        acknowledgement came for `timeout` seconds, or `stopped()` said so. After
        fewer, a caller that wants the rest publishes them again on a new connection
        (at least once)."""
        with self._acked:
            self._acks.clear()
        flight: deque[int] = deque()
        acked = 0
        for topic, payload in messages:
            while len(flight) >= window:
                taken = self._settle(flight, timeout, stopped)
                if not taken:
                    return acked
                acked += taken
            if not self.connected:
                return acked
            flight.append(self.client.publish(topic, payload, qos=qos).mid)
        while flight:
            taken = self._settle(flight, timeout, stopped)
            if not taken:
                return acked
            acked += taken
        return acked

    def _settle(self, flight: deque[int], timeout: float, stopped: Callable[[], bool]) -> int:
        """Wait until the oldest message in flight is acknowledged, then take every
        acknowledged one from the front; how many (0: the connection dropped, `timeout`
        passed without it, or `stopped()`)."""
        deadline = time.monotonic() + timeout
        with self._acked:
            self._awaited = flight[0]
            try:
                while flight[0] not in self._acks:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self.connected or stopped():
                        return 0
                    self._acked.wait(min(left, 0.1))
            finally:
                self._awaited = None
            taken = 0
            while flight and flight[0] in self._acks:
                self._acks.discard(flight.popleft())
                taken += 1
            return taken

    def subscribe(self, topic: str, qos: int = 1) -> None:
        self._subscriptions.append((topic, qos))
        self.client.subscribe(topic, qos)

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    def close(self) -> None:
        """Disconnect and let go of the client, whose sockets close with it."""
        client = self.client
        client.disconnect()
        client.loop_stop()
        client.on_connect = client.on_disconnect = client.on_message = None  # no cycle
        client.on_publish = None
        self.client = _CLOSED

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# A broker that cannot be reached is tried again after 0.2 s, doubling up to 2 s.
BACKOFF_S = (0.2, 2.0)


def connect_retrying(make: Callable[[], Connection], stopped: Callable[[], bool],
                     first_failure: Callable[[BrokerUnavailable], None]) -> Connection | None:
    """`make()` until the broker answers: after each BrokerUnavailable a wait (BACKOFF_S),
    `first_failure` told of the first one only; None when `stopped()` says so meanwhile."""
    delay, failed = BACKOFF_S[0], False
    while True:
        try:
            return make()
        except BrokerUnavailable as exc:
            if not failed:
                first_failure(exc)
                failed = True
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if stopped():
                return None
            time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, BACKOFF_S[1])
