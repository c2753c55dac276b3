"""`uwf bridge mqtt`: events per second to a subscriber, beside a bare paho loop, and the
latency from an append to its receipt.

    python bench/mqtt_bridge.py [--quick] [--events N] [--rounds R] [--latency K]
                                [--dir DIR] [--wait-quiet S]

A mosquitto of its own (tests/brokerkit.Broker: loopback, no persistence, no limit on
queued messages) and one subscriber in this process (paho, `bench/#` at QoS 0, so
that it costs the broker and itself as little as it can), counting messages.

1. Throughput. A store of about N events (`uwf queue add --batch`, durability none).
   In R rounds, in rotating order, each until the subscriber has all N:
   - bridge: `uwf bridge mqtt --once` as a child process, under a new prefix each
     round (so it starts from seq 1);
   - paho: a child process publishing the same N log lines to the same topics with
     paho-mqtt, QoS 1, then waiting for every acknowledgement: paho's defaults (20
     in flight), and with no in-flight limit (what the bridge sets; it keeps its own
     window of 1,000).
   Two rates per run: end to end (N / from the child's start to the last receipt,
   start-up included) and streaming (from the first receipt to the last). Medians
   over the rounds, and bridge / paho ratios.
2. Latency. `uwf bridge mqtt` follows the store; K events are appended in this
   process (the queue's own operation, `queue add`, one write each, 20-40 ms apart);
   the latency of one is from the call that appends it (the write included) to its
   receipt by the subscriber. Median and p99; the bridge looks at the log every 50 ms.
No assertions: figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    EXAMPLE,
    REPO,
    add_common_args,
    begin,
    check,
    data_dir,
    env_with,
    fmt_ms,
    fmt_rate,
    load,
    median,
    print_header,
    run_measured,
    section,
    uwf_exe,
)

sys.path.insert(0, str(REPO))
from tests.brokerkit import Broker  # the tests' broker, reused

BARE = """
import sys, time
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
log, prefix, inflight = sys.argv[1], sys.argv[2], int(sys.argv[3])
import json
lines = open(log, "rb").read().split(b"\\n")[:-1]
topics = [prefix + "/" + json.loads(line)["subject"] + "/events" for line in lines]
client = mqtt.Client(CallbackAPIVersion.VERSION2)
client.max_inflight_messages_set(inflight)
client.connect("127.0.0.1", int(sys.argv[4]))
client.loop_start()
infos = [client.publish(topic, line, qos=1) for topic, line in zip(topics, lines)]
for info in infos:
    info.wait_for_publish()
client.disconnect()
client.loop_stop()
"""


@dataclass
class Counter:
    """The subscriber's tally of the current run: messages, first and last receipt, and
    the receipt time of each seq (for the latency)."""

    target: int = 0
    count: int = 0
    first: float = 0.0
    last: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    received: dict[int, float] = field(default_factory=dict)
    keep_seqs: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, target: int, keep_seqs: bool = False) -> None:
        with self.lock:
            self.target, self.count, self.first, self.last = target, 0, 0.0, 0.0
            self.keep_seqs = keep_seqs
            self.received = {}
            self.done.clear()

    def on_message(self, client: Any, userdata: Any, message: Any) -> None:
        now = time.perf_counter()
        with self.lock:
            if not self.count:
                self.first = now
            self.count += 1
            self.last = now
            if self.keep_seqs:
                self.received[json.loads(message.payload)["seq"]] = now
            if self.count >= self.target:
                self.done.set()


def subscriber(port: int, counter: Counter) -> Any:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2)
    client.on_message = counter.on_message
    subscribed = threading.Event()
    client.on_subscribe = lambda *args: subscribed.set()
    client.connect("127.0.0.1", port)
    client.loop_start()
    client.subscribe("bench/#", qos=0)
    if not subscribed.wait(5):
        sys.exit("bench: the subscriber was not subscribed within 5 s")
    return client


def make_store(root: Path, events: int) -> int:
    """A store of about `events` events: the example workflow and queue entries, added
    in batches of at most 100,000 (durability none). The log's last seq."""
    shutil.rmtree(root, ignore_errors=True)
    env = env_with(UWF_DURABILITY="none")
    exe = uwf_exe()
    check(run_measured([exe, "--store", str(root), "workflow", "put", str(EXAMPLE)], env),
          "uwf workflow put")
    left, batch = events - 2, 0
    while left > 0:
        size = min(left, 100_000)
        path = root.parent / f"{root.name}-batch.jsonl"
        path.write_text("".join(json.dumps({"workflow": "solve-issue",
                                            "prompt": f"bench task {batch}-{n}"}) + "\n"
                                for n in range(size)), "utf-8")
        check(run_measured([exe, "--store", str(root), "queue", "add", "--batch", str(path),
                            "--quiet"], env), "uwf queue add --batch")
        path.unlink()
        left -= size
        batch += 1
    return sum(segment.read_bytes().count(b"\n")
               for segment in (root / "events").glob("*.jsonl"))


def one_log(root: Path) -> Path:
    """The log as one file (the bare loop reads its lines from it)."""
    whole = root.parent / f"{root.name}-log.jsonl"
    with whole.open("wb") as out:
        for segment in sorted((root / "events").glob("*.jsonl")):
            out.write(segment.read_bytes())
    return whole


@dataclass(frozen=True)
class Run:
    end_to_end: float  # events/s from the child's start to the last receipt
    streaming: float  # events/s from the first receipt to the last


