"""The progress of ``society experiment``: a line per pair and a bar over the pairs.

On a terminal, a rich progress display: the running pair ("arm 2/3 seed 4/5: tick 120/300") and the
pairs ("k of n done (m resumed)"). On a log (not a terminal), plain lines: a pair's start, its ticks
every tenth of the way, its end.
"""

from __future__ import annotations

from datetime import datetime

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class Display:
    """Progress of the pairs; ``on_tick`` is the pair runner's tick callback."""

    def __init__(self, console: Console, pairs: int, ticks: int) -> None:
        self.console, self.pairs, self.ticks = console, pairs, ticks
        self.done = 0
        self.resumed = 0
        self.label = ""
        self.first_tick: int | None = None
        self.last_said = -1
        self.progress: Progress | None = None
        self.overall: TaskID | None = None
        self.current: TaskID | None = None
        if console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                console=console,
            )

    def __enter__(self) -> Display:
        if self.progress is not None:
            self.progress.start()
            self.overall = self.progress.add_task("pairs", total=self.pairs, count=self._count())
            self.current = self.progress.add_task("", total=self.ticks, count="", visible=False)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def _count(self) -> str:
        return f"{self.done} of {self.pairs} done ({self.resumed} resumed)"

    def say(self, text: str) -> None:
        self.console.print(f"{datetime.now():%H:%M:%S} {escape(text)}", highlight=False)

    def skipped(self, label: str, society: str) -> None:
        self.done += 1
        self.resumed += 1
        self.say(f"{label}: {society} is done already (resumed); {self._count()}")
        self._update_overall()

    def pair_started(self, label: str, society: str) -> None:
        self.label, self.first_tick, self.last_said = label, None, -1
        if self.progress is not None and self.current is not None:
            self.progress.update(
                self.current, description=f"{label}: {society}", completed=0, count="forking", visible=True
            )
        else:
            self.say(f"{label}: {society}: forking and copying the history ...")

    def on_tick(self, tick: int) -> None:
        if self.first_tick is None:
            self.first_tick = tick
        n = tick + 1 - self.first_tick
        if self.progress is not None and self.current is not None:
            self.progress.update(self.current, completed=n, count=f"tick {n}/{self.ticks}")
            return
        tenth = n * 10 // max(1, self.ticks)
        if tenth > self.last_said:
            self.last_said = tenth
            self.say(f"{self.label}: tick {n}/{self.ticks}")

    def pair_done(self, label: str, society: str, seconds: float, history: int) -> None:
        self.done += 1
        self.say(
            f"{label}: {society} done in {seconds:.1f} s (history of {history:,} events verified); "
            f"{self._count()}"
        )
        self._update_overall()

    def _update_overall(self) -> None:
        if self.progress is not None and self.overall is not None:
            self.progress.update(self.overall, completed=self.done, count=self._count())
