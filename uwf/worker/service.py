"""`uwf worker`: the host loop SPEC §8 leaves to the user (docs/worker.md).

The worker leases queue entries through the scheduler (`uwf.queue.sched`: the
policy's maxConcurrent and the session filter hold whatever else leases), and
runs each in a thread of its own: start the run (or continue the named one),
step it to its end through the thread engine, renew the lease every third of
leaseTtlMs meanwhile, then complete (the run reached `$END`) or release as
failed with the reason, or (the run asks a question) give it back as waiting, to
be resumed once answered (uwf/queue/waiting.py). Agents are subprocesses in
process groups of their own (`uwf.threads.stepping`), so one thread per entry
costs little, and every store access goes through the journal, which is safe
across threads.

Time limits: each step gets at most the entry's idleTimeoutSec (a step is the
unit of progress) and at most what is left of its timeoutSec; stepping kills
the agent's process group when its time is up.

`stop()` only sets a flag, so a signal handler may call it; the loop then stops
leasing, kills the running agents and releases (not failed) what it holds.

An entry chooses its agent only among the worker's own: its `agent` must be an
alias of the worker's config (or absent: the config decides), since whoever can
queue an entry would otherwise run any command on every worker host. A command
line runs only when the worker opts in (`allow_entry_commands`); otherwise the
entry is released as failed, with a reason naming what to configure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from uwf.archive.service import Archive
from uwf.config.configfile import Config
from uwf.config.limits import DEFAULT_MAX_STEPS
from uwf.config.settings import DEFAULT_LOCK_TIMEOUT_S, Settings
from uwf.errors import NotFound, NothingToDo, Rejected, StoreBusy, StoreUnavailable, UwfError
from uwf.payload import UNSET
from uwf.queue import sched, waiting
from uwf.queue.projection import QueueEntry
from uwf.queue.results import Granted
from uwf.queue.service import artifact_failure, get_entry
from uwf.store import Store
from uwf.threads.service import get_thread, start_thread
from uwf.threads.stepping import step_thread
from uwf.worker.anchoring import Anchors
from uwf.worker.results import EntryDone, Outcome
from uwf.worker.waker import Waker

STOPPED_REASON = "worker stopped"
WAITING_REASON = "its run waits for an answer"
# How often the loop looks at the stop flag while it waits (seconds).
TICK = 0.1
DEFAULT_POLL = 2.0
DEFAULT_ANCHOR_EVERY = 1000
# Renewals come every third of leaseTtlMs, but not more often than this (seconds).
MIN_RENEW_INTERVAL = 0.05


@dataclass(frozen=True)
class WorkerOptions:
    session: str | None = None  # lease only this session's entries (None: any)
    concurrency: int = 1  # entries run at once by this worker
    once: bool = False  # take what is eligible now, run it, return
    poll_seconds: float = DEFAULT_POLL  # wait between lease attempts that found nothing
    max_steps: int = DEFAULT_MAX_STEPS  # steps per entry, as `thread run` (a loop ends)
    archive: str | None = None  # an archive folder synced at start and after each entry
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S  # the wait for the archive's lock
    anchors: str | None = None  # a folder of anchors (uwf log anchor), one per anchor_every
    anchor_every: int = DEFAULT_ANCHOR_EVERY  # events the log grows by between two anchors
    anchor_key: Path | None = None  # the signing key (given with `anchors`)
    # Run an entry's `agent` that is a command line rather than an alias of the config.
    allow_entry_commands: bool = False


@dataclass(frozen=True)
class EntryResult:
    """What became of one leased entry, and in how many seconds."""

    id: str
    run: str | None
    outcome: Outcome
    attempt: int
    seconds: float
    reason: str | None = None
    archive_error: str | None = None  # why the archive could not be synced after it
    anchor: str | None = None  # the anchor file written after it, if one was due
    anchor_error: str | None = None  # why that anchor could not be written
    publish_error: str | None = None  # why its status did not reach its MQTT broker

    def record(self) -> EntryDone:
        """The JSON line."""
        return EntryDone(id=self.id, run=self.run, outcome=self.outcome,
                         attempt=self.attempt, reason=self.reason or UNSET,
                         archive_error=self.archive_error or UNSET,
                         anchor=self.anchor or UNSET, anchor_error=self.anchor_error or UNSET,
                         publish_error=self.publish_error or UNSET)

    def line(self) -> str:
        """The progress line on a terminal."""
        shown = (f"{self.id}  {self.run or '-':<26}  {self.outcome:<9}  attempt "
                 f"{self.attempt:<3} {self.seconds:7.1f}s")
        shown = f"{shown}  {self.reason}" if self.reason else shown
        shown = f"{shown}  (archive: {self.archive_error})" if self.archive_error else shown
        shown = f"{shown}  (anchored: {self.anchor})" if self.anchor else shown
        shown = f"{shown}  (anchor: {self.anchor_error})" if self.anchor_error else shown
        return f"{shown}  (publish: {self.publish_error})" if self.publish_error else shown


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill an agent as stepping does: its process group when it leads one."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGKILL)
        else:  # a nested worker's agents share its group: kill the agent alone
            process.kill()


class _Held:
    """One leased entry while a thread runs it: its lease, its agent, its flags."""

    def __init__(self, entry_id: str, lease_id: str, attempt: int) -> None:
        self.entry_id = entry_id
        self.lease_id = lease_id
        self.attempt = attempt
        self.run: str | None = None
        self.stopping = threading.Event()  # the worker stops: give the entry back
        self.finished = threading.Event()  # the entry's work is over: stop renewing
        self.lost: str | None = None  # why the lease was taken away
        self.publish_error: str | None = None  # the first status its broker did not take
        self.broker: bool | None = None  # whether it has an MQTT broker, once read
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def attach(self, process: subprocess.Popen[bytes]) -> None:
        """stepping's `on_agent`: remember the agent; kill it at once if told to stop."""
        with self._lock:
            self._process = process
            doomed = self.stopping.is_set() or self.lost is not None
        if doomed:
            kill_group(process)

    def detach(self) -> None:
        with self._lock:
            self._process = None

    def interrupt(self, lost: str | None = None) -> None:
        """Stop (or, with a reason, lose the lease): no further step; kill the agent."""
        with self._lock:
            if lost is not None:
                self.lost = lost
            else:
                self.stopping.set()
            process = self._process
        if process is not None:
            kill_group(process)


