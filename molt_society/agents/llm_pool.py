"""Several model servers as one: which server each attempt of a model call goes to.

A large society keeps a cluster of model servers busy (OASIS ran 72 vLLM endpoints). A
:class:`ServerPool` holds the servers of one client, each allowing ``concurrency`` attempts in flight
(its own bound: a server never sees more, whatever the others do). An attempt takes a slot:

- **least loaded first**: the server with the fewest attempts in flight, then the fewest sent so far, so
  an idle pool fills its servers in turn and a busy one spreads the calls evenly;
- **work-conserving**: an attempt waits only while every usable server is full; it is never queued
  behind one server while another has a free slot (callers wait on the pool, not on a server);
- **a failing server is avoided** (a small circuit breaker): an attempt that failed with a connection
  error, a timeout, HTTP 429 or 5xx marks its server down for a cooldown (``backoff_s``, doubling with
  each failed probe, up to ``max_backoff_s``). While any server is up, attempts go only to servers that
  are up, and the retry of a failed call to another server than the one that failed, when one has room.
  After its cooldown a server that failed takes one attempt at a time (a probe) while another server
  is healthy, until one succeeds, which clears the mark. When every server is down the attempts go to
  them anyway, at full concurrency, paced by the calls' own backoff: that is how a restarted server is
  found again, and a pool of one server behaves as that server alone.

Only scheduling lives here (no HTTP): ``agents.llm_client.ChatClient`` sends the requests and owns the
retry policy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(eq=False)
class Server:
    """One model server and its counters (read by the client's logs, tests and benchmarks)."""

    url: str
    capacity: int
    in_flight: int = 0
    sent: int = 0  # attempts sent to it
    failed: int = 0  # attempts that failed on it (connection, timeout, 429, 5xx)
    peak: int = 0  # most attempts in flight at once
    down_until: float = 0.0  # monotonic time until which it is avoided
    streak: int = 0  # consecutive failures

    def up(self, now: float) -> bool:
        return self.down_until <= now


def split_urls(urls: str | Sequence[str]) -> tuple[str, ...]:
    """Base URLs from ``"http://a/v1, http://b/v1"`` or a sequence, without trailing slashes or repeats."""
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out: dict[str, None] = {}
    for u in items:
        if u.strip():
            out.setdefault(u.strip().rstrip("/"), None)
    if not out:
        raise ValueError("no model server URL given")
    return tuple(out)


class ServerPool:
    """See module docstring."""

    def __init__(
        self,
        urls: str | Sequence[str],
        concurrency: int,
        *,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        self.servers = [Server(u, max(1, concurrency)) for u in split_urls(urls)]
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._cond = asyncio.Condition()

    @property
    def capacity(self) -> int:
        """Attempts in flight when every server is full."""
        return sum(s.capacity for s in self.servers)

    def _pick(self, avoid: Server | None) -> Server | None:
        """The server the next attempt goes to, or None when it must wait."""
        now = time.monotonic()
        up = [s for s in self.servers if s.up(now)]
        healthy = any(not s.streak for s in up)
        if up:  # wait for a server that is up rather than try one that is down; one probe at a time
            free = [s for s in up if s.in_flight < (1 if s.streak and healthy else s.capacity)]
        else:
            free = [s for s in self.servers if s.in_flight < s.capacity]
        if avoid is not None and any(s is not avoid for s in up):
            free = [s for s in free if s is not avoid]  # a retry waits for another server that is up
        if not free:
            return None
        return min(free, key=lambda s: (s.in_flight, s.sent))

    async def acquire(self, avoid: Server | None = None) -> Server:
        """A slot on a server (``avoid``: the server of the previous, failed attempt, taken only when no
        other server is up). Pair with :meth:`release`."""
        async with self._cond:
            while (server := self._pick(avoid)) is None:
                await self._cond.wait()
            server.in_flight += 1
            server.sent += 1
            server.peak = max(server.peak, server.in_flight)
            if self._pick(None) is not None:
                self._cond.notify(1)  # room left (e.g. a server came back): the next waiter need not wait
            return server

    async def release(self, server: Server, *, failed: bool) -> None:
        """Give the slot back; ``failed``: the attempt found the server absent, overloaded or broken."""
        async with self._cond:
            server.in_flight -= 1
            now = time.monotonic()
            if failed:
                server.failed += 1
                if server.up(now):  # failures of attempts sent before it was marked down add nothing
                    server.streak += 1
                    cooldown = min(self.max_backoff_s, self.backoff_s * 2 ** (server.streak - 1))
                    server.down_until = now + cooldown
            else:
                server.streak = 0
                server.down_until = 0.0
            self._cond.notify(1)
