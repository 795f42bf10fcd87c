"""``streams.app.AckedTable``: once ``settled()`` returns, the table's updates are on its changelog topic,
even when Faust's producer buffer is slow to hand them to the broker (a loaded machine; real broker).

The buffer is slowed by delaying Faust's own ``ProducerBuffer._send_pending`` (not a stand-in for the
broker: the records still go to it). Faust's commit flushes that buffer for at most 0.1 s per record, so
with a slower buffer a plain table's update is not on the changelog when its input's offset can be
committed; the control case shows that, so the test could fail if ``settled`` returned early.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.transport.producer import ProducerBuffer
from stack_helpers import create_topic

from molt_society.runtime.broker import read_topic
from molt_society.streams.app import acked_table

pytestmark = pytest.mark.integration

SLOW_S = 1.0


async def _keys_on_changelog_when_done(
    bootstrap: str, datadir: Path, *, settle: bool
) -> tuple[set[bytes], set[bytes]]:
    """Run a Faust app whose agent writes one table key per record (and awaits ``settled`` when
    ``settle``); return the keys on the changelog at the moment the agent said it was done with both
    records, and the keys there after the buffer emptied."""
    app_id = f"acked-{uuid.uuid4().hex[:8]}"
    await create_topic(bootstrap, f"{app_id}-in")
    app = faust.App(
        app_id,
        broker=f"kafka://{bootstrap}",
        value_serializer="raw",
        key_serializer="raw",
        web_enabled=False,
        datadir=str(datadir),  # not the working directory's <app id>-data
        store="memory://",
        topic_partitions=1,
        consumer_auto_offset_reset="earliest",
    )
    topic = app.topic(f"{app_id}-in", value_serializer="raw", key_serializer="raw")
    table = acked_table(app, "t")
    done = asyncio.Event()
    seen: list[bytes] = []

    @app.agent(topic)
    async def write(stream: faust.StreamT[bytes]) -> None:
        async for raw in stream:
            table[raw.decode()] = raw
            if settle:
                await table.settled()
            seen.append(raw)
            if len(seen) == 2:
                done.set()

    await app.start()
    try:
        await topic.send(value=b"a")
        await topic.send(value=b"b")
        await asyncio.wait_for(done.wait(), 60)
        changelog = table.changelog_topic.get_topic_name()
        at_done = {r.key for r in await read_topic(bootstrap, changelog)}
        await asyncio.sleep(3 * SLOW_S)
        later = {r.key for r in await read_topic(bootstrap, changelog)}
        return at_done, later
    finally:
        await app.stop()


def _slowed(orig: Callable[[ProducerBuffer, Any], Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    async def slow(self: ProducerBuffer, fut: Any) -> None:
        await asyncio.sleep(SLOW_S)
        await orig(self, fut)

    return slow


@pytest.mark.parametrize("settle", [True, False], ids=["settled", "plain-control"])
def test_settled_means_the_update_is_on_the_changelog(
    broker: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, settle: bool
) -> None:
    monkeypatch.setattr(ProducerBuffer, "_send_pending", _slowed(ProducerBuffer._send_pending))
    at_done, later = asyncio.run(_keys_on_changelog_when_done(broker, tmp_path, settle=settle))
    keys = {b'"a"', b'"b"'}  # the table's keys, JSON-encoded by Faust
    assert later == keys  # both reach the changelog in the end
    if settle:
        assert at_done == keys
    else:  # without waiting, the agent finished before the slowed buffer wrote its updates
        assert at_done != keys, at_done