class Worker:
    """Leases entries and runs them; `results()` yields each one's outcome as it ends."""

    def __init__(self, store: Store, config: Config, options: WorkerOptions,
                 settings: Settings, *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = store
        self.config, self.options = config, options
        self.settings = settings  # the command's: a job's broker password is in its environ
        self.monotonic = monotonic
        self._stop = threading.Event()
        self._done: queue.Queue[EntryResult] = queue.Queue()
        self._running: dict[str, tuple[_Held, threading.Thread]] = {}
        # Checked now (a bad folder is refused before anything is leased), synced by
        # the loop's own thread, so one sync runs at a time.
        self._archive = (Archive(store, options.archive, lock_timeout=options.lock_timeout)
                         if options.archive is not None else None)
        self._anchors = None
        if options.anchors is not None:
            if options.anchor_key is None:
                raise ValueError("anchors need anchor_key, the signing key's path")
            self._anchors = Anchors(store, Path(options.anchors), options.anchor_every,
                                    options.anchor_key)

    def stop(self) -> None:
        """Ask the loop to stop: safe from a signal handler (it only sets a flag)."""
        self._stop.set()

    # -- the loop --------------------------------------------------------------------

    def results(self) -> Iterator[EntryResult]:
        """Lease and run until stopped (or, with `once`, until nothing is eligible and
        nothing runs); each entry's result as it ends. `once` with nothing eligible at
        all raises NothingToDo (exit 3)."""
        leased_any = False
        nothing: NothingToDo | None = None
        next_lease = self.monotonic()
        if self._archive is not None:
            try:  # a broken archive stops the worker before it leases anything
                self._archive.sync()
            except BaseException:
                self._archive.close()
                raise
        # On a log that tells of new lines (PostgreSQL), an idle worker is woken by an
        # entry added or freed, not only by its poll (uwf/worker/waker.py).
        waker = (Waker(self.store, threading.Event())
                 if self.store.log.told and not self.options.once else None)
        if waker is not None:
            waker.start()
        try:
            while not self._stop.is_set():
                finished = list(self._collect(block=0))
                if finished or (waker is not None and waker.woken.is_set()):
                    next_lease = self.monotonic()  # a slot freed, or work came: try at once
                    if waker is not None:
                        waker.woken.clear()
                yield from finished
                free = self.options.concurrency - len(self._running)
                if free > 0 and self.monotonic() >= next_lease:
                    granted, nothing = self._lease(free)
                    leased_any = leased_any or bool(granted)
                    for lease in granted:
                        self._start(lease)
                    if len(granted) < free:  # nothing more eligible: wait a while
                        next_lease = self.monotonic() + self.options.poll_seconds
                if self.options.once and not self._running:
                    break
                finished = list(self._collect(block=TICK))
                if finished:
                    next_lease = self.monotonic()  # a slot freed: try at once
                yield from finished
            if self._stop.is_set():
                for held, _ in list(self._running.values()):
                    held.interrupt()
            while self._running:
                yield from self._collect(block=TICK)
        finally:
            if waker is not None:
                waker.join()
            self._abandon()
            if self._archive is not None:
                self._archive.close()
        if self.options.once and not leased_any and not self._stop.is_set():
            raise nothing or NothingToDo("no queue entry is eligible",
                                         "see why with `uwf sched plan`")

    def _lease(self, free: int) -> tuple[list[Granted], NothingToDo | None]:
        try:
            # Questions past their deadline timed out now, not when someone looks; then
            # the entries of runs that no longer wait (answered, timed out): ready again.
            waiting.settle(self.store)
            granted = sched.lease(self.store, free, self.options.session)
        except NothingToDo as exc:
            return [], exc
        except (StoreBusy, StoreUnavailable):  # transient: try again after the poll
            return [], None
        return granted.leases, None

    def _start(self, lease: Granted) -> None:
        held = _Held(lease.id, lease.lease_id, lease.attempt)
        runner = threading.Thread(target=self._runner, args=(held,),
                                  name=f"uwf-worker-{held.entry_id}", daemon=True)
        self._running[held.entry_id] = (held, runner)
        runner.start()

    def _collect(self, block: float) -> Iterator[EntryResult]:
        """The results of entries that ended, waiting up to `block` seconds for one."""
        try:
            result = self._done.get(timeout=block) if block else self._done.get_nowait()
        except queue.Empty:
            return
        while True:
            _, runner = self._running.pop(result.id)
            runner.join()
            yield self._anchored(self._archived(result))
            try:
                result = self._done.get_nowait()
            except queue.Empty:
                return

    def _archived(self, result: EntryResult) -> EntryResult:
        """Sync the archive after an entry; a failure is said on the entry's result (the
        next sync catches up) rather than stopping the work."""
        if self._archive is None:
            return result
        try:
            self._archive.sync()
        except UwfError as exc:
            return dataclasses.replace(result, archive_error=exc.line())
        return result

    def _anchored(self, result: EntryResult) -> EntryResult:
        """Anchor the log's head after an entry when it grew by `anchor_every` events
        since the last anchor; a failure is said on the result, the work goes on."""
        if self._anchors is None:
            return result
        try:
            written = self._anchors.due()
        except UwfError as exc:
            return dataclasses.replace(result, anchor_error=exc.line())
        return dataclasses.replace(result, anchor=written) if written else result

    def _abandon(self) -> None:
        """The loop is left early (an exception, the generator closed): stop the
        runners and wait for them, so nothing is left leased by a live worker."""
        for held, _ in list(self._running.values()):
            held.interrupt()
        for _, runner in list(self._running.values()):
            runner.join()
        self._running.clear()

    # -- one entry ---------------------------------------------------------------------

    def _runner(self, held: _Held) -> None:
        started = self.monotonic()
        result: EntryResult | None = None
        try:
            self._announce(held)
            result = self._run_entry(held, started)
            try:
                self._announce(held, result.outcome)
            except UwfError as exc:  # the end is recorded: the status is reported unsent,
                held.publish_error = held.publish_error or exc.what  # never the entry lost
            if held.publish_error is not None:
                result = dataclasses.replace(result, publish_error=held.publish_error)
        except BaseException as exc:
            why = f"worker error: {type(exc).__name__}: {exc}"
            try:
                result = self._settle(held, started, why)
            except BaseException:
                result = EntryResult(held.entry_id, held.run, "lost", held.attempt,
                                     round(self.monotonic() - started, 3), why)
        finally:
            # Always a result, so the loop never waits for this entry forever.
            self._done.put(result or EntryResult(held.entry_id, held.run, "lost",
                                                 held.attempt, 0.0, "worker error"))

    def _announce(self, held: _Held, outcome: str | None = None) -> None:
        """Publish the job's status to its MQTT broker, when it has one (docs/mqtt.md):
        `running` when its lease starts, its job status and the outcome when it ends. A
        broker that does not take it never fails the entry: the event is recorded and
        sent again by the job's next publish; the first such error is reported."""
        from uwf.queue import messages
        from uwf.queue.terms import JOB_WORDS

        if held.broker is False:
            return
        entry = self.store.read().get("queue", held.entry_id)
        held.broker = entry is not None and entry.broker is not None
        if entry is None or entry.broker is None:
            return
        event: dict[str, object] = {"type": "status", "status": JOB_WORDS[entry.status],
                                    "attempt": held.attempt}
        if outcome is not None:
            event["outcome"] = outcome
        if entry.status == "waiting" and entry.run is not None:  # what it asks, for a person
            asked = get_thread(self.store.read(), entry.run).asked
            event["question"] = None if asked is None else asked.question
        try:
            messages.publish(self.store.journal, held.entry_id, event, self.settings.environ)
        except UwfError as exc:
            held.publish_error = held.publish_error or exc.what

    def _run_entry(self, held: _Held, started: float) -> EntryResult:
        policy = sched.current_policy(self.store.read())
        interval = max(policy.lease_ttl_ms / 3000, MIN_RENEW_INTERVAL)
        renewer = threading.Thread(target=self._renew, args=(held, interval),
                                   name=f"uwf-renew-{held.entry_id}", daemon=True)
        renewer.start()
        try:
            failure = self._work(held, started)
        except UwfError as exc:
            failure = exc.what
        finally:
            held.finished.set()
            renewer.join()
        return self._settle(held, started, failure)

    def _work(self, held: _Held, started: float) -> str | None:
        """Start or continue the entry's run and step it to its end: None when it
        reached `$END`, else why not."""
        entry = get_entry(self.store.read(), held.entry_id)
        if (refused := self.agent_refusal(entry.agent)) is not None:
            return refused
        if entry.run is not None:
            held.run = entry.run
        else:
            if entry.workflow_hash is None or entry.prompt is None:
                return "the entry names neither a run nor a workflow and prompt"
            held.run = start_thread(self.store, entry.workflow_hash, entry.prompt,
                                    entry.repo, settings=self.settings).thread
        return self._step_to_end(held, entry, held.run, started)

    def agent_refusal(self, agent: str | None) -> str | None:
        """Why an entry's `agent` may not run on this worker (None: it may). An alias of
        the config, or none (the config's agentOverrides and defaultAgent decide), may;
        a command line only with `allow_entry_commands`."""
        aliases = self.config.settings.agents
        if agent is None or agent in aliases or self.options.allow_entry_commands:
            return None
        known = f"aliases: {', '.join(sorted(aliases))}" if aliases else "it has none"
        where = f" ({self.config.path})" if self.config.path is not None else ""
        return (f"the entry's agent {agent!r} is not an agent alias of this worker's "
                f"config{where}; {known}: configure it as one (agents: {{NAME: {{command: "
                "...}}}} in config.yaml) and queue the entry with --agent NAME, or start "
                "the worker with --allow-entry-commands to run entries' commands")

    def _step_to_end(self, held: _Held, entry: QueueEntry, run: str, started: float
                     ) -> str | None:
        taken = 0
        while True:
            state = get_thread(self.store.read(), run)
            if state.done:
                if state.state != "ended":
                    return f"run {run} was killed"
                # $END is not done until the work is there: a missing artifact fails
                # the attempt (backoff or park), its reason naming the file.
                return artifact_failure(entry)
            if waiting.why_resume(state, self.store.clock()) is None:
                return WAITING_REASON  # a question: given back, nothing held meanwhile
            if taken >= self.options.max_steps:
                return f"run {run} took {taken} steps without reaching $END"
            taken += 1
            if held.stopping.is_set():
                return STOPPED_REASON
            if held.lost is not None:
                return held.lost
            left = entry.timeout_sec - (self.monotonic() - started)
            if left <= 0:
                return f"timeout: the entry ran past its timeoutSec ({entry.timeout_sec}s)"
            step_timeout = min(float(entry.idle_timeout_sec), left)
            try:
                step_thread(self.store, run, entry.agent, step_timeout, self.config,
                            on_agent=held.attach, settings=self.settings)
            except UwfError as exc:
                if held.stopping.is_set():
                    return STOPPED_REASON
                if held.lost is not None:
                    return held.lost
                failure = get_thread(self.store.read(), run).last_failure
                if failure is not None and failure.reason == "timeout":
                    if step_timeout < entry.idle_timeout_sec:
                        return (f"timeout: the entry ran past its timeoutSec "
                                f"({entry.timeout_sec}s); its agent was killed")
                    return (f"idle timeout: no step finished within idleTimeoutSec "
                            f"({entry.idle_timeout_sec}s); its agent was killed")
                return exc.what
            finally:
                held.detach()

    def _renew(self, held: _Held, interval: float) -> None:
        """Renew the lease every `interval` seconds until the entry's work is over; a
        refused renewal (the lease expired, was reclaimed or voided) loses the entry."""
        while not held.finished.wait(interval):
            try:
                sched.renew(self.store, held.entry_id, held.lease_id)
            except (Rejected, NotFound) as exc:
                held.interrupt(lost=f"lease lost: {exc.what}")
                return
            except UwfError:  # busy or unavailable: the next renewal may succeed
                continue

    def _settle(self, held: _Held, started: float, failure: str | None) -> EntryResult:
        """Complete, or release (failed unless the worker stopped); a refusal means the
        lease is no longer ours."""
        def result(outcome: Outcome, reason: str | None = None) -> EntryResult:
            return EntryResult(held.entry_id, held.run, outcome, held.attempt,
                               round(self.monotonic() - started, 3), reason)

        if held.lost is not None and failure is not None:
            return result("lost", held.lost)
        try:
            if failure is None:
                sched.complete(self.store, held.entry_id, held.lease_id, run=held.run)
                return result("completed")
            if failure == WAITING_REASON and held.run is not None:
                asked = get_thread(self.store.read(), held.run).asked
                question = "" if asked is None else asked.question
                waiting.wait(self.store.journal, held.entry_id, held.lease_id, held.run, question)
                return result("waiting", question)
            if failure == STOPPED_REASON:
                sched.release(self.store, held.entry_id, held.lease_id, reason=failure,
                              run=held.run)
                return result("released", failure)
            shown = sched.release(self.store, held.entry_id, held.lease_id, failed=True,
                                  reason=failure, run=held.run)
        except UwfError as exc:
            return result("lost", f"{failure or 'completed'}; but {exc.what}")
        return result("parked" if shown.status == "parked" else "failed", failure)
