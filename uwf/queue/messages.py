"""Jobs over MQTT (the job-registry seed's sections 2 and 7, docs/mqtt.md): `uwf
queue publish` and `uwf queue subscribe`.

A job (a queue entry added with `--broker`) has a monotonic `seq`: each event it
publishes is first recorded as `queue.published` with the next seq (decided in the
writers' section, so two publishers never share one, and kept by the log across
restarts), then sent to `<topicPrefix>/events` as

    {"job": ID, "seq": N, "ts": TS, "token": TOKEN, "event": {...}}

with QoS 1. When the broker does not take it, `queue.delivery_failed` records
that, the command says so (exit 1) and the job's next publish sends it again
first: the write it shadowed stands. A subscriber takes only messages with the
job's token and a seq above the last it recorded (`queue.received`), so a
replayed or forged message is refused and nothing is taken twice.
"""

from __future__ import annotations

import hmac
import json
import queue as queues
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from uwf.engine.clock import format_ts
from uwf.engine.events import NewEvent
from uwf.engine.journal import Journal, Outcome, Views
from uwf.errors import BrokerUnavailable, Rejected
from uwf.queue.broker import CONNECT_TIMEOUT_S, Connection, connect_retrying
from uwf.queue.events import QueueDelivered, QueueDeliveryFailed, QueuePublished, QueueReceived
from uwf.queue.projection import QueueEntry
from uwf.queue.results import Published, Received
from uwf.queue.rules import TERMINAL
from uwf.queue.service import get_entry
from uwf.store import Store

# A status event (`{"type": "status", "status": ...}`, as the worker publishes) with one
# of these ends `queue subscribe --follow`: the job is over.
FINAL_STATUSES = frozenset({*TERMINAL, "completed", "error", "parked"})


def _job(views: Views, entry_id: str) -> QueueEntry:
    entry = get_entry(views, entry_id)
    if entry.broker is None:
        raise Rejected(f"queue entry {entry_id} has no MQTT broker",
                       "add the job with `uwf queue add --broker mqtt://HOST:PORT`")
    return entry


def message(entry: QueueEntry, seq: int, ts: str, event: Any) -> bytes:
    """The bytes sent for the job's event `seq`."""
    return json.dumps({"job": entry.id, "seq": seq, "ts": ts, "token": entry.auth_token,
                       "event": event}, ensure_ascii=False, separators=(",", ":")).encode()


def publish(journal: Journal, entry_id: str, event: Any, environ: Mapping[str, str], *,
            timeout: float = CONNECT_TIMEOUT_S) -> Published:
    """Record the job's next event, then send it (after any whose delivery failed;
    the broker's password, if any, from `environ`: the command's)."""
    subject = f"queue/{entry_id}"

    def decide(views: Views, now: int) -> Outcome[tuple[QueueEntry, int, str]]:
        entry = _job(views, entry_id)
        seq = entry.last_seq + 1
        return Outcome([NewEvent(subject, QueuePublished(seq=seq, topic=entry.topic,
                                                         event=event))],
                       (entry, seq, format_ts(now)))

    entry, seq, ts = journal.write_at(decide)
    pending = _undelivered(journal, entry)
    try:
        send(environ, entry, [*pending, (seq, ts, event)], timeout)
    except BrokerUnavailable as exc:
        failed = QueueDeliveryFailed(seq=seq, error=exc.what)
        journal.write(lambda views: Outcome([NewEvent(subject, failed)]))
        raise type(exc)(f"event {seq} of {entry_id} is recorded but not delivered: {exc.what}",
                        "it is sent again by the job's next publish (or `uwf queue publish "
                        f"{entry_id} --resend`)") from None
    resent = [number for number, _, _ in pending]
    if resent:
        journal.write(lambda views: Outcome([NewEvent(subject,
                                                            QueueDelivered(seqs=resent))]))
    return Published(id=entry_id, seq=seq, topic=entry.topic, resent=resent)


def resend(store: Store, entry_id: str, environ: Mapping[str, str], *,
           timeout: float = CONNECT_TIMEOUT_S) -> Published:
    """Send the job's events whose delivery failed, oldest first."""
    entry = _job(store.read(), entry_id)
    pending = _undelivered(store.journal, entry)
    if pending:
        send(environ, entry, pending, timeout)
        resent = [number for number, _, _ in pending]
        store.journal.write(lambda views: Outcome([NewEvent(f"queue/{entry_id}",
                                                            QueueDelivered(seqs=resent))]))
    return Published(id=entry_id, seq=entry.last_seq, topic=entry.topic,
                     resent=[number for number, _, _ in pending])


