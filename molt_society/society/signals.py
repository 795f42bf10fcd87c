"""SIGTERM, SIGINT and SIGHUP of ``society run``: stop the society cleanly (see ``Signals``)."""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

SIGNAL_DRAIN_SECONDS = 60.0  # the longest a signalled run drains what was published before it stops


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
