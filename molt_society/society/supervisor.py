"""The supervision of a running stack: ``Supervisor`` (run by ``society run``) watches the children and the
broker: a pipeline child that exits is reported (role, pid, exit code or signal, the last error line of its
log) and restarted with backoff, until one role restarts ``restart_limit`` times within
``restart_window_seconds``; a broker that does not answer is reported while it lasts; a local broker whose
process exited is lost with its in-memory topics (``BrokerLost``; ``society.run.run_society`` takes an
``on_broker_lost`` hook to rebuild it instead). What the supervision sees and does goes to ``<run>/run.log``
(``society.stack.Journal``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from molt_society.runtime.apache_kafka import KafkaBroker
from molt_society.runtime.broker import broker_silence
from molt_society.runtime.logs import get_logger
from molt_society.runtime.process_status import forget_status, read_status
from molt_society.runtime.task_cancel import cancel_and_wait
from molt_society.society.liveness import Liveness
from molt_society.society.stack import (
    SUPERVISED,
    BrokerLost,
    Child,
    LocalStack,
    StackFailed,
    describe_exit,
    last_error_line,
)

log = get_logger(__name__)


@dataclass
class _Down:
    child: Child
    code: int
    exited_at: float  # wall time it was noticed
    restart_at: float  # monotonic
    attempt: int


@dataclass
class _Recovering:
    child: Child
    exited_at: float
    restarted_at: float


class Supervisor:
    """Keeps a running stack's pipeline going (see the module docstring).

    ``run`` returns only by raising ``StackFailed`` (``BrokerLost`` for a lost local broker); cancel it to
    stop supervising, before ``LocalStack.stop``. ``conditions`` holds what is wrong right now (for the
    live display); ``say(level, message)`` is told every event once. Spawns happen on the event loop's
    thread, which must be the main thread (see ``runtime.broker.child_preexec``)."""

    POLL_S = 0.5
    PROBE_S = 1.0
    PROBE_TIMEOUT_S = 2.0
    HEARTBEAT_S = 2.0
    MAX_BACKOFF_S = 10.0
    RENEW_KILL_S = 15.0  # a process told to renew its clients that has not exited by then is killed

    def __init__(self, stack: LocalStack, say: Callable[[str, str], None] | None = None) -> None:
        s = stack.settings
        self.stack = stack
        self.say = say or (lambda level, message: None)
        self.limit = s.restart_limit
        self.window = s.restart_window_seconds
        self.stall_after = s.broker_stall_seconds
        self.conditions: dict[str, str] = {}
        self.history: dict[str, deque[float]] = {}
        self.down: dict[int, _Down] = {}  # by the pid of the process that exited
        self.recovering: dict[int, _Recovering] = {}  # by the pid of the new process, until it is ready
        self.awaiting_tick: list[tuple[str, float]] = []  # (what, since when) to be resolved by a tick
        self.broker_silent_since: float | None = None
        self._stall_said = False
        self._renew_after: float | None = None  # a restarted Kafka: renew the clients once it answers
        self._renewing: dict[int, float] = {}  # pid -> when it is killed if it has not exited
        self.liveness = Liveness(stack.run_dir, s.child_silence_seconds, s.child_stall_seconds)

    async def run(self) -> None:
        self.stack.supervised = True
        prober = asyncio.create_task(self._watch_broker())
        beat = 0.0
        try:
            while True:
                self._check_broker_process()
                self._check_children()
                self._check_liveness()
                self._restart_due()
                await self._check_ready()
                if time.monotonic() - beat >= self.HEARTBEAT_S:
                    self.stack.heartbeat()
                    beat = time.monotonic()
                if prober.done():
                    prober.result()
                await asyncio.sleep(self.POLL_S)
        finally:
            await cancel_and_wait(prober)  # a cancel the probe's wait_for swallowed left it looping for ever
            self.stack.supervised = False

    # ----------------------------------------------------------------------------------- the broker
    def _check_broker_process(self) -> None:
        broker = self.stack.broker
        if broker is None or (code := broker.exited()) is None:
            return
        if isinstance(broker, KafkaBroker) and self._restart_kafka(broker, code):
            return
        lost = BrokerLost(self.stack.bootstrap, broker.pid, code, time.time(), self.stack.settings.broker)
        self.stack.journal(
            "broker.lost", level="error", bootstrap=lost.bootstrap, pid=lost.pid, status=describe_exit(code)
        )
        self.say("error", str(lost))
        raise lost

    def _restart_kafka(self, broker: KafkaBroker, code: int) -> bool:
        """Start a local Apache Kafka that exited again, on its own log and ports: its topics and every
        record it acknowledged are on disk, the children's clients reconnect to the same address, and the
        society goes on from the log (nothing regenerated). False once it exited ``restart_limit`` times
        within the restart window: it is then lost like Tansu."""
        mono = time.monotonic()
        history = self.history.setdefault("broker", deque())
        while history and mono - history[0] > self.window:
            history.popleft()
        status = describe_exit(code)
        if len(history) >= self.limit:
            self.stack.journal(
                "broker.gave_up", level="error", pid=broker.pid, status=status, restarts=len(history)
            )
            return False
        history.append(mono)
        new = broker.respawn()
        self.stack.broker = new
        self.stack.write_state()
        self.stack.journal(
            "broker.restarted",
            level="warning",
            previous_pid=broker.pid,
            pid=new.pid,
            status=status,
            attempt=len(history),
        )
        self.say(
            "warning",
            f"the broker at {new.bootstrap} (Apache Kafka, pid {broker.pid}) {status}; restarted it on its "
            f"log as pid {new.pid}: the topics are kept and the society goes on from them",
        )
        self.conditions["broker"] = f"the broker (Apache Kafka) {status}; restarted as pid {new.pid}"
        self.awaiting_tick.append(("broker restart", time.time()))
        self._renew_after = time.time()
        return True

    def _renew_clients(self) -> None:
        """Stop (SIGTERM) every pipeline process whose Kafka clients lived through the broker's restart;
        the supervision restarts each, and it rebuilds its state from the topics as after any restart. An
        agent worker's clients could otherwise hang on a connection the old broker left half-open, its tick
        never coming (seen with aiokafka 0.14 and Kafka 4.1)."""
        renewed = []
        for child in self.stack.children:
            if child.role in ("sinks", "streams", "agents") and child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.terminate()
                self._renewing[child.process.pid] = time.monotonic() + self.RENEW_KILL_S
                renewed.append(f"{child.label} (pid {child.process.pid})")
        self.stack.journal("broker.clients_renewed", processes=renewed)
        if renewed:
            self.say("info", "the restarted broker answers: restarting " + ", ".join(renewed) + " on it")

    async def _watch_broker(self) -> None:
        while True:
            bootstrap = self.stack.bootstrap
            began = time.time()
            error = await broker_silence(bootstrap, self.PROBE_TIMEOUT_S)
            now = time.time()
            if error is None:
                if self._renew_after is not None and began > self._renew_after:
                    self._renew_after = None
                    self._renew_clients()
                if self._stall_said and self.broker_silent_since is not None:
                    after = now - self.broker_silent_since
                    self.stack.journal("broker.answering_again", bootstrap=bootstrap, after_s=round(after, 1))
                    self.say(
                        "info", f"the broker at {bootstrap} answers again, after {after:.0f} s of silence"
                    )
                    self.awaiting_tick.append(("broker stall", self.broker_silent_since))
                self.broker_silent_since, self._stall_said = None, False
                self.conditions.pop("broker", None)
            else:
                if self.broker_silent_since is None:
                    self.broker_silent_since = began
                silent = now - self.broker_silent_since
                if silent >= self.stall_after:
                    message = f"the broker at {bootstrap} has not answered for {silent:.0f} s ({error})"
                    self.conditions["broker"] = message
                    if not self._stall_said:
                        self._stall_said = True
                        self.stack.journal(
                            "broker.not_answering",
                            level="warning",
                            bootstrap=bootstrap,
                            since=round(self.broker_silent_since, 3),
                            error=error,
                        )
                        self.say("warning", message)
            await asyncio.sleep(max(0.0, self.PROBE_S - (time.time() - began)))

    # ---------------------------------------------------------------------------------- the children
    def _check_children(self) -> None:
        self._kill_stuck_renewals()
        for child in list(self.stack.children):
            if child.role not in SUPERVISED or child.process.pid in self.down:
                continue
            code = child.process.poll()
            if code is not None:
                self._on_exit(child, code)

    def _kill_stuck_renewals(self) -> None:
        """SIGKILL a process told to renew its clients (``_renew_clients``) that is still stopping after
        ``RENEW_KILL_S``: its stop can wait for ever on a group coordinator of the old broker (seen: a
        stream worker in aiokafka's ``GroupCoordinator.close`` for 4 minutes, the barrier waiting on it)."""
        if not self._renewing:
            return
        now = time.monotonic()
        for child in self.stack.children:
            pid = child.process.pid
            deadline = self._renewing.get(pid)
            if deadline is None:
                continue
            if child.process.poll() is not None:
                self._renewing.pop(pid)
            elif now > deadline:
                self._renewing.pop(pid)
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()
                self.stack.journal("broker.renew_killed", level="warning", role=child.role, pid=pid)
                self.say(
                    "warning",
                    f"{child.label} (pid {pid}) did not stop within {self.RENEW_KILL_S:.0f} s; killed",
                )
        live = {c.process.pid for c in self.stack.children}
        for pid in [p for p in self._renewing if p not in live]:
            self._renewing.pop(pid)

    def window_for(self, role: str) -> float:
        """The window of ``restart_limit``. A sink whose inserts fail exits after ``sink_fail_seconds``
        each time: its window stretches so that a ClickHouse that stays broken still stops the run."""
        if role == "sinks":
            return max(self.window, self.limit * (self.stack.settings.sink_fail_seconds + 10))
        return self.window

    def _on_exit(self, child: Child, code: int) -> None:
        now, mono = time.time(), time.monotonic()
        pid = child.process.pid
        window = self.window_for(child.role)
        history = self.history.setdefault(child.role, deque())
        while history and mono - history[0] > window:
            history.popleft()
        self.recovering.pop(pid, None)
        forget_status(self.stack.run_dir, child.role, pid)
        self.conditions.pop(f"silent:{child.role}:{child.index}", None)
        error = last_error_line(child.log_path)
        status = describe_exit(code)
        said_error = f"; its last error: {error}" if error else ""
        facts = {"role": child.role, "pid": pid, "status": status, "error": error, "log": str(child.log_path)}
        if len(history) >= self.limit:
            restarts = len(history)
            self.stack.journal("stack.gave_up", level="error", **facts, restarts=restarts, window_s=window)
            raise StackFailed(
                f"{child.label} (pid {pid}) {status}{said_error}. It was restarted {len(history)} times "
                f"within {window:.0f} s, so the run stops. Its log: {child.log_path}"
            )
        history.append(mono)
        backoff = min(self.MAX_BACKOFF_S, 0.5 * 2 ** (len(history) - 1))
        more = {"exit_code": code, "restart_in_s": backoff, "attempt": len(history)}
        self.stack.journal("stack.child_exited", level="warning", **facts, **more)
        self.say(
            "warning",
            f"{child.label} (pid {pid}) {status}{said_error}; restarting it in {backoff:.1f} s "
            f"(restart {len(history)} of at most {self.limit} in {window:.0f} s; log {child.log_path})",
        )
        self.conditions[f"child:{child.role}:{child.index}"] = (
            f"{child.label} (pid {pid}) {status}; restarting it"
        )
        self.down[pid] = _Down(child, code, now, mono + backoff, len(history))

    def _restart_due(self) -> None:
        for pid, down in list(self.down.items()):
            if time.monotonic() < down.restart_at:
                continue
            del self.down[pid]
            old = down.child
            new = self.stack.respawn(old, reason=describe_exit(down.code))
            now = time.time()
            self.stack.journal(
                "stack.child_restarted",
                role=new.role,
                previous_pid=pid,
                pid=new.process.pid,
                attempt=down.attempt,
                after_exit_s=round(now - down.exited_at, 2),
            )
            self.say("info", f"restarted {new.label} as pid {new.process.pid}")
            self.conditions[f"child:{new.role}:{new.index}"] = (
                f"{new.label} restarted as pid {new.process.pid}; waiting for it to work"
            )
            rec = _Recovering(new, down.exited_at, now)
            self.recovering[new.process.pid] = rec
            self.awaiting_tick.append((new.role, down.exited_at))

    async def _check_ready(self) -> None:
        for pid, rec in list(self.recovering.items()):
            if rec.child.process.poll() is not None:
                del self.recovering[pid]  # died again: _check_children reports it
                continue
            where = await asyncio.to_thread(self._is_ready, rec)
            if where is not None:
                del self.recovering[pid]
                now = time.time()
                self.stack.journal(
                    "stack.child_ready",
                    role=rec.child.role,
                    pid=pid,
                    after_exit_s=round(now - rec.exited_at, 2),
                    after_restart_s=round(now - rec.restarted_at, 2),
                )
                self.say(
                    "info",
                    f"{rec.child.label} (pid {pid}) works again, {now - rec.exited_at:.1f} s after it "
                    f"died{where}",
                )
                self.conditions.pop(f"child:{rec.child.role}:{rec.child.index}", None)

    def _is_ready(self, rec: _Recovering) -> str | None:
        """None while the restarted child does not work yet (its status file says when it does); else
        what to add to "works again"."""
        status = read_status(self.stack.run_dir, rec.child.role, rec.child.process.pid)
        if status is None or status.ready is None:
            return None
        url = status.ready_detail.get("url")
        return f" ({url})" if rec.child.role == "dashboard" and url else ""

    # --------------------------------------------------------------------------------- liveness
    def _check_liveness(self) -> None:
        """Children whose status file stopped beating: said while silent, killed once stalled (their exit is
        then handled as any other: restarted with backoff)."""
        supervised = [c for c in self.stack.children if c.role in SUPERVISED]
        for change in self.liveness.check(supervised, time.time()):
            child, pid, silent = change.child, change.child.process.pid, round(change.silent_s, 1)
            key = f"silent:{child.role}:{child.index}"
            if change.kind == "silent":
                message = (
                    f"{child.label} (pid {pid}) has not beaten for {silent:.0f} s (its event loop does not "
                    f"turn); it is killed and restarted at {self.liveness.stall_s:.0f} s"
                )
                self.conditions[key] = message
                self.stack.journal(
                    "stack.child_silent", level="warning", role=child.role, pid=pid, silent_s=silent
                )
                self.say("warning", message)
            elif change.kind == "beats_again":
                self.conditions.pop(key, None)
                self.stack.journal("stack.child_beats_again", role=child.role, pid=pid, silent_s=silent)
                self.say("info", f"{child.label} (pid {pid}) beats again after {silent:.0f} s of silence")
            else:
                self.conditions.pop(key, None)
                self.stack.journal(
                    "stack.child_stalled", level="warning", role=child.role, pid=pid, silent_s=silent
                )
                self.say("warning", f"{child.label} (pid {pid}) has not beaten for {silent:.0f} s: killed")
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()

    def note_tick(self, tick: int) -> None:
        """The clock completed ``tick``: the society runs again after the restarts or broker stall since
        the previous tick (journaled as ``society.resumed``, with the seconds since the first of them)."""
        if not self.awaiting_tick:
            return
        now = time.time()
        self.stack.journal(
            "society.resumed",
            tick=tick,
            after=sorted({what for what, _ in self.awaiting_tick}),
            after_s=round(now - min(since for _, since in self.awaiting_tick), 2),
        )
        self.awaiting_tick.clear()
