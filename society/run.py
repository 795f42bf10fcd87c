"""``society run``: start the local stack, drive the clock, show live figures, drain, summarise.

While the clock runs, a ``society.stack.Supervisor`` restarts the pipeline processes that die and says what
is wrong right now (a restart, a broker that does not answer, a barrier waiting for some partitions, a sink
whose inserts fail) on the live display and in ``<run>/run.log``. SIGTERM, SIGINT or SIGHUP stop the society
cleanly (``Signals``); a lost local broker, a role that keeps dying or a barrier that times out stop it with
an error that says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from molt_society.agents.clock import Clock
from molt_society.agents.feed_cache import FeedCache
from molt_society.runtime.broker import partition_count
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.control import from_us
from molt_society.schemas.topics import Role, topic_name
from molt_society.society.fork import copy_history, fork_point, fork_settings, save_config
from molt_society.society.recover import new_generation, replay_history, resume_point
from molt_society.society.stack import BrokerLost, BrokerLostHook, LocalStack, Supervisor, check_no_live_stack
from molt_society.society.trim import Trimmer, trim_enabled
from molt_society.warehouse import QueryError, Result
from molt_society.warehouse.sink_http import query_http

log = get_logger(__name__)

LIVE_METRICS = (
    ("share_no_comment", "", "posts without a comment"),
    ("mean_depth", "commented", "mean thread depth (commented posts)"),
    ("thread_comments_powerlaw", "alpha", "thread size (comments) power-law alpha"),
    ("pagerank_top_share", "top10", "PageRank share of the top 10"),
    ("topk_churn", "", "top-10 churn vs previous window"),
    ("active_agents", "", "active agents (last window)"),
)


@dataclass
class Figures:
    events: int = 0
    dead_letters: int = 0
    windows: int = 0
    rate: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    by_type: dict[str, int] = field(default_factory=dict)


def _q(url: str, sql: str) -> Result | None:
    try:
        return query_http(url, sql, timeout=10)
    except (QueryError, OSError):
        return None


def collect(url: str, society: str) -> Figures:
    f = Figures()
    s = society.replace("'", "")
    r = _q(url, f"SELECT type, count() FROM events WHERE society = '{s}' GROUP BY type ORDER BY type")
    if r:
        f.by_type = {str(t): int(n) for t, n in r.rows}
        f.events = sum(f.by_type.values())
    r = _q(url, f"SELECT count() FROM dead_letters WHERE society = '{s}'")
    if r and r.rows:
        f.dead_letters = int(r.rows[0][0])
    r = _q(
        url,
        "SELECT metric, dim, argMax(value, window_start), uniqExact(window_start) FROM metrics "
        f"WHERE society = '{s}' GROUP BY metric, dim",
    )
    if r:
        for metric, dim, value, windows in r.rows:
            f.metrics[f"{metric}|{dim}"] = float(value)
            if metric == "events_total":
                f.windows = int(windows)
    return f


def line(fig: Figures, task: Any, notices: list[tuple[str, str]] | None = None) -> str:
    """One-line progress for logs, with what is wrong right now."""
    parts = [f"{task.description} {task.completed:,.0f}/{task.total:,.0f}", f"events {fig.events:,}"]
    parts.append(f"{fig.rate:,.0f}/s")
    parts.append(f"dead letters {fig.dead_letters:,}")
    parts.append(f"windows {fig.windows}")
    for metric, dim, label in LIVE_METRICS[:4]:
        v = fig.metrics.get(f"{metric}|{dim}")
        if v is not None:
            parts.append(f"{label} {v:.3f}")
    parts.extend(f"{level.upper()}: {text}" for level, text in notices or ())
    return " | ".join(parts)


def render(
    fig: Figures, progress: Progress, society: str, notices: list[tuple[str, str]] | None = None
) -> Group:
    """The live display: progress, what is wrong right now (restarts, a silent broker, a waiting barrier,
    a failing sink), then the figures."""
    t = Table(title=f"society {society}", show_header=True, header_style="bold")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_row("events in ClickHouse", f"{fig.events:,}")
    t.add_row("events/s (into ClickHouse)", f"{fig.rate:,.0f}")
    for etype, n in sorted(fig.by_type.items()):
        t.add_row(f"  {etype}", f"{n:,}")
    t.add_row("dead letters", f"{fig.dead_letters:,}")
    t.add_row("closed metric windows", f"{fig.windows:,}")
    for metric, dim, label in LIVE_METRICS:
        v = fig.metrics.get(f"{metric}|{dim}")
        t.add_row(label, "-" if v is None else f"{v:.3f}")
    alerts = [Text(f"! {text}", style=_STYLES.get(level, "")) for level, text in notices or ()]
    return Group(progress, *alerts, t)


class Interrupted(Exception):
    """``society run`` got SIGTERM, SIGINT or SIGHUP before its clock ran (while the stack started)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


