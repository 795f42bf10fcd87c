"""What the two community-layout exporters share: the source of rows, the agents and submolts, the summary.

``society export NAME --format moltbook-json|observatory-sqlite`` writes a society as MoltBook dumps are
published (``replay.export_json``, ``replay.export_sqlite``), so the tools people use on those dumps read
a simulated or forked society, and ``society replay`` reads it back. The layouts hold posts, comments,
vote counts, agents, submolts and (SQLite) follows: whatever else a society has (model calls,
interventions, removals, bans, subscriptions, individual votes) is counted in the summary as not in the
layout, never silently left out.

Agents (name, persona, registration time) and submolts are kept in memory while the threads are written:
a society has far fewer of them than events (176,000 agents and 4,000 submolts for MoltBook's 2.6M posts).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import orjson

from molt_society.replay.export_rows import ExportRow, count_types, iter_rows
from molt_society.replay.export_threads import THREAD_TYPES, Thread, ThreadSorter
from molt_society.schemas.control import from_us

UNKNOWN = "unknown"
"""The actor of an imported post without an author, the submolt of one without a submolt."""


class RowSource(Protocol):
    def counts(self) -> dict[str, int]: ...

    def rows(self, event_type: str) -> Iterator[ExportRow]: ...


@dataclass
class StoredSource:
    """A society's rows in ClickHouse (``replay.export_rows``)."""

    settings: Any
    society: str

    def counts(self) -> dict[str, int]:
        return count_types(self.settings, self.society)

    def rows(self, event_type: str) -> Iterator[ExportRow]:
        return iter_rows(self.settings, self.society, event_type)


@dataclass
class Agent:
    name: str
    persona: str | None
    us: int


@dataclass
class Submolt:
    title: str
    description: str
    us: int


@dataclass
class ExportSummary:
    """What an export wrote (``written``: posts, comments, agents, submolts, follows) and what it did not
    and why (``not_exported``: reason -> count; ``notes``: what changes in the layout's reading)."""

    layout: str
    path: Path
    written: Counter[str] = field(default_factory=Counter)
    not_exported: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [
            f"wrote {self.path} ({self.layout}): " + ", ".join(f"{n:,} {k}" for k, n in self.written.items())
        ]
        out += [f"  not in the layout: {n:,} {why}" for why, n in sorted(self.not_exported.items())]
        out += [f"  note: {note}" for note in self.notes]
        return out


Progress = Callable[[int], None]


class Export:
    """One export's reading: counts, agents, submolts, and the threads sorted by post."""

    def __init__(
        self, source: RowSource, summary: ExportSummary, on_rows: Progress, exported: set[str]
    ) -> None:
        """``exported``: the event types the layout holds besides the threads, agents and submolts."""
        self.source = source
        self.summary = summary
        self.on_rows = on_rows
        self.read = 0
        self.counts = source.counts()
        self.agents: dict[str, Agent] = {}
        self.submolts: dict[str, Submolt] = {}
        held = {*THREAD_TYPES, "agent_registered", "agents_joined", "submolt_created", *exported}
        for etype, n in sorted(self.counts.items()):
            if etype not in held:
                summary.not_exported[f"{etype} events"] += n
        if self.counts.get("vote_cast"):
            summary.notes.append("votes are written as counts per post and comment (who voted is not in it)")

    def rows(self, event_type: str) -> Iterator[ExportRow]:
        if not self.counts.get(event_type):
            return
        for row in self.source.rows(event_type):
            self.read += 1
            if self.read % 5_000 == 0:
                self.on_rows(self.read)
            yield row

    def load_actors(self) -> None:
        """The agents and submolts (``agents``, ``submolts``)."""
        for row in self.rows("agent_registered"):
            body = orjson.loads(row.body)
            self.agents.setdefault(row.actor, Agent(body["name"], body.get("persona"), row.us))
        for row in self.rows("agents_joined"):
            for joined in orjson.loads(row.body)["agents"]:
                agent = Agent(joined["name"], joined.get("persona"), row.us)
                self.agents.setdefault(joined["agent_id"], agent)
                if joined.get("subscriptions"):
                    self.summary.not_exported["agent subscriptions"] += len(joined["subscriptions"])
        for row in self.rows("submolt_created"):
            body = orjson.loads(row.body)
            self.submolts.setdefault(
                row.submolt, Submolt(body.get("title", ""), body.get("description", ""), row.us)
            )

    def threads(self, folder: Path | None = None) -> Iterator[Thread]:
        """The posts with their comments and vote counts, grouped by post through a sort on disk."""
        sorter = ThreadSorter(folder)
        try:
            for etype in THREAD_TYPES:
                for row in self.rows(etype):
                    sorter.add(row)
            yield from sorter.threads(self.summary.not_exported)
        finally:
            sorter.close()

    def name_of(self, actor: str) -> str:
        agent = self.agents.get(actor)
        return agent.name if agent is not None else actor


def iso(us: int) -> str:
    """An event time as a zoned ISO 8601 text with microseconds (what the importers read back exactly)."""
    t: datetime = from_us(us)
    return t.isoformat(timespec="microseconds")


def partial_path(path: Path) -> Path:
    """Where an export is written before it is complete (renamed to ``path`` at the end)."""
    return path.with_name(path.name + ".partial")


@contextlib.contextmanager
def writing(path: Path) -> Iterator[Path]:
    """The path to write an export of ``path`` to (its folder made if missing): renamed to ``path`` when
    the block ends, removed when it raises, so that no file that looks whole is ever partial."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(path)
    tmp.unlink(missing_ok=True)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