def send(environ: Mapping[str, str], entry: QueueEntry, events: list[tuple[int, str, Any]],
         timeout: float) -> None:
    """Publish (seq, ts, event)s of the job in order, each acknowledged by the broker
    (its password, if any, from `environ`: the command's)."""
    assert entry.broker is not None
    with Connection(entry.broker, environ, timeout=timeout) as connection:
        for seq, ts, event in events:
            connection.publish(entry.topic, message(entry, seq, ts, event), timeout=timeout)


def _undelivered(journal: Journal, entry: QueueEntry) -> list[tuple[int, str, Any]]:
    """The job's published events whose delivery failed, as (seq, ts, event), oldest
    first; read back from its stream."""
    if not entry.undelivered:
        return []
    wanted = set(entry.undelivered)
    found = {}
    for envelope in journal.read_subject(f"queue/{entry.id}"):
        data = envelope.data
        if isinstance(data, QueuePublished) and data.seq in wanted:
            found[data.seq] = (data.seq, envelope.ts, data.event)
    return [found[seq] for seq in sorted(found)]


# -- subscribe -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Refused:
    """A message `queue subscribe` did not take, and why."""

    topic: str
    why: str


def subscribe(store: Store, entry_id: str, environ: Mapping[str, str], *,
              follow: bool = False, wait: float = 2.0,
              stopped: Callable[[], bool] = lambda: False,
              timeout: float = CONNECT_TIMEOUT_S,
              notice: Callable[[str], None] = lambda line: None,
              ) -> Iterator[Received | Refused]:
    """The job's events from its broker as they come, each recorded (`queue.received`)
    before it is yielded; refused messages are yielded as `Refused`. Without `follow`,
    ends once no message came for `wait` seconds; with it, at the job's final status
    event or when `stopped()` says so. The subscription is durable (a persistent session
    per job), so what is published while no subscriber runs waits at the broker. A
    broker that cannot be reached is an error at once, unless following: then it is
    tried again until it answers, said once through `notice`."""
    entry = _job(store.read(), entry_id)
    assert entry.broker is not None
    connection = _connected(environ, entry, timeout, retry=follow,
                            stopped=stopped, notice=notice)
    if connection is None:
        return
    with connection:
        connection.subscribe(entry.topic, qos=1)
        while not stopped():
            try:
                got = connection.messages.get(timeout=min(wait, 0.5) if follow else wait)
            except queues.Empty:
                if follow:
                    continue
                return
            taken = _take(store.journal, entry, got.topic, got.payload)
            yield taken
            if follow and isinstance(taken, Received) and _final(taken.event):
                return


def _connected(environ: Mapping[str, str], entry: QueueEntry, timeout: float, *, retry: bool,
               stopped: Callable[[], bool], notice: Callable[[str], None]
               ) -> Connection | None:
    """The job's subscriber connection; with `retry`, tried again until the broker
    answers or `stopped()` (then None), the first failure said through `notice`."""
    assert entry.broker is not None
    broker = entry.broker

    def make() -> Connection:
        return Connection(broker, environ, client_id=f"uwf-sub-{entry.id}",
                          clean=False, timeout=timeout)

    if not retry:
        return make()
    return connect_retrying(make, stopped, lambda exc: notice(
        f"{exc.what}; trying again until it answers"))


def _final(event: Any) -> bool:
    return (isinstance(event, dict) and event.get("type") == "status"
            and event.get("status") in FINAL_STATUSES)


def _take(journal: Journal, entry: QueueEntry, topic: str, payload: bytes) -> Received | Refused:
    try:
        found = json.loads(payload)
    except ValueError:
        return Refused(topic, "not JSON")
    if not isinstance(found, dict):
        return Refused(topic, "not a JSON object")
    token, seq = found.get("token"), found.get("seq")
    if not isinstance(token, str) or entry.auth_token is None or not hmac.compare_digest(
            token.encode(), entry.auth_token.encode()):
        return Refused(topic, "wrong or missing token")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        return Refused(topic, "no seq")
    event = found.get("event")

    def decide(views: Views) -> Outcome[bool]:
        job = get_entry(views, entry.id)
        if seq <= job.received_seq:
            return Outcome((), False)
        return Outcome([NewEvent(f"queue/{entry.id}",
                                 QueueReceived(seq=seq, topic=topic, event=event))], True)

    if not journal.write(decide):
        return Refused(topic, f"seq {seq} was already received")
    ts = found.get("ts")
    return Received(id=entry.id, seq=seq, ts=ts if isinstance(ts, str) else "", topic=topic,
                    event=event)