class Signals:
    """SIGTERM, SIGINT and SIGHUP of ``society run``. The first stops the society cleanly: the clock stops,
    what was published is drained (at most ``SIGNAL_DRAIN_SECONDS``), the sink flushes and commits, every
    child and the broker stop. A second one skips the drain. Before the clock runs, a signal raises
    ``Interrupted`` (the stack is then stopped the same way); while the stack stops, signals are ignored."""

    HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: int | None = None
        self.count = 0
        self.stopping = False
        self._previous: dict[int, Any] = {}
        self._target: tuple[asyncio.AbstractEventLoop, asyncio.Event, asyncio.Event] | None = None

    @property
    def name(self) -> str | None:
        return None if self.received is None else signal.Signals(self.received).name

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self.HANDLED:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def attach(self, loop: asyncio.AbstractEventLoop, stop: asyncio.Event, abort: asyncio.Event) -> None:
        """From now on a signal sets ``stop`` (the first) or ``abort`` (the next) on ``loop``."""
        self._target = (loop, stop, abort)
        if self.count:
            loop.call_soon_threadsafe(stop.set)

    def detach(self) -> None:
        self._target = None

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.received is None:
            self.received = signum
        if self._target is not None:
            loop, stop, abort = self._target
            loop.call_soon_threadsafe((stop if self.count == 1 else abort).set)
            return
        if not self.stopping:
            raise Interrupted(signum)


SIGNAL_DRAIN_SECONDS = 60.0
_STYLES = {"error": "bold red", "warning": "yellow", "info": "green"}


