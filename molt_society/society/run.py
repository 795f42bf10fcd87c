"""``society run``: start the local stack, drive the clock, show live figures, drain, summarise.

While the clock runs, ``society.supervisor.Supervisor`` restarts the pipeline processes that die and says what
is wrong right now (a restart, a broker that does not answer, a barrier waiting for some partitions, a sink
whose inserts fail) on the live display and in ``<run>/run.log``. SIGTERM, SIGINT or SIGHUP stop the society
cleanly (``society.signals.Signals``); a lost local broker, a role that keeps dying or a barrier that times
out stop it with an error that says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from molt_society.agents.clock import Clock
from molt_society.agents.feed_cache import FeedCache
from molt_society.runtime.lag import LagReader
from molt_society.runtime.logs import get_logger
from molt_society.runtime.preflight import check_writable
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.runtime.stack_dump import (
    LoopWatch,
    disable_task_dumps,
    disable_thread_dumps,
    enable_task_dumps,
    enable_thread_dumps,
)
from molt_society.runtime.task_cancel import cancel_and_wait
from molt_society.schemas.control import from_us
from molt_society.society import barrier_wait
from molt_society.society.drive import last_window_start, sink_health, wait_drained
from molt_society.society.fork import ForkPoint, copy_history, fork_point, fork_settings, save_config
from molt_society.society.live import STYLES, Figures, collect, line, render
from molt_society.society.recover import new_generation, replay_history, resume_point
from molt_society.society.signals import SIGNAL_DRAIN_SECONDS, Interrupted, Signals
from molt_society.society.stack import BrokerLost, BrokerLostHook, LocalStack
from molt_society.society.stale_stack import check_no_live_stack
from molt_society.society.supervisor import Supervisor
from molt_society.society.trim import Trimmer, trim_enabled

log = get_logger(__name__)

LOOP_BLOCKED_S = 15.0  # the driver's loop runs every second: held up this long, it is said (with stacks)


@dataclass(frozen=True)
class _Drive:
    """What one drive runs: the started stack (its settings and society), for how long, from which tick."""

    stack: LocalStack
    console: Console
    signals: Signals | None
    ticks: int | None
    duration: float | None
    start_tick: int = 0


class _Driver:
    """One drive of a started stack: the clock, the live display and the watchers of what is wrong, until
    the society drained (or a signal, a lost broker or a role that keeps dying stopped it)."""

    def __init__(self, drive: _Drive) -> None:
        stack, settings, society = drive.stack, drive.stack.settings, drive.stack.society
        self.settings, self.stack, self.society = settings, stack, society
        self.ticks, self.duration, self.console = drive.ticks, drive.duration, drive.console
        self.start_tick, self.signals = drive.start_tick, drive.signals
        ticks, duration, console = drive.ticks, drive.duration, drive.console
        self.stop = asyncio.Event()
        self.abort = asyncio.Event()
        self.journal = stack.journal
        self.supervisor = Supervisor(stack, say=self.say)
        self.feeds = FeedCache(
            stack.bootstrap,
            society,
            settings.partitions,
            settings.feed_size,
            settings.poll_ms,
            keys=RecordKeys(settings.state_dir),
        )
        self.clock = Clock(
            settings, stack.bootstrap, society, self.feeds, on_wait=lambda w: None
        )  # watch() says it
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
            TimeElapsedColumn(),
            console=console,
        )
        self.total = float(ticks) if ticks is not None else float(duration or 0)
        self.task = self.progress.add_task("starting the stack", total=self.total)
        self.began = time.monotonic()
        self.fig = Figures()
        self.last = (time.monotonic(), 0)
        self.notices: list[tuple[str, str]] = []  # (level, text) of what is wrong right now
        self.drained = False
        self.first_tick: float | None = None
        self.loop_blocked: str | None = None  # said while the driver's own event loop was held up
        self.barrier_on: str | None = None  # the workers the waiting barrier waits on (barrier_wait)
        self.lag: LagReader | None = None

    @property
    def signal_name(self) -> str | None:
        return self.signals.name if self.signals else None

    def say(self, level: str, message: str) -> None:
        style = STYLES.get(level, "")
        self.console.print(f"[{style}]{datetime.now():%H:%M:%S} {escape(message)}[/{style}]", highlight=False)

    def on_tick(self, t: int) -> None:
        if self.first_tick is None:
            self.first_tick = time.monotonic()
            self.progress.update(self.task, description="ticks" if self.ticks is not None else "seconds")
        if self.ticks is not None:
            done = float(t + 1 - self.start_tick)
        else:
            done = min(self.total, time.monotonic() - self.first_tick)
        self.progress.update(self.task, completed=done)
        self.supervisor.note_tick(t)
        if t % 10 == 0:
            self.journal("clock.tick", tick=t)

    async def refresh(self, live: Live) -> None:
        """The figures, every second on a terminal; on a log, one line every few seconds."""
        while True:
            try:
                url = self.stack.current_sink_url()
                if url is not None:
                    new = await asyncio.to_thread(collect, url, self.society)
                    now = time.monotonic()
                    new.rate = (new.events - self.last[1]) / max(1e-6, now - self.last[0])
                    self.last = (now, new.events)
                    self.fig = new
                else:  # no sink answers (restarting): nothing is seen stored, not the last rate
                    self.fig.rate = 0.0
                if self.console.is_terminal:
                    live.update(render(self.fig, self.progress, self.society, self.notices))
                else:  # a log, not a screen: one line every few seconds
                    self.console.print(line(self.fig, self.progress.tasks[0], self.notices), highlight=False)
            except Exception as exc:  # the display goes on whatever one refresh met
                log.warning("run.refresh_failed", error=repr(exc))
            await asyncio.sleep(1.0 if self.console.is_terminal else 5.0)

    async def watch(self) -> None:
        """What is wrong right now, for the display; said once (console and run.log) when it starts/ends."""
        barrier_said: int | None = None
        sink_failing = False
        while True:
            try:
                current = [("warning", text) for text in self.supervisor.conditions.values()]
                if self.loop_blocked is not None:
                    current.append(("warning", self.loop_blocked))
                barrier_said = await self._watch_barrier(current, barrier_said)
                sink_failing = await self._watch_sink(current, sink_failing)
                self.notices[:] = current
            except Exception as exc:  # what is wrong is said again at the next look
                log.warning("run.watch_failed", error=repr(exc))
            await asyncio.sleep(1.0)

    async def _watch_barrier(self, current: list[tuple[str, str]], said: int | None) -> int | None:
        """A tick barrier that waits for some partitions, with the workers it waits on; returns the tick said
        to be waiting."""
        waiting = self.clock.waiting
        if waiting is not None:
            if said != waiting.tick or self.barrier_on is None:
                self.barrier_on = await self._waits_on(list(waiting.missing))
            text = f"{waiting.describe()}; {self.barrier_on}"
            current.append(("warning", text))
            if said != waiting.tick:
                said = waiting.tick
                missing = {str(q): t for q, t in waiting.missing.items()}
                self.journal(
                    "clock.barrier_waiting",
                    level="warning",
                    tick=waiting.tick,
                    missing=missing,
                    waiting_on=self.barrier_on,
                )
                self.say("warning", text)
        elif said is not None:
            self.journal("clock.barrier_passed", tick=said)
            self.say("info", f"tick {said} is complete on every partition; the society goes on")
            said = None
            self.barrier_on = None
        return said

    async def _waits_on(self, missing: list[int]) -> str:
        """``barrier_wait``'s account of the workers holding the missing feeds up (bounded: the broker may
        be what is stuck)."""
        workers: dict[str, list[str]] = {}
        for c in getattr(self.stack, "children", []):
            workers.setdefault(c.role, []).append(f"{c.label} (pid {c.process.pid})")
        if self.lag is None:
            self.lag = LagReader(self.stack.bootstrap, self.society, timeout=3.0, client_id="barrier-watch")
        try:
            held = await asyncio.wait_for(barrier_wait.pending(self.lag, self.society, missing), 10.0)
        except Exception as exc:
            return f"the consumer groups' lag did not come ({exc!r})"
        return barrier_wait.describe(held, workers)

    async def _watch_sink(self, current: list[tuple[str, str]], failing_said: bool) -> bool:
        """A sink whose inserts fail; returns whether that was said."""
        url = self.stack.current_sink_url()
        failing = (await asyncio.to_thread(sink_health, url)).get("failing") if url else None
        if isinstance(failing, dict):
            text = (
                f"the sink's inserts have failed for {float(failing.get('seconds') or 0):.0f} s "
                f"({failing.get('attempts')} attempts): {failing.get('error')}"
            )
            current.append(("error", text))
            if not failing_said:
                failing_said = True
                self.journal("sink.failing", level="error", **failing)
                self.say("error", text)
        elif failing_said and url is not None:
            failing_said = False
            self.journal("sink.storing_again")
            self.say("info", "the sink stores again")
        return failing_said

    def _drain_slow(self, text: str) -> None:
        self.journal("drain.waiting", level="warning", text=text)
        self.say("warning", text)

    async def drain(self, final_tick: int) -> None:
        await self.clock.wait_closed(final_tick)
        await wait_drained(
            self.society,
            last_window_start(self.settings, self.clock.end_us),
            self.stack,
            on_slow=self._drain_slow,
        )
        self.drained = True

    async def flow(self) -> int:
        """Start the feeds, run the clock, then drain (at most ``SIGNAL_DRAIN_SECONDS`` when stopped)."""
        await self.stack.wait_sink_url(timeout=120)
        await self.feeds.start()
        self.journal(
            "clock.starting", tick=self.start_tick
        )  # the first tick is published now (bench.startup)
        final_tick = await self.clock.run(
            ticks=None if self.ticks is None else self.start_tick + self.ticks,
            duration=self.duration,
            stop=self.stop,
            on_tick=self.on_tick,
            start_tick=self.start_tick,
        )
        if not self.stop.is_set():
            self.progress.update(self.task, description="draining", completed=self.total)
            await self.drain(final_tick)
            return final_tick
        name = self.signal_name
        self.progress.update(self.task, description=f"draining ({name or 'stopped'})")
        self.journal("run.stopping", signal=name, tick=final_tick)
        self.say(
            "warning",
            f"{name or 'stop'}: the clock stopped at tick {final_tick}; draining "
            f"what was published (at most {SIGNAL_DRAIN_SECONDS:.0f} s; once more to skip) ...",
        )
        try:
            await asyncio.wait_for(self.drain(final_tick), SIGNAL_DRAIN_SECONDS)
        except TimeoutError:
            self.journal("run.drain_cut_short", level="warning", after_s=SIGNAL_DRAIN_SECONDS)
            self.say(
                "warning", f"the drain did not finish within {SIGNAL_DRAIN_SECONDS:.0f} s; stopping anyway"
            )
        return final_tick

    async def run(self) -> dict[str, Any]:
        """Drive until the flow ends, the supervisor gives up or a second signal skips the drain."""
        async with self._stack_dumps():
            return await self._drive()

    async def _drive(self) -> dict[str, Any]:
        if self.signals is not None:
            self.signals.attach(asyncio.get_running_loop(), self.stop, self.abort)
        final_tick = self.start_tick
        with Live(
            render(self.fig, self.progress, self.society, self.notices),
            console=self.console,
            refresh_per_second=4,
            transient=False,
            auto_refresh=self.console.is_terminal,
        ) as live:
            guard = asyncio.create_task(self.supervisor.run())
            tasks = [asyncio.create_task(self.refresh(live)), asyncio.create_task(self.watch())]
            if trim_enabled(self.settings):  # bounded broker memory: delete what every reader has passed
                trimmer = Trimmer.for_settings(self.settings, self.stack.bootstrap, self.society)
                tasks.append(asyncio.create_task(trimmer.run()))
            main_task = asyncio.create_task(self.flow())
            aborter = asyncio.create_task(self.abort.wait())
            try:
                await asyncio.wait([main_task, guard, aborter], return_when=asyncio.FIRST_COMPLETED)
                if guard.done():
                    guard.result()  # raises why the stack cannot go on
                if main_task.done():
                    final_tick = main_task.result()
                else:
                    self.journal("run.drain_skipped", level="warning", signal=self.signal_name)
                    self.say("warning", "signalled again: skipping the drain")
                    final_tick = max(self.start_tick, self.clock.tick + 1)
            finally:
                await self._wind_down(live, [*tasks, guard, main_task, aborter])
        return {
            "ticks": final_tick - self.start_tick,
            "seconds": time.monotonic() - self.began,
            "events": self.fig.events,
            "end_us": self.clock.end_us,
            "interrupted": self.signal_name,
            "drained": self.drained,
            "restarts": dict(self.stack.restarts),
        }

    @contextlib.asynccontextmanager
    async def _stack_dumps(self) -> AsyncIterator[None]:
        """While the driver runs: ``kill -USR1`` writes its threads' stacks and ``kill -USR2`` its asyncio
        tasks' stacks to ``<run>/driver.log``; a loop held up for ``LOOP_BLOCKED_S`` is said, with stacks."""
        loop = asyncio.get_running_loop()
        path = self.stack.run_dir / "driver.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", buffering=1) as dump:
            threads = enable_thread_dumps(dump)
            enable_task_dumps(loop, lambda text: self._dump(dump, text))

            def blocked(seconds: float, stacks: str) -> None:  # from the watch's thread
                self.loop_blocked = f"the driver's event loop has been held up for {seconds:.0f} s"
                self.journal("driver.loop_blocked", level="warning", seconds=round(seconds, 1))
                self.say("warning", f"{self.loop_blocked} (stacks in {path})")  # the display is stuck too
                self._dump(dump, f"--- the event loop has not run for {seconds:.1f} s ---\n{stacks}")

            def running(seconds: float) -> None:
                self.loop_blocked = None
                self.journal("driver.loop_running_again", after_s=round(seconds, 1))
                self.say("info", f"the driver's event loop runs again, after {seconds:.0f} s")

            watch = LoopWatch(LOOP_BLOCKED_S, blocked, running)
            watch.start()
            try:
                yield
            finally:
                await watch.stop()
                disable_task_dumps(loop)
                if threads:
                    disable_thread_dumps()

    @staticmethod
    def _dump(dump: TextIO, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            dump.write(f"{datetime.now():%Y-%m-%d %H:%M:%S} {text}\n")
            dump.flush()

    async def _wind_down(self, live: Live, tasks: list[asyncio.Task[Any]]) -> None:
        """Cancel the drive's tasks, show the final figures, stop the feeds."""
        if self.signals is not None:
            self.signals.stopping = True  # from here on the stack stops anyway
            self.signals.detach()
        await cancel_and_wait(*tasks)
        url = self.stack.current_sink_url()
        if url is not None:
            self.fig = await asyncio.to_thread(collect, url, self.society)
        self.fig.rate = self.fig.events / max(1e-6, time.monotonic() - self.began)
        live.update(render(self.fig, self.progress, self.society, self.notices if not self.drained else []))
        with contextlib.suppress(Exception):
            await self.feeds.stop()
        if self.lag is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.lag.close(), 5.0)


