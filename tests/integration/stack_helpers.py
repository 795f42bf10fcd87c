"""Helpers for integration tests: a real local stack (broker given by the fixture), a clock, queries."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import NewTopic

from molt_society.runtime import kafka
from molt_society.runtime.broker import partition_count, read_topic
from molt_society.runtime.settings import Settings
from molt_society.schemas.topics import Role, topic_name
from molt_society.society.drive import drive_clock, last_window_start, wait_drained
from molt_society.society.fork import save_config
from molt_society.society.stack import LocalStack
from molt_society.warehouse.sink_http import query_http

CRAWL_ARCHIVE = (
    Path(
        os.environ.get("MOLTBOOK_DATA")
        or Path(__file__).resolve().parents[3] / "shared" / "data" / "moltbook"
    )
    / "crawl-2026-01-31"
    / "posts-0-7.tar.gz"
)
"""The shared real crawl half (``MOLTBOOK_DATA`` overrides where the data folder is)."""


def needs_crawl() -> pytest.MarkDecorator:
    """The mark of a test module that reads the crawl: skipped without it, but an error in CI."""
    if os.environ.get("CI") and not CRAWL_ARCHIVE.is_file():
        raise RuntimeError(f"crawl archive not found at {CRAWL_ARCHIVE} (set MOLTBOOK_DATA)")
    return pytest.mark.skipif(
        not CRAWL_ARCHIVE.is_file(), reason=f"crawl archive not found at {CRAWL_ARCHIVE}"
    )


def make_settings(broker: str | None, tmp: Path, **over: Any) -> Settings:
    base: dict[str, Any] = {
        "kafka_bootstrap": broker,
        "clickhouse_url": f"chdb://{tmp / 'clickhouse'}",
        "state_dir": tmp / "state",
        "partitions": 4,
        "shards": 4,
        "agents": 300,
        "seed": 7,
        "window_seconds": 600.0,
        "tick_seconds": 60.0,
    }
    base.update(over)
    return Settings(**base)


@contextmanager
def running_stack(
    settings: Settings,
    society: str,
    *,
    stream_workers: int = 1,
    agent_workers: int = 1,
    agents: bool = True,
    dashboard: bool = False,
) -> Iterator[LocalStack]:
    stack = LocalStack(settings, society, stream_workers=stream_workers, agent_workers=agent_workers)
    try:
        stack.start(agents=agents, dashboard=dashboard)
        yield stack
    finally:
        stack.stop()


def run_ticks(stack: LocalStack, ticks: int) -> int:
    """Drive ``ticks`` ticks, wait until every window's metrics and every event are in ClickHouse."""

    async def go() -> int:
        final, end_us = await drive_clock(
            stack.settings, stack.bootstrap, stack.society, ticks=ticks, duration=None
        )
        save_config(stack.settings, stack.society, end_us=end_us)
        await wait_drained(stack.society, last_window_start(stack.settings, end_us), stack)
        return final

    return asyncio.run(go())


def sql(stack: LocalStack, query: str) -> list[list[Any]]:
    return query_http(stack.sink_url(), query).rows


def offline_ids(settings: Settings, society: str, ticks: int) -> set[str]:
    """Event ids of the same society run in one process without Kafka (``agents.offline``)."""
    return {str(e.event_id) for e in offline_events(settings, society, ticks)}


def offline_events(settings: Settings, society: str, ticks: int) -> list[Any]:
    """The events of the same society run in one process without Kafka (``agents.offline``)."""
    from molt_society.agents.behaviour import load_behaviour
    from molt_society.agents.offline import simulate

    offline = simulate(
        seed=settings.seed,
        agents=settings.agents,
        ticks=ticks,
        behaviour=load_behaviour(settings.behaviour_file),
        shards=settings.shards,
        partitions=settings.partitions,
        tick_seconds=settings.tick_seconds,
        start=datetime.fromisoformat(settings.sim_start),
        society=society,
        feed_size=settings.feed_size,
    )
    return list(offline.events)


def emitted_event_ids(bootstrap: str, society: str) -> list[str]:
    """Ids of every event agents wrote to the actions topic (control records excluded)."""
    import orjson

    recs = asyncio.run(read_topic(bootstrap, topic_name(society, Role.ACTIONS)))
    return [orjson.loads(r.value)["event_id"] for r in recs if not kafka.is_watermark(r.headers)]


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
ARTIFACTS = Path(
    os.environ.get("SOCIETY_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")
)


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A page in real headless Chromium (Debian's ``chromium``, driven by Playwright).

    Fails (never skips) when the browser is missing: CI installs it (``.ci/run``).
    """
    from playwright.sync_api import sync_playwright

    binary = os.environ.get("SOCIETY_CHROMIUM", "/usr/bin/chromium")
    if not Path(binary).exists():
        pytest.fail(f"no Chromium at {binary}: install Debian's chromium (apt-get install chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=binary, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


async def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Create ``topic`` with ``partitions`` partitions of one replica and wait until the broker's metadata
    lists it."""
    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    await partition_count(bootstrap, topic)