async def _drive(
    settings: Settings,
    stack: LocalStack,
    society: str,
    ticks: int | None,
    duration: float | None,
    console: Console,
    start_tick: int = 0,
    signals: Signals | None = None,
) -> dict[str, Any]:
    stop = asyncio.Event()
    abort = asyncio.Event()
    if signals is not None:
        signals.attach(asyncio.get_running_loop(), stop, abort)
    journal = stack.journal

    def say(level: str, message: str) -> None:
        style = _STYLES.get(level, "")
        console.print(f"[{style}]{datetime.now():%H:%M:%S} {escape(message)}[/{style}]", highlight=False)

    supervisor = Supervisor(stack, say=say)
    feeds = FeedCache(stack.bootstrap, society, settings.partitions, settings.feed_size, settings.poll_ms)
    clock = Clock(settings, stack.bootstrap, society, feeds, on_wait=lambda w: None)  # watch() says it
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
        TimeElapsedColumn(),
        console=console,
    )
    total = float(ticks) if ticks is not None else float(duration or 0)
    task = progress.add_task("starting the stack", total=total)
    began = time.monotonic()
    fig = Figures()
    last = (time.monotonic(), 0)
    notices: list[tuple[str, str]] = []  # (level, text) of what is wrong right now
    drained = False

    first_tick: list[float] = []

    def on_tick(t: int) -> None:
        if not first_tick:
            first_tick.append(time.monotonic())
            progress.update(task, description="ticks" if ticks is not None else "seconds")
        done = t + 1 - start_tick if ticks is not None else min(total, time.monotonic() - first_tick[0])
        progress.update(task, completed=done)
        supervisor.note_tick(t)
        if t % 10 == 0:
            journal("clock.tick", tick=t)

    async def refresh(live: Live) -> None:
        nonlocal fig, last
        while True:
            url = stack.current_sink_url()
            if url is not None:
                new = await asyncio.to_thread(collect, url, society)
                now = time.monotonic()
                new.rate = (new.events - last[1]) / max(1e-6, now - last[0])
                last = (now, new.events)
                fig = new
            if console.is_terminal:
                live.update(render(fig, progress, society, notices))
            else:  # a log, not a screen: one line every few seconds
                console.print(line(fig, progress.tasks[0], notices), highlight=False)
            await asyncio.sleep(1.0 if console.is_terminal else 5.0)

    async def watch() -> None:
        """What is wrong right now, for the display; said once (console and run.log) when it starts/ends."""
        barrier_said: int | None = None
        sink_failing = False
        while True:
            current = [("warning", text) for text in supervisor.conditions.values()]
            waiting = clock.waiting
            if waiting is not None:
                current.append(("warning", waiting.describe()))
                if barrier_said != waiting.tick:
                    barrier_said = waiting.tick
                    missing = {str(q): t for q, t in waiting.missing.items()}
                    journal("clock.barrier_waiting", level="warning", tick=waiting.tick, missing=missing)
                    say("warning", waiting.describe())
            elif barrier_said is not None:
                journal("clock.barrier_passed", tick=barrier_said)
                say("info", f"tick {barrier_said} is complete on every partition; the society goes on")
                barrier_said = None
            url = stack.current_sink_url()
            failing = (await asyncio.to_thread(_health, url)).get("failing") if url else None
            if isinstance(failing, dict):
                text = (
                    f"the sink's inserts have failed for {float(failing.get('seconds') or 0):.0f} s "
                    f"({failing.get('attempts')} attempts): {failing.get('error')}"
                )
                current.append(("error", text))
                if not sink_failing:
                    sink_failing = True
                    journal("sink.failing", level="error", **failing)
                    say("error", text)
            elif sink_failing and url is not None:
                sink_failing = False
                journal("sink.storing_again")
                say("info", "the sink stores again")
            notices[:] = current
            await asyncio.sleep(1.0)

    async def drain(final_tick: int) -> None:
        nonlocal drained
        await clock.wait_closed(final_tick)
        await wait_drained(society, last_window_start(settings, clock.end_us), stack)
        drained = True

    async def flow() -> int:
        await stack.wait_sink_url(timeout=120)
        await feeds.start()
        journal("clock.starting", tick=start_tick)  # the first tick is published now (bench.startup)
        final_tick = await clock.run(
            ticks=None if ticks is None else start_tick + ticks,
            duration=duration,
            stop=stop,
            on_tick=on_tick,
            start_tick=start_tick,
        )
        if not stop.is_set():
            progress.update(task, description="draining", completed=total)
            await drain(final_tick)
            return final_tick
        progress.update(task, description=f"draining ({signals.name if signals else 'stopped'})")
        journal("run.stopping", signal=signals.name if signals else None, tick=final_tick)
        say(
            "warning",
            f"{signals.name if signals else 'stop'}: the clock stopped at tick {final_tick}; draining "
            f"what was published (at most {SIGNAL_DRAIN_SECONDS:.0f} s; once more to skip) ...",
        )
        try:
            await asyncio.wait_for(drain(final_tick), SIGNAL_DRAIN_SECONDS)
        except TimeoutError:
            journal("run.drain_cut_short", level="warning", after_s=SIGNAL_DRAIN_SECONDS)
            say("warning", f"the drain did not finish within {SIGNAL_DRAIN_SECONDS:.0f} s; stopping anyway")
        return final_tick

    final_tick = start_tick
    with Live(
        render(fig, progress, society, notices),
        console=console,
        refresh_per_second=4,
        transient=False,
        auto_refresh=console.is_terminal,
    ) as live:
        guard = asyncio.create_task(supervisor.run())
        tasks = [asyncio.create_task(refresh(live)), asyncio.create_task(watch())]
        if trim_enabled(settings):  # bounded broker memory: delete what every reader has passed
            tasks.append(asyncio.create_task(Trimmer.for_settings(settings, stack.bootstrap, society).run()))
        main_task = asyncio.create_task(flow())
        aborter = asyncio.create_task(abort.wait())
        try:
            await asyncio.wait([main_task, guard, aborter], return_when=asyncio.FIRST_COMPLETED)
            if guard.done():
                guard.result()  # raises why the stack cannot go on
            if main_task.done():
                final_tick = main_task.result()
            else:
                journal("run.drain_skipped", level="warning", signal=signals.name if signals else None)
                say("warning", "signalled again: skipping the drain")
                final_tick = max(start_tick, clock.tick + 1)
        finally:
            if signals is not None:
                signals.stopping = True  # from here on the stack stops anyway
                signals.detach()
            for t in (*tasks, guard, main_task, aborter):
                t.cancel()
            for t in (*tasks, guard, main_task, aborter):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            url = stack.current_sink_url()
            if url is not None:
                fig = await asyncio.to_thread(collect, url, society)
            fig.rate = fig.events / max(1e-6, time.monotonic() - began)
            live.update(render(fig, progress, society, notices if not drained else []))
            with contextlib.suppress(Exception):
                await feeds.stop()
    return {
        "ticks": final_tick - start_tick,
        "seconds": time.monotonic() - began,
        "events": fig.events,
        "end_us": clock.end_us,
        "interrupted": signals.name if signals else None,
        "drained": drained,
        "restarts": dict(stack.restarts),
    }


async def drive_clock(
    settings: Settings,
    bootstrap: str,
    society: str,
    *,
    ticks: int | None,
    duration: float | None,
    stop: asyncio.Event | None = None,
    on_tick: Callable[[int], None] = lambda t: None,
    start_tick: int = 0,
) -> tuple[int, int]:
    """Run the clock against running workers until every window is closed; return (ticks, end_us)."""
    partitions = await partition_count(bootstrap, topic_name(society, Role.ACTIONS))
    feeds = FeedCache(bootstrap, society, partitions, settings.feed_size, settings.poll_ms)
    await feeds.start()
    try:
        clock = Clock(settings, bootstrap, society, feeds)
        final_tick = await clock.run(
            ticks=ticks,
            duration=duration,
            stop=stop or asyncio.Event(),
            on_tick=on_tick,
            start_tick=start_tick,
        )
        await clock.wait_closed(final_tick)
        return final_tick, clock.end_us
    finally:
        await feeds.stop()