class _KafkaLogs:
    """While the driver runs its clock, aiokafka's own complaints (a stalled or lost broker makes it log
    every retry) go to ``<run>/driver.log``: the console says what happened in the run's own words."""

    NAMES = ("aiokafka", "kafka")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handler: logging.Handler | None = None

    def __enter__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handler = logging.FileHandler(self.path)
        self._handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        for name in self.NAMES:
            logger = logging.getLogger(name)
            logger.addHandler(self._handler)
            logger.propagate = False

    def __exit__(self, *exc: object) -> None:
        for name in self.NAMES:
            logger = logging.getLogger(name)
            if self._handler is not None:
                logger.removeHandler(self._handler)
            logger.propagate = True
        if self._handler is not None:
            self._handler.close()


def _announce_dashboard(stack: LocalStack, console: Console) -> None:
    """Say the dashboard's URL once it listens, from a thread: the clock does not wait for the dashboard to
    start (1-2 s of the start-up when the workers join their groups quickly; BENCHMARKS.md, start-up)."""

    def say() -> None:
        url = stack.dashboard_url()
        console.print(
            f"[bold]dashboard[/bold] {url}" if url else f"the dashboard did not start; see {stack.run_dir}"
        )

    threading.Thread(target=say, name="dashboard-url", daemon=True).start()