def timed(argv: list[str], env: dict[str, str], counter: Counter, events: int,
          what: str) -> Run:
    counter.reset(events)
    start = time.perf_counter()
    child = subprocess.run(argv, env=env, capture_output=True, check=False)
    if child.returncode != 0:
        sys.exit(f"bench: {what} failed with exit {child.returncode}:\n"
                 f"{child.stderr.decode(errors='replace')}")
    if not counter.done.wait(120):
        sys.exit(f"bench: {what}: the subscriber has {counter.count} of {events} messages")
    return Run(events / (counter.last - start),
               (events - 1) / max(counter.last - counter.first, 1e-9))


def throughput(root: Path, port: int, events: int, rounds: int, counter: Counter) -> None:
    log = one_log(root)
    env = env_with(UWF_DURABILITY="none")
    exe = uwf_exe()
    url = f"mqtt://127.0.0.1:{port}"
    sides = {
        "bridge": lambda r: [exe, "--store", str(root), "bridge", "mqtt", "--broker", url,
                             "--once", "--prefix", f"bench/bridge{r}"],
        "paho, 20 in flight": lambda r: [sys.executable, "-c", BARE, str(log),
                                         f"bench/paho{r}", "20", str(port)],
        "paho, no limit": lambda r: [sys.executable, "-c", BARE, str(log),
                                     f"bench/free{r}", "0", str(port)],
    }
    results: dict[str, list[Run]] = {name: [] for name in sides}
    order = list(sides)
    for index in range(rounds):
        shift = index % len(order)
        for name in order[shift:] + order[:shift]:
            results[name].append(timed(sides[name](index), env, counter, events, name))
    log.unlink()
    section(f"throughput: {events:,} events, medians of {rounds} rounds (end: {load()})")
    print(f"{'':<34}{'end to end':>14}{'streaming':>14}")
    for name, runs in results.items():
        print(f"{name:<34}{fmt_rate(median([r.end_to_end for r in runs])):>14}"
              f"{fmt_rate(median([r.streaming for r in runs])):>14}")
    bridge = results["bridge"]
    for name in order[1:]:
        ratio_end = median([a.end_to_end / b.end_to_end
                            for a, b in zip(bridge, results[name], strict=True)])
        ratio_stream = median([a.streaming / b.streaming
                               for a, b in zip(bridge, results[name], strict=True)])
        label = f"ratio bridge / {name}"
        print(f"{label:<34}{ratio_end:>12.2f} x{ratio_stream:>12.2f} x")


def latency(root: Path, port: int, count: int, counter: Counter) -> None:
    from uwf.queue import commands as queue
    from uwf.queue.commands import QueueAdd
    from uwf.store import Store

    env = env_with(UWF_DURABILITY="none")
    store = Store.open(root)
    head = store.log.head().seq
    counter.reset(head, keep_seqs=True)
    follower = subprocess.Popen([uwf_exe(), "--store", str(root), "bridge", "mqtt", "--broker",
                                 f"mqtt://127.0.0.1:{port}", "--prefix", "bench/latency"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not counter.done.wait(120):  # caught up with what the store had
            sys.exit(f"bench: the following bridge published {counter.count} of {head}")
        appended: dict[int, float] = {}
        counter.reset(count, keep_seqs=True)
        for n in range(count):
            start = time.perf_counter()
            queue.add(QueueAdd(workflow="solve-issue", prompt=f"latency {n}"), store)
            appended[store.log.head().seq] = start
            time.sleep(random.uniform(0.02, 0.04))
        if not counter.done.wait(30):
            sys.exit(f"bench: {counter.count} of {count} appended events arrived")
    finally:
        follower.send_signal(signal.SIGTERM)
        _, err = follower.communicate(timeout=10)
        store.close()
    if follower.returncode != 0:
        sys.exit(f"bench: the following bridge exited {follower.returncode}: {err.decode()}")
    delays = sorted(counter.received[seq] - at for seq, at in appended.items())
    p99 = statistics.quantiles(delays, n=100)[98]
    section(f"latency: {count} events appended in-process 20-40 ms apart, the bridge "
            f"following (end: {load()})")
    print(f"append -> receipt: median {fmt_ms(median(delays))}, p99 {fmt_ms(p99)} "
          f"(min {fmt_ms(delays[0])}, max {fmt_ms(delays[-1])})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--events", type=int, default=100_000,
                        help="events in the store (default 100,000; 20,000 with --quick)")
    parser.add_argument("--rounds", type=int, help="rounds of each side (default 5; 3 with "
                        "--quick)")
    parser.add_argument("--latency", type=int, default=200,
                        help="events appended for the latency (default 200)")
    parser.add_argument("--quick", action="store_true", help="20,000 events, 3 rounds")
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.events = min(args.events, 20_000)
    args.rounds = args.rounds or (3 if args.quick else 5)

    base = data_dir(args.dir) / "mqtt-bridge"
    base.mkdir(parents=True, exist_ok=True)
    print_header("bridge: `uwf bridge mqtt` to a subscriber, beside a bare paho loop", base)
    print(f"broker: {Broker.__module__}.Broker (mosquitto on loopback); "
          f"paho-mqtt {__import__('paho.mqtt').mqtt.__version__}")
    root = base / "store"
    events = make_store(root, args.events)
    print(f"store: {root} ({events:,} events; a line is "
          f"{os.path.getsize(next((root / 'events').glob('*.jsonl'))) // events} bytes on "
          "average)")
    folder = base / "broker"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    broker = Broker(folder)
    broker.start()
    counter = Counter()
    client = subscriber(broker.port, counter)
    try:
        begin(args.wait_quiet)
        throughput(root, broker.port, events, args.rounds, counter)
        latency(root, broker.port, args.latency, counter)
    finally:
        client.disconnect()
        client.loop_stop()
        broker.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
