"""Progress of long commands, for a terminal and for a log.

On a terminal a spinner line is redrawn in place (rich's ``Console.status``); when the output goes to a
file or a pipe nothing can be redrawn, so each change is printed as its own timestamped line instead, and
nobody waits minutes for output that arrives all at once at the end. ``Throttle`` keeps a fast-moving
count (a replay's events) to one line every few seconds; ``ReplayProgress`` is a replay's bar, lines and
progress file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from molt_society.replay.progress import ProgressFile, progress_path


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


class ReplayProgress:
    """A replay's progress, used as a context manager: a bar on a terminal (a line every 5 s in a log) and
    the progress file the dashboard reads (``replay.progress``), for a replay through the stack or a direct
    one (``label``)."""

    def __init__(
        self, console: Console, state_dir: Path, society: str, total: int, source: str | None, label: str
    ) -> None:
        self.console, self.total = console, total
        self.bar = Progress(
            TextColumn(label),
            BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f} events"),
            TextColumn("{task.fields[rate]:,.0f} events/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self.file = ProgressFile(progress_path(state_dir, society), total, source)
        self.every = Throttle(5.0)
        self.task = self.bar.add_task("replay", total=total, rate=0.0)

    def __enter__(self) -> ReplayProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def update(self, events: int, rate: float) -> None:
        self.bar.update(self.task, completed=events, rate=rate)
        self.file.update(events, rate)
        if not self.console.is_terminal and self.every.due():  # a log: a line every 5 s, not one at the end
            self.console.print(
                f"replay {events:,}/{self.total:,} events, {rate:,.0f} events/s", highlight=False
            )

    def finish(self, events: int, seconds: float) -> None:
        """The bar at its end, and the file says the replay is done (the dashboard stops showing it as
        running)."""
        rate = events / max(seconds, 1e-6)
        self.bar.update(self.task, completed=events, rate=rate)
        self.file.update(events, rate, done=True)