def _starting_point(
    settings: Settings,
    society: str,
    *,
    fork_from: str | None,
    fork_at: datetime | int | None,
    resume: bool,
    ticks: int | None,
    duration: float | None,
) -> tuple[Settings, ForkPoint | None, int | None, str | None]:
    """The settings, fork or resume point and ticks of a run that forks ``fork_from`` or resumes itself,
    and the society whose history it copies first (``fork_from``, or the source of a fork whose copy a
    killed driver left unfinished: resumed, it copies again on new topics; ``sinks.resume`` skips what the
    first copy stored)."""
    if fork_from is not None:
        settings, cfg = fork_settings(settings, fork_from, None)
        return settings, fork_point(settings, fork_at, cfg.get("end_us")), ticks, fork_from
    if not resume:
        return settings, None, ticks, None
    settings, cfg = fork_settings(settings, society, None)
    if cfg.get("forked_from") and cfg.get("fork_copied") is False:
        point = ForkPoint(int(cfg["fork_tick"]), int(cfg["fork_at_us"]))
        settings = settings.model_copy(
            update={"generation": int(cfg.get("generation") or 0) + 1, "resume_us": None}
        )
        if ticks is None and duration is None:
            ticks = max(0, int(cfg.get("end_tick") or point.tick) - point.tick)
        return settings, point, ticks, str(cfg["forked_from"])
    settings = settings.model_copy(
        update={"generation": int(cfg.get("generation") or 0), "resume_us": cfg.get("resume_us")}
    )
    point = resume_point(settings, society)
    settings = new_generation(settings, point)
    if ticks is None and duration is None:
        ticks = max(0, int(cfg.get("end_tick") or point.tick) - point.tick)
    return settings, point, ticks, None