def last_window_start(settings: Settings, end_us: int) -> int:
    """Start of the last metric window of a run that ended at ``end_us``."""
    window_us = int(settings.window_seconds * 1_000_000)
    return (end_us - 1) - (end_us - 1) % window_us


async def wait_drained(society: str, last_window_us: int, stack: LocalStack, timeout: float = 300) -> None:
    """Wait until the last window's metrics are stored and the sink has no lag."""
    s = society.replace("'", "")
    ts = control.from_us(last_window_us).strftime("%Y-%m-%d %H:%M:%S.%f")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # re-read: a restarted sink has a new port (while it restarts, this waits for it)
        url = await stack.wait_sink_url(timeout=max(0.1, deadline - time.monotonic()))
        r = _q(
            url,
            f"SELECT count() FROM metrics WHERE society = '{s}' AND metric = 'events_total' "
            f"AND window_start = toDateTime64('{ts}', 6, 'UTC')",
        )
        health = _health(url)
        if r and r.rows and int(r.rows[0][0]) > 0 and health.get("caught_up") is True:
            return
        await asyncio.sleep(0.3)
    raise TimeoutError("the pipeline did not drain in time")


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


def _health(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
            return doc
    except (OSError, ValueError):
        return {}


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
    fork_at: datetime | None = None,
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
    stale = check_no_live_stack(settings)
    if stale is not None:
        console.print(f"[yellow]{escape(stale.describe())}[/yellow]", highlight=False)
    point = None
    if fork_from is not None:
        settings, cfg = fork_settings(settings, fork_from, None)
        point = fork_point(settings, fork_at, cfg.get("end_us"))
    elif resume:
        settings, cfg = fork_settings(settings, society, None)
        settings = settings.model_copy(
            update={"generation": int(cfg.get("generation") or 0), "resume_us": cfg.get("resume_us")}
        )
        point = resume_point(settings, society)
        settings = new_generation(settings, point)
        if ticks is None and duration is None:
            ticks = max(0, int(cfg.get("end_tick") or point.tick) - point.tick)
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
    kafka_logs = _KafkaLogs(stack.run_dir / "driver.log")
    try:
        stack.start(dashboard=dashboard)
        save_config(settings, society)
        console.print(f"broker {stack.bootstrap}; logs in {stack.run_dir} (supervision: run.log)")
        if dashboard:
            _announce_dashboard(stack, console)
        start_tick = 0
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
            start_tick = point.tick
        elif fork_from is not None and point is not None:
            stack.sink_url()
            console.print(f"copying the history of {fork_from} before {from_us(point.at_us).isoformat()} ...")
            copied = asyncio.run(copy_history(settings, stack.bootstrap, fork_from, society, point))
            console.print(f"copied {copied:,} events; continuing live from tick {point.tick}")
            save_config(settings, society, forked_from=fork_from, fork_at_us=point.at_us)
            start_tick = point.tick
        first_tick = start_tick
        if ticks is not None:  # what a resumed run goes on to
            save_config(settings, society, end_tick=start_tick + ticks)
        while True:
            try:
                with kafka_logs:
                    summary = asyncio.run(
                        _drive(settings, stack, society, ticks, duration, console, start_tick, signals)
                    )
                break
            except BrokerLost as lost:
                if on_broker_lost is None:
                    raise
                # the seam for rebuilding the society from ClickHouse: a new broker, topics and children
                signals.stopping = False
                stack.journal("run.broker_lost_hook", error=str(lost))
                console.print("rebuilding the society from what ClickHouse holds ...", highlight=False)
                start_tick = on_broker_lost(stack, lost)
                settings = stack.settings
                save_config(settings, society, generation=settings.generation, resume_us=settings.resume_us)
                if ticks is not None:
                    ticks = max(0, first_tick + ticks - start_tick)
                stack.journal("run.continues", tick=start_tick, bootstrap=stack.bootstrap)
                console.print(f"the society continues at tick {start_tick} on {stack.bootstrap}")
        summary["ticks"] += start_tick - first_tick
        if summary["end_us"]:
            save_config(settings, society, end_us=summary["end_us"])
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
            if broker_lost:  # nothing can be committed any more: all at once, and not for long
                console.print("stopping every process of the society ...", highlight=False)
                stack.stop(timeout=10.0, together=True)
            else:
                stack.stop()
            stack.journal("run.stopped", interrupted=summary.get("interrupted"))
        finally:
            signals.restore()
    return summary
