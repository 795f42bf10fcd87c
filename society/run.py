"""``society run``: start the local stack, drive the clock, show live figures, drain, summarise."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agents.clock import Clock
from agents.feed_cache import FeedCache
from schemas import control
from schemas.control import from_us
from schemas.topics import Role, topic_name
from society.broker import partition_count
from society.fork import copy_history, fork_point, fork_settings, save_config
from society.logs import get_logger
from society.query import QueryError, Result, query_http
from society.settings import Settings
from society.stack import LocalStack

log = get_logger(__name__)

LIVE_METRICS = (
    ("share_no_comment", "", "posts without a comment"),
    ("mean_depth", "commented", "mean thread depth (commented posts)"),
    ("cascade_size_powerlaw", "alpha", "cascade size power-law alpha"),
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


def line(fig: Figures, task: Any) -> str:
    """One-line progress for logs."""
    parts = [f"{task.description} {task.completed:,.0f}/{task.total:,.0f}", f"events {fig.events:,}"]
    parts.append(f"{fig.rate:,.0f}/s")
    parts.append(f"dead letters {fig.dead_letters:,}")
    parts.append(f"windows {fig.windows}")
    for metric, dim, label in LIVE_METRICS[:4]:
        v = fig.metrics.get(f"{metric}|{dim}")
        if v is not None:
            parts.append(f"{label} {v:.3f}")
    return " | ".join(parts)


def render(fig: Figures, progress: Progress, society: str) -> Group:
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
    return Group(progress, t)


async def _drive(
    settings: Settings,
    stack: LocalStack,
    society: str,
    ticks: int | None,
    duration: float | None,
    console: Console,
    start_tick: int = 0,
) -> dict[str, Any]:
    url = await asyncio.to_thread(stack.sink_url)
    feeds = FeedCache(stack.bootstrap, society, settings.partitions, settings.feed_size, settings.poll_ms)
    await feeds.start()
    clock = Clock(settings, stack.bootstrap, society, feeds)
    stop = asyncio.Event()
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

    first_tick: list[float] = []

    def on_tick(t: int) -> None:
        if not first_tick:
            first_tick.append(time.monotonic())
            progress.update(task, description="ticks" if ticks is not None else "seconds")
        done = t + 1 - start_tick if ticks is not None else min(total, time.monotonic() - first_tick[0])
        progress.update(task, completed=done)

    async def refresh(live: Live) -> None:
        nonlocal fig, last
        while True:
            new = await asyncio.to_thread(collect, url, society)
            now = time.monotonic()
            new.rate = (new.events - last[1]) / max(1e-6, now - last[0])
            last = (now, new.events)
            fig = new
            if console.is_terminal:
                live.update(render(fig, progress, society))
            else:  # a log, not a screen: one line every few seconds
                console.print(line(fig, progress.tasks[0]), highlight=False)
            await asyncio.sleep(1.0 if console.is_terminal else 5.0)

    async def watchdog() -> None:
        while True:
            dead = stack.dead_children()
            if dead:
                c = dead[0]
                raise RuntimeError(f"{c.role} exited with code {c.process.returncode}; see {c.log_path}")
            await asyncio.sleep(0.5)

    async def flow() -> int:
        final_tick = await clock.run(
            ticks=None if ticks is None else start_tick + ticks,
            duration=duration,
            stop=stop,
            on_tick=on_tick,
            start_tick=start_tick,
        )
        progress.update(task, description="draining", completed=total)
        await clock.wait_closed(final_tick, timeout=300)
        window_us = int(settings.window_seconds * 1_000_000)
        last_window = (clock.end_us - 1) - (clock.end_us - 1) % window_us
        await wait_drained(society, last_window, stack)
        return final_tick

    with Live(
        render(fig, progress, society),
        console=console,
        refresh_per_second=4,
        transient=False,
        auto_refresh=console.is_terminal,
    ) as live:
        refresher = asyncio.create_task(refresh(live))
        main_task = asyncio.create_task(flow())
        guard = asyncio.create_task(watchdog())
        try:
            await asyncio.wait([main_task, guard], return_when=asyncio.FIRST_COMPLETED)
            if guard.done():
                main_task.cancel()
                guard.result()  # raises the child's failure
            final_tick = main_task.result()
        finally:
            for t in (refresher, guard, main_task):
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                    await t
            fig = await asyncio.to_thread(collect, url, society)
            fig.rate = fig.events / max(1e-6, time.monotonic() - began)
            live.update(render(fig, progress, society))
            await feeds.stop()
    return {
        "ticks": final_tick - start_tick,
        "seconds": time.monotonic() - began,
        "events": fig.events,
        "end_us": clock.end_us,
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
        await clock.wait_closed(final_tick, timeout=300)
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
        url = await asyncio.to_thread(stack.sink_url)  # re-read: a restarted sink has a new port
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


def _health(url: str) -> dict[str, Any]:
    import json
    import urllib.request

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
) -> dict[str, Any]:
    """Run a society on the local stack and return a summary; the stack is stopped afterwards.

    With ``fork_from`` the society starts from the history of another (see ``society.fork``).
    """
    console = console or Console()
    point = None
    if fork_from is not None:
        settings, cfg = fork_settings(settings, fork_from, None)
        point = fork_point(settings, fork_at, cfg.get("end_us"))
    stack = LocalStack(settings, society, stream_workers=stream_workers, agent_workers=agent_workers)
    console.print(
        f"[bold]society[/bold] {society}: {settings.agents:,} agents, seed {settings.seed}, "
        f"mode {settings.mode}, {stream_workers} stream worker(s), {agent_workers} agent worker(s); "
        f"ClickHouse {settings.clickhouse_url}"
    )
    try:
        stack.start(dashboard=dashboard)
        save_config(settings, society)
        console.print(f"broker {stack.bootstrap}; logs in {stack.run_dir}")
        if dashboard:
            url = stack.dashboard_url()
            console.print(
                f"[bold]dashboard[/bold] {url}"
                if url
                else f"the dashboard did not start; see {stack.run_dir}"
            )
        start_tick = 0
        if fork_from is not None and point is not None:
            stack.sink_url()
            console.print(f"copying the history of {fork_from} before {from_us(point.at_us).isoformat()} ...")
            copied = asyncio.run(copy_history(settings, stack.bootstrap, fork_from, society, point))
            console.print(f"copied {copied:,} events; continuing live from tick {point.tick}")
            save_config(settings, society, forked_from=fork_from, fork_at_us=point.at_us)
            start_tick = point.tick
        summary = asyncio.run(_drive(settings, stack, society, ticks, duration, console, start_tick))
        save_config(settings, society, end_us=summary["end_us"])
    finally:
        stack.stop()
    return summary