def _replay_before(
    settings: Settings,
    stack: LocalStack,
    society: str,
    console: Console,
    point: ForkPoint | None,
    *,
    fork_from: str | None,
    resume: bool,
    ticks: int | None,
) -> int:
    """Rebuild a resumed society, or copy a fork's history, before the clock runs; the tick it starts at.

    A fork records that its copy is under way (``fork_copied`` false, with the fork point, the topics'
    generation and the tick it runs to) before copying, and that it is done after: a driver killed
    in between is resumed by copying again (``_starting_point``)."""
    if fork_from is not None and point is not None:
        stack.sink_url()
        fork = {"forked_from": fork_from, "fork_at_us": point.at_us, "fork_tick": point.tick}
        until = {} if ticks is None else {"end_tick": point.tick + ticks}
        save_config(settings, society, **fork, fork_copied=False, generation=settings.generation, **until)
        again = " again" if resume else ""
        console.print(
            f"copying the history of {fork_from} before {from_us(point.at_us).isoformat()}{again} ..."
        )
        copied = asyncio.run(copy_history(settings, stack.bootstrap, fork_from, society, point))
        console.print(f"copied {copied:,} events; continuing live from tick {point.tick}")
        save_config(settings, society, **fork, fork_copied=True)
        if resume:
            stack.journal("run.resumed", tick=point.tick, generation=settings.generation, history=copied)
        return point.tick
    if resume and point is not None:
        stack.sink_url()
        console.print(
            f"rebuilding {society} from ClickHouse: history before tick {point.tick} "
            f"({from_us(point.at_us).isoformat()}), topics of generation {settings.generation} ..."
        )
        copied = asyncio.run(replay_history(settings, stack.bootstrap, society, point))
        save_config(settings, society, generation=settings.generation, resume_us=point.at_us)
        console.print(f"replayed {copied:,} events; continuing live from tick {point.tick}")
        stack.journal("run.resumed", tick=point.tick, generation=settings.generation, history=copied)
        return point.tick
    return 0


