"""``society replay SOURCE``: load a history, start the stack without agents, publish it, drain, stop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from molt_society.replay.archive import ArchiveHeader, is_archive, read_archive, read_jsonl_docs
from molt_society.replay.progress import ProgressFile, progress_path
from molt_society.replay.publisher import PublishStats, publish
from molt_society.runtime.settings import Settings
from molt_society.schemas.control import to_us
from molt_society.schemas.events import Event
from molt_society.society.run import wait_drained
from molt_society.society.stack import LocalStack


@dataclass
class Source:
    header: ArchiveHeader | None
    events: list[Event] | list[dict[str, Any]]  # models from importers, wire dicts from archives
    report: Any = None  # importers.ImportReport for dumps


def _us(ev: Event | dict[str, Any]) -> int:
    if isinstance(ev, dict):
        return to_us(datetime.fromisoformat(ev["occurred_at"]))
    return to_us(ev.occurred_at)


def _eid(ev: Event | dict[str, Any]) -> str:
    return str(ev["event_id"]) if isinstance(ev, dict) else str(ev.event_id)


def load_source(path: Path, *, since: datetime | None = None, until: datetime | None = None) -> Source:
    """Events of an archive or of a MoltBook dump (through the importers), sorted, within [since, until)."""
    events: list[Any]
    if path.is_file() and path.name.endswith((".jsonl", ".jsonl.gz")):
        # the fast path: wire dicts, validated by the stream workers they are published to
        header, docs = read_jsonl_docs(path)
        events, report = list(docs), None
    elif path.is_file() and is_archive(path):
        header, it = read_archive(path)
        events, report = list(it), None
    else:
        from molt_society.importers import import_path

        result = import_path(path, society="import")
        header, events, report = None, list(result.events), result.report
    events.sort(key=lambda e: (_us(e), _eid(e)))
    if since is not None or until is not None:
        lo = to_us(since) if since else None
        hi = to_us(until) if until else None
        events = [e for e in events if (lo is None or _us(e) >= lo) and (hi is None or _us(e) < hi)]
        if header is not None:  # a sub-range has its own span
            header = ArchiveHeader(
                society=header.society, events=len(events), window_seconds=header.window_seconds
            )
    return Source(header, events, report)


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
    console = console or Console()
    header = source.header
    window_seconds = header.window_seconds if header and header.window_seconds else settings.window_seconds
    settings = settings.model_copy(update={"window_seconds": window_seconds})
    stack = LocalStack(settings, society)
    total = len(source.events)
    progress = Progress(
        TextColumn("[bold]replay[/bold]"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} events"),
        TextColumn("{task.fields[rate]:,.0f} events/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )
    try:
        stack.start(agents=False, dashboard=dashboard)
        stack.sink_url()
        if dashboard:
            url = stack.dashboard_url()
            console.print(f"[bold]dashboard[/bold] {url}" if url else "the dashboard did not start")
        progress_file = ProgressFile(progress_path(settings.state_dir, society), total, source_name)
        with progress:
            task = progress.add_task("replay", total=total, rate=0.0)

            def on_progress(s: PublishStats) -> None:
                rate = s.events / max(s.seconds, 1e-6)
                progress.update(task, completed=s.events, rate=rate)
                progress_file.update(s.events, rate)

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
                )
            )
            if stats.last_us is not None:
                window_us = int(window_seconds * 1_000_000)
                last = header.last_window_us if header and header.last_window_us is not None else None
                if last is None:
                    last = stats.last_us - stats.last_us % window_us
                asyncio.run(wait_drained(society, last, stack))
            progress_file.update(stats.events, stats.events / max(stats.seconds, 1e-6), done=True)
        return stats
    finally:
        stack.stop()
