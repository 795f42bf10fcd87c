"""Drive a society's clock against running workers and wait for its pipeline to drain.

The steps every run shares (``society run``, a fork, a replay, the integration tests and benchmarks):
``drive_clock`` runs the clock until every window is closed, ``last_window_start`` names a run's last
metric window, and ``wait_drained`` waits until the sink has stored that window's metrics and has no lag.
``query_or_none`` and ``sink_health`` read the running sink's HTTP endpoints without raising.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Callable
from http.client import HTTPException
from typing import Any

from molt_society.agents.clock import Clock
from molt_society.agents.feed_cache import FeedCache
from molt_society.runtime.broker import partition_count
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name
from molt_society.society.stack import LocalStack
from molt_society.warehouse import QueryError, Result
from molt_society.warehouse.sink_http import query_http

log = get_logger(__name__)

DRAIN_NOTICE_S = 30.0  # a drain still waiting says, this often, what it waits for


def query_or_none(url: str, sql: str) -> Result | None:
    """``sql`` on the sink at ``url``; None when it fails or does not answer."""
    try:
        return query_http(url, sql, timeout=10)
    except (QueryError, OSError, HTTPException, ValueError, KeyError, TypeError):
        return None  # a sink that is restarting can close the connection mid-answer


def sink_health(url: str) -> dict[str, Any]:
    """The sink's ``/health`` document; {} when it does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
            return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError, HTTPException):
        return {}


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
    feeds = FeedCache(
        bootstrap,
        society,
        partitions,
        settings.feed_size,
        settings.poll_ms,
        keys=RecordKeys(settings.state_dir),
    )
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


async def wait_drained(
    society: str,
    last_window_us: int,
    stack: LocalStack,
    timeout: float = 300,
    on_slow: Callable[[str], None] | None = None,
) -> None:
    """Wait until the last window's metrics are stored and the sink has no lag.

    Every ``DRAIN_NOTICE_S`` it is still waiting it logs ``drain.waiting`` with what is missing (the
    window's metrics, the sink's catching up) and passes the same sentence to ``on_slow``."""
    s = society.replace("'", "")
    ts = control.from_us(last_window_us).strftime("%Y-%m-%d %H:%M:%S.%f")
    began = time.monotonic()
    deadline = began + timeout
    next_notice = began + DRAIN_NOTICE_S
    while time.monotonic() < deadline:
        # re-read: a restarted sink has a new port (while it restarts, this waits for it)
        url = await stack.wait_sink_url(timeout=max(0.1, deadline - time.monotonic()))
        # in a thread: a sink slow to answer must not hold the driver's loop (the display, the supervisor)
        r = await asyncio.to_thread(
            query_or_none,
            url,
            f"SELECT count() FROM metrics WHERE society = '{s}' AND metric = 'events_total' "
            f"AND window_start = toDateTime64('{ts}', 6, 'UTC')",
        )
        health = await asyncio.to_thread(sink_health, url)
        stored = bool(r and r.rows and int(r.rows[0][0]) > 0)
        if stored and health.get("caught_up") is True:
            return
        if time.monotonic() >= next_notice:
            next_notice += DRAIN_NOTICE_S
            waited = time.monotonic() - began
            missing = [] if stored else [f"the metrics of the last window ({ts[:19]} UTC) are not stored"]
            if health.get("caught_up") is not True:
                missing.append(f"the sink has not caught up ({health or 'no answer'})")
            text = f"still draining after {waited:.0f} s: " + "; ".join(missing)
            log.warning("drain.waiting", society=society, waited_s=round(waited), missing=missing)
            if on_slow is not None:
                on_slow(text)
        await asyncio.sleep(0.3)
    raise TimeoutError("the pipeline did not drain in time")