def _drive_to_end(drive: _Drive, on_broker_lost: BrokerLostHook | None) -> dict[str, Any]:
    """Drive the clock from ``start_tick``; a lost broker is rebuilt by ``on_broker_lost`` (if given) and
    the clock goes on from the tick it returns. The summary of ``_Driver.run``, counting every tick run."""
    stack, console, society, first_tick = drive.stack, drive.console, drive.stack.society, drive.start_tick
    end_tick = None if drive.ticks is None else first_tick + drive.ticks
    if end_tick is not None:  # what a resumed run goes on to
        save_config(stack.settings, society, end_tick=end_tick)
    kafka_logs = _KafkaLogs(stack.run_dir / "driver.log")

    async def run() -> dict[str, Any]:  # the driver's events and tasks belong to the loop that runs it
        return await _Driver(drive).run()

    while True:
        try:
            with kafka_logs:
                summary = asyncio.run(run())
            break
        except BrokerLost as lost:
            if on_broker_lost is None:
                raise
            # the seam for rebuilding the society from ClickHouse: a new broker, topics and children
            if drive.signals is not None:
                drive.signals.stopping = False
            stack.journal("run.broker_lost_hook", error=str(lost))
            console.print("rebuilding the society from what ClickHouse holds ...", highlight=False)
            start_tick = on_broker_lost(stack, lost)
            settings = stack.settings
            save_config(settings, society, generation=settings.generation, resume_us=settings.resume_us)
            ticks = None if drive.ticks is None else max(0, first_tick + drive.ticks - start_tick)
            drive = replace(drive, ticks=ticks, start_tick=start_tick)
            stack.journal("run.continues", tick=start_tick, bootstrap=stack.bootstrap)
            console.print(f"the society continues at tick {start_tick} on {stack.bootstrap}")
    summary["ticks"] += drive.start_tick - first_tick
    summary["end_tick"] = end_tick
    if summary["end_us"]:
        save_config(stack.settings, society, end_us=summary["end_us"])
    return summary


