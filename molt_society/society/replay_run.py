"""``society replay SOURCE``: start the stack without agents, publish a history into it, drain, stop.

The history is loaded by ``replay.source.load_source`` while the stack starts (``replay_loading``); this
module is the part that needs the running stack, so it lives with the stack (``society``), above the
replay package.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from rich.console import Console

from molt_society.replay.archive import ArchiveHeader
from molt_society.replay.publisher import PublishStats, publish
from molt_society.replay.source import Source
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.society.drive import wait_drained
from molt_society.society.progress_lines import ReplayProgress
from molt_society.society.stack import LocalStack


class _Starting(threading.Thread):
    """The stack's start, in a thread while the source is read: an import of a large dump takes a minute
    or more and the stack's start about 20 s, and neither needs the other."""

    def __init__(self, stack: LocalStack, dashboard: bool) -> None:
        super().__init__(name="stack-start", daemon=True)
        self.stack = stack
        self.dashboard = dashboard
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.stack.start(agents=False, dashboard=self.dashboard)
            self.stack.sink_url()
        except BaseException as exc:  # handed to the caller by ready()
            self.error = exc

    def ready(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


def replay_source(
    settings: Settings,
    source: Source,
    *,
    society: str,
    speed: float | None,
    console: Console | None = None,
    dashboard: bool = False,
    source_name: str | None = None,
) -> PublishStats:
    """Replay ``source`` into a new society on the local stack; returns what was published."""
    return replay_loading(
        settings,
        source.header,
        lambda: source,
        society=society,
        speed=speed,
        console=console,
        dashboard=dashboard,
        source_name=source_name,
    )


def replay_loading(
    settings: Settings,
    header: ArchiveHeader | None,
    load: Callable[[], Source],
    *,
    society: str,
    speed: float | None,
    console: Console | None = None,
    dashboard: bool = False,
    source_name: str | None = None,
    early: bool = False,
) -> PublishStats:
    """Load the source with ``load`` and replay it into a new society on the local stack; returns what was
    published. ``header``: the source's archive header, read before, for its window length. ``early``:
    start the stack while ``load`` runs (a dump's import takes minutes at size, the start about 20 s); a
    load that fails then stops the stack it started. Whatever ``load`` raises is raised."""
    console = console or Console()
    window_seconds = header.window_seconds if header and header.window_seconds else settings.window_seconds
    settings = settings.model_copy(update={"window_seconds": window_seconds})
    stack = LocalStack(settings, society, stream_workers=settings.stream_workers)
    starting = _Starting(stack, dashboard)
    drained = False
    if early:
        starting.start()
    try:
        source = load()
        if not early:
            starting.start()
        starting.ready()
        if dashboard:
            url = stack.dashboard_url()
            console.print(f"[bold]dashboard[/bold] {url}" if url else "the dashboard did not start")
        stats = _publish_and_drain(settings, stack, source, speed, console, source_name)
        drained = True
        return stats
    finally:
        if starting.ident is not None:  # started: wait for its start to end, then stop it
            starting.join()
            # drained, the sink has stored everything and nobody produces: the processes stop at once
            # (role by role, each waits for the one before: 10 s of a 300 s replay at size)
            stack.stop(together=drained)


def _publish_and_drain(
    settings: Settings,
    stack: LocalStack,
    source: Source,
    speed: float | None,
    console: Console,
    source_name: str | None,
) -> PublishStats:
    header, society, window_seconds = source.header, stack.society, settings.window_seconds
    total = len(source.events)
    shown = ReplayProgress(console, settings.state_dir, society, total, source_name, "[bold]replay[/bold]")
    with shown:

        def on_progress(s: PublishStats) -> None:
            shown.update(s.events, s.events / max(s.seconds, 1e-6))

        stats = asyncio.run(
            publish(
                iter(source.events),
                bootstrap=stack.bootstrap,
                society=society,
                partitions=settings.partitions,
                window_seconds=window_seconds,
                origin_us=header.origin_us if header else None,
                last_window_us=header.last_window_us if header else None,
                speed=speed,
                on_progress=on_progress,
                keys=RecordKeys(settings.state_dir),
            )
        )
        if stats.last_us is not None:
            window_us = int(window_seconds * 1_000_000)
            last = header.last_window_us if header and header.last_window_us is not None else None
            if last is None:
                last = stats.last_us - stats.last_us % window_us
            asyncio.run(wait_drained(society, last, stack))
        shown.finish(stats.events, stats.seconds)
    return stats
