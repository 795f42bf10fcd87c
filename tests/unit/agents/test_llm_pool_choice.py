"""Which model server each attempt goes to (``agents.llm_pool``): per-server bounds, least loaded first,
work-conserving waits, and a failing server avoided then probed one attempt at a time. No HTTP here: the
pool's slots are taken and given back directly (``tests/integration/test_llm_pool.py`` has the servers).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from molt_society.agents.llm_pool import ServerPool, split_urls
from molt_society.runtime.settings import Settings

pytestmark = pytest.mark.timeout(30)

URLS = "http://a/v1, http://b/v1/ ,http://c/v1"


def test_urls_from_a_comma_separated_list() -> None:
    assert split_urls(URLS) == ("http://a/v1", "http://b/v1", "http://c/v1")
    assert split_urls(["http://a/v1", "http://a/v1/"]) == ("http://a/v1",)
    with pytest.raises(ValueError, match="no model server"):
        split_urls(" , ")
    assert Settings(llm_base_url=URLS).llm_base_urls == ("http://a/v1", "http://b/v1", "http://c/v1")
    assert Settings(llm_base_url="http://x:8000/v1").llm_base_urls == ("http://x:8000/v1",)
    assert Settings(llm_base_url=None).llm_base_urls == ()


def test_each_server_is_bounded_and_the_least_loaded_is_taken() -> None:
    async def go() -> None:
        pool = ServerPool(URLS, 2)
        _a, b, c = pool.servers
        taken = [await pool.acquire() for _ in range(6)]
        assert [s.url[7] for s in taken] == list("abcabc")  # an idle pool fills its servers in turn
        assert [s.in_flight for s in pool.servers] == [2, 2, 2]
        waiter = asyncio.create_task(pool.acquire())
        await asyncio.sleep(0.01)
        assert not waiter.done()  # every server full: the seventh waits, on no server in particular
        await pool.release(b, failed=False)
        assert await asyncio.wait_for(waiter, 1) is b  # the first slot freed anywhere is taken
        await pool.release(c, failed=False)
        await pool.release(c, failed=False)
        assert await pool.acquire() is c  # fewest in flight
        assert [s.peak for s in pool.servers] == [2, 2, 2]
        assert [s.sent for s in pool.servers] == [2, 3, 3]

    asyncio.run(go())


def test_a_failing_server_is_avoided_then_probed_once_at_a_time() -> None:
    async def go() -> None:
        pool = ServerPool(URLS, 3, backoff_s=0.2, max_backoff_s=1.0)
        a, b, _c = pool.servers
        first = await pool.acquire()
        assert first is a
        await pool.release(a, failed=True)  # refused: a is down for 0.2 s
        picks = [await pool.acquire() for _ in range(6)]
        assert a not in picks  # b and c take everything while a is down
        waiter = asyncio.create_task(pool.acquire())
        await asyncio.sleep(0.05)
        assert not waiter.done()  # b and c are full: wait for them rather than try a server that is down
        await asyncio.sleep(0.3)  # a's cooldown is over: a probe may go there, one at a time
        await pool.release(b, failed=False)
        assert await asyncio.wait_for(waiter, 1) is a  # least loaded: the probe
        assert await pool.acquire() is b  # a takes no second attempt while its probe is out
        await pool.release(a, failed=True)  # the probe failed: down again, for twice as long
        assert a.streak == 2
        assert a.down_until - time.monotonic() > 0.3  # 0.4 s
        await asyncio.sleep(0.5)
        probe = await pool.acquire()
        assert probe is a
        await pool.release(a, failed=False)  # it answered: back to full concurrency
        assert (a.streak, a.failed, a.sent) == (0, 2, 3)
        assert [await pool.acquire() for _ in range(3)] == [a, a, a]

    asyncio.run(go())


def test_a_retry_goes_elsewhere_and_a_pool_all_down_is_still_tried() -> None:
    async def go() -> None:
        pool = ServerPool("http://a/v1,http://b/v1", 1, backoff_s=10.0, max_backoff_s=10.0)
        a, b = pool.servers
        assert await pool.acquire() is a
        await pool.release(a, failed=False)
        assert await pool.acquire(avoid=a) is b  # the retry of a call that failed on a
        await pool.release(b, failed=True)
        await pool.release((await pool.acquire()), failed=True)  # a, the only one up, fails too
        assert not a.up(time.monotonic())
        assert not b.up(time.monotonic())
        # every server is down (for 10 s): attempts still go to them, at full concurrency
        got = [await pool.acquire(), await pool.acquire()]
        assert sorted(s.url for s in got) == ["http://a/v1", "http://b/v1"]

    asyncio.run(go())


def test_a_lone_server_is_never_held_to_probes() -> None:
    """With no healthy server to prefer, a server coming out of its cooldown takes full concurrency: a
    pool of one server behaves as that server alone (each call paced by its own backoff)."""

    async def go() -> None:
        pool = ServerPool("http://a/v1", 3, backoff_s=0.05)
        (a,) = pool.servers
        await pool.release(await pool.acquire(), failed=True)
        assert a.streak == 1
        assert [await pool.acquire() for _ in range(3)] == [a, a, a]  # down, and still tried
        for _ in range(3):
            await pool.release(a, failed=True)
        await asyncio.sleep(0.1)  # cooldown over, no success yet
        assert a.up(time.monotonic())
        assert a.streak == 1  # failures of attempts sent while it was down add nothing
        assert [await pool.acquire() for _ in range(3)] == [a, a, a]

    asyncio.run(go())