def _stop_stack(stack: LocalStack, console: Console, *, broker_lost: bool, interrupted: str | None) -> None:
    if broker_lost:  # nothing can be committed any more: all at once, and not for long
        console.print("stopping every process of the society ...", highlight=False)
        stack.stop(timeout=10.0, together=True)
    else:
        stack.stop()
    stack.journal("run.stopped", interrupted=interrupted)


def run_society(
    settings: Settings,
    *,
    society: str,
    ticks: int | None,
    duration: float | None,
    stream_workers: int,
    agent_workers: int,
    console: Console | None = None,
    fork_from: str | None = None,
    fork_at: datetime | int | None = None,
    dashboard: bool = False,
    on_broker_lost: BrokerLostHook | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Run a society on the local stack and return a summary; the stack is stopped afterwards.

    With ``fork_from`` the society starts from the history of another (see ``society.fork``). A stale
    stack of a dead driver in the same state directory is cleared first (and said); a live one is refused
    (``StackBusy``). While it runs, a ``Supervisor`` restarts what dies; ``StackFailed`` (``BrokerLost``)
    or ``BarrierTimeout`` stop it. SIGTERM, SIGINT or SIGHUP stop it cleanly: the summary's
    ``interrupted`` names the signal. A lost local broker stops the run with ``BrokerLost`` unless
    ``on_broker_lost`` is given (``society.stack.BrokerLostHook``): it is then called with the stack,
    outside any event loop, and the clock continues from the tick it returns.

    ``resume``: ``society`` ran before and its driver died (or its stack was lost): it is rebuilt from what
    ClickHouse holds on new topics (``society.recover``) and continues to the tick it was to reach.
    """
    console = console or Console()
    check_writable(settings.state_dir, "state folder (SOCIETY_STATE_DIR)")
    if settings.chdb_path is not None:
        check_writable(settings.chdb_path, "ClickHouse folder (CLICKHOUSE_URL)")
    stale = check_no_live_stack(settings)
    if stale is not None:
        console.print(f"[yellow]{escape(stale.describe())}[/yellow]", highlight=False)
    settings, point, ticks, fork_from = _starting_point(
        settings, society, fork_from=fork_from, fork_at=fork_at, resume=resume, ticks=ticks, duration=duration
    )
    stack = LocalStack(settings, society, stream_workers=stream_workers, agent_workers=agent_workers)
    console.print(
        f"[bold]society[/bold] {society}: {settings.agents:,} agents, seed {settings.seed}, "
        f"mode {settings.mode}, {stream_workers} stream worker(s), {agent_workers} agent worker(s); "
        f"ClickHouse {settings.clickhouse_url}"
    )
    signals = Signals()
    signals.install()
    summary: dict[str, Any] = {}
    broker_lost = False
    try:
        stack.start(dashboard=dashboard)
        save_config(settings, society)
        console.print(f"broker {stack.bootstrap}; logs in {stack.run_dir} (supervision: run.log)")
        if dashboard:
            _announce_dashboard(stack, console)
        start_tick = _replay_before(
            settings, stack, society, console, point, fork_from=fork_from, resume=resume, ticks=ticks
        )
        summary = _drive_to_end(_Drive(stack, console, signals, ticks, duration, start_tick), on_broker_lost)
    except Interrupted as exc:
        stack.journal("run.interrupted", level="warning", signal=signals.name, before="the clock ran")
        console.print(f"[yellow]{exc} before the clock ran; stopping the stack[/yellow]", highlight=False)
        summary = {"ticks": 0, "seconds": 0.0, "events": 0, "end_us": 0, "interrupted": signals.name}
        summary.update(drained=False, restarts=dict(stack.restarts))
    except BrokerLost:
        broker_lost = True
        raise
    finally:
        signals.stopping = True
        try:
            _stop_stack(stack, console, broker_lost=broker_lost, interrupted=summary.get("interrupted"))
        finally:
            signals.restore()
    return summary
