"""Progress of long commands, for a terminal and for a log.

On a terminal a spinner line is redrawn in place (rich's ``Console.status``); when the output goes to a
file or a pipe nothing can be redrawn, so each change is printed as its own timestamped line instead, and
nobody waits minutes for output that arrives all at once at the end. ``Throttle`` keeps a fast-moving
count (a replay's events) to one line every few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console


class Status(Protocol):
    def update(self, message: str) -> None: ...


class _Lines:
    """``Status`` as printed lines: ``HH:MM:SS message``."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def update(self, message: str) -> None:
        self.console.print(f"{time.strftime('%H:%M:%S')} {message}", highlight=False, markup=False)


@contextmanager
def status(console: Console, message: str) -> Iterator[Status]:
    """A spinner on a terminal, printed lines elsewhere; ``update`` changes the message."""
    if console.is_terminal:
        with console.status(message) as s:
            yield s
        return
    lines = _Lines(console)
    lines.update(message)
    yield lines


class Throttle:
    """Calls through at most once every ``seconds`` (the first call always passes)."""

    def __init__(self, seconds: float = 5.0) -> None:
        self.seconds = seconds
        self._last = -float("inf")

    def due(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.seconds:
            return False
        self._last = now
        return True
