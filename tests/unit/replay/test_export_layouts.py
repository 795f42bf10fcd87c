"""``society export --format moltbook-json|observatory-sqlite`` (``replay.export_json``, ``export_sqlite``).

The exporters read the ``events`` table's rows; here the rows are made from events by the sink's own row
builder (``sinks.clickhouse.event_row``), and what is exported is read back by the project's importers:

- a simulated society (cohorts, votes cast, follows, model calls, a removal, a reply chain deeper than
  any JSON encoder's recursion limit): posts and comments come back with their ids, authors, times,
  texts, parents and depths; votes as counts equal to the votes cast (summed here, independently);
  what the layout cannot hold is counted by kind;
- a society imported from a dump in a layout, exported to that layout and imported again: the same events,
  ids included.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import orjson
import pytest

from molt_society.bench.archive_gen import generate
from molt_society.importers import import_path
from molt_society.replay.export_json import write_posts_full
from molt_society.replay.export_rows import ExportRow
from molt_society.replay.export_sqlite import write_observatory
from molt_society.schemas.events import (
    AgentFollowed,
    AgentFollowedBody,
    AgentRegistered,
    AgentRegisteredBody,
    AgentsJoined,
    AgentsJoinedBody,
    CommentCreated,
    CommentCreatedBody,
    ContentRemoved,
    ContentRemovedBody,
    Event,
    JoinedAgent,
    ModelCalled,
    ModelCalledBody,
    PostCreated,
    PostCreatedBody,
    SubmoltCreated,
    SubmoltCreatedBody,
    VoteCast,
    VoteCastBody,
)
from molt_society.schemas.wire import encode_event
from molt_society.sinks.clickhouse import event_row

T0 = datetime(2026, 2, 1, tzinfo=UTC)
CHAIN = 300  # deeper than orjson's and json's nesting limits would allow through recursion


@dataclass(frozen=True)
class _Record:
    value: bytes
    topic: str = "society.s.events"
    partition: int = 0
    offset: int = 0


def _row(event: Event) -> ExportRow:
    cols = event_row(_Record(encode_event(event)))
    (
        eid,
        _soc,
        etype,
        _v,
        actor,
        at,
        _cause,
        post,
        comment,
        parent,
        sub,
        depth,
        ttype,
        target,
        vote,
        title,
        content,
        body,
    ) = cols[:18]
    us = (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return ExportRow(
        etype,
        str(eid),
        actor,
        us,
        post,
        comment,
        parent,
        sub,
        depth,
        ttype,
        target,
        vote,
        title,
        content,
        body,
    )


class ListSource:
    def __init__(self, events: list[Event]) -> None:
        self.rows_ = [_row(e) for e in events]

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.type for r in self.rows_))

    def rows(self, event_type: str) -> Iterator[ExportRow]:
        return iter(sorted((r for r in self.rows_ if r.type == event_type), key=lambda r: r.event_id))


def _env(cls: Any, actor: str, seconds: float, body: Any) -> Event:
    return cls(
        event_id=uuid4(), society="s", actor=actor, occurred_at=T0 + timedelta(seconds=seconds), body=body
    )  # type: ignore[no-any-return]


def _simulated() -> list[Event]:
    ev: list[Event] = [
        _env(AgentsJoined, "a0", 0, AgentsJoinedBody(agents=tuple(
            JoinedAgent(agent_id=f"a{i}", name=f"agent {i}", persona=f"persona {i}",
                        subscriptions=("general",))
            for i in range(4)))),
        _env(AgentRegistered, "late", 5, AgentRegisteredBody(name="late one", brain="llm")),
        _env(AgentRegistered, "silent", 6, AgentRegisteredBody(name="never writes")),
        _env(SubmoltCreated, "platform", 1, SubmoltCreatedBody(submolt="general", title="General")),
        _env(SubmoltCreated, "platform", 2,
             SubmoltCreatedBody(submolt="meta", title="Meta", description="m")),
    ]  # fmt: skip
    t = 10.0
    for p in range(6):
        t += 7
        ev.append(
            _env(
                PostCreated,
                f"a{p % 4}",
                t,
                PostCreatedBody(
                    post_id=f"p{p}",
                    submolt=("general", "meta")[p % 2],
                    title=f"post {p}",
                    content=f"text {p}",
                ),
            )
        )
        parent: str | None = None
        for c in range(CHAIN if p == 3 else p):
            t += 0.5
            depth = c + 1 if p == 3 else (1 if c % 2 == 0 else 2)
            pid = parent if (p == 3 or depth == 2) else None
            ev.append(
                _env(
                    CommentCreated,
                    ("a1", "late", "a2")[c % 3],
                    t,
                    CommentCreatedBody(
                        comment_id=f"c{p}_{c}",
                        post_id=f"p{p}",
                        parent_id=pid,
                        depth=depth,
                        content=f"reply {c}",
                    ),
                )
            )
            parent = f"c{p}_{c}"
        for v in range(p + 2):
            t += 0.1
            ev.append(
                _env(
                    VoteCast,
                    f"a{v % 4}",
                    t,
                    VoteCastBody(
                        target_type="post", target_id=f"p{p}", post_id=f"p{p}", value=(1, 1, -1)[v % 3]
                    ),
                )
            )
        if p in (1, 2):
            ev.append(
                _env(
                    VoteCast,
                    "a3",
                    t + 0.05,
                    VoteCastBody(target_type="comment", target_id=f"c{p}_0", post_id=f"p{p}", value=1),
                )
            )
    ev += [
        _env(AgentFollowed, "a0", 100, AgentFollowedBody(target_agent="a1")),
        _env(AgentFollowed, "a0", 101, AgentFollowedBody(target_agent="a1")),  # again: one row
        _env(AgentFollowed, "a2", 102, AgentFollowedBody(target_agent="late")),
        _env(ModelCalled, "late", 103, ModelCalledBody(model="m", outcome="ok", decision="nothing")),
        _env(ContentRemoved, "platform", 104,
             ContentRemovedBody(target_type="post", target_id="p0", post_id="p0", rule="spam")),
    ]  # fmt: skip
    return ev


def _by_type(events: list[Event], etype: str) -> list[Event]:
    return [e for e in events if e.type == etype]


def _threads(events: list[Event]) -> dict[str, tuple[str, datetime, dict[str, Any]]]:
    """post/comment id -> (actor, time, body fields that a layout keeps)."""
    out: dict[str, tuple[str, datetime, dict[str, Any]]] = {}
    for e in events:
        if isinstance(e, PostCreated):
            out[e.body.post_id] = (
                e.actor,
                e.occurred_at,
                e.body.model_dump(include={"submolt", "title", "content"}),
            )
        elif isinstance(e, CommentCreated):
            keep = {"post_id", "parent_id", "depth", "content"}
            out[e.body.comment_id] = (e.actor, e.occurred_at, e.body.model_dump(include=keep))
    return out


def _votes(events: list[Event]) -> dict[str, tuple[int, int]]:
    """target -> (upvotes, downvotes) summed from the votes cast (or tallied)."""
    up: Counter[str] = Counter()
    down: Counter[str] = Counter()
    for e in events:
        if e.type == "vote_cast":
            (up if e.body.value > 0 else down)[e.body.target_id] += 1  # type: ignore[union-attr]
        elif e.type == "vote_tallied":
            up[e.body.target_id] += e.body.upvotes  # type: ignore[union-attr]
            down[e.body.target_id] += e.body.downvotes  # type: ignore[union-attr]
    return {t: (up[t], down[t]) for t in set(up) | set(down) if up[t] or down[t]}


@pytest.mark.parametrize("layout", ["observatory-sqlite", "moltbook-json"])
def test_a_simulated_society_exported_reads_back_with_its_threads(tmp_path: Path, layout: str) -> None:
    events = _simulated()
    path = tmp_path / ("society.sqlite" if layout == "observatory-sqlite" else "posts_full.json.gz")
    write = write_observatory if layout == "observatory-sqlite" else write_posts_full
    summary = write(path, ListSource(events))
    assert not (tmp_path / (path.name + ".partial")).exists()

    back = import_path(path, "s").events
    assert _threads(back) == _threads(events)
    assert max(e.body.depth for e in _by_type(back, "comment_created")) == CHAIN  # type: ignore[union-attr]
    cast = _votes(events)
    got = _votes(back)
    if layout == "observatory-sqlite":  # a net score: the importer reads it as up or down votes
        cast = {t: (max(u - d, 0), max(d - u, 0)) for t, (u, d) in cast.items() if u != d}
    assert got == cast
    comments = Counter(e.body.post_id for e in _by_type(events, "comment_created"))  # type: ignore[union-attr]
    tallies = [e.body for e in _by_type(back, "vote_tallied")]
    reported = {b.target_id: b.reported_comments for b in tallies if b.target_type == "post"}  # type: ignore[union-attr]
    assert {p: n for p, n in reported.items() if n} == {p: n for p, n in comments.items() if p in reported}

    registered = {e.actor: e.occurred_at for e in _by_type(back, "agent_registered")}
    first_act: dict[str, datetime] = {}
    for e in sorted(
        _by_type(events, "post_created") + _by_type(events, "comment_created"), key=lambda e: e.occurred_at
    ):
        first_act.setdefault(e.actor, e.occurred_at)
    assert summary.not_exported["model_called events"] == 1
    assert summary.not_exported["content_removed events"] == 1
    assert summary.not_exported["agent subscriptions"] == 4
    if layout == "observatory-sqlite":
        joined = {f"a{i}": T0 for i in range(4)} | {
            "late": T0 + timedelta(seconds=5),
            "silent": T0 + timedelta(seconds=6),
        }
        assert registered == joined
        follows = {(e.actor, e.body.target_agent) for e in _by_type(back, "agent_followed")}  # type: ignore[union-attr]
        assert follows == {("a0", "a1"), ("a2", "late")}
        assert summary.not_exported["repeated follows of the same pair (the first kept)"] == 1
        db = sqlite3.connect(path)
        assert db.execute("SELECT description FROM agents WHERE id = 'a2'").fetchone() == ("persona 2",)
        assert db.execute("SELECT display_name FROM submolts WHERE name = 'meta'").fetchone() == ("Meta",)
    else:
        assert registered == first_act  # no agents listing in the layout: registered at the first act
        assert summary.not_exported["agent_followed events"] == 3
        assert (
            summary.not_exported["agents without a post or comment (the layout has no agents listing)"] == 1
        )
        subs = {e.body.submolt: e.body.title for e in _by_type(back, "submolt_created")}  # type: ignore[union-attr]
        assert subs == {"general": "General", "meta": "Meta"}
    assert summary.written["posts"] == 6
    assert summary.written["comments"] == len(_by_type(events, "comment_created"))


def _canon(events: list[Event]) -> list[bytes]:
    return sorted(encode_event(e) for e in events)


@pytest.mark.parametrize(
    ("layout", "file"), [("observatory-sqlite", "observatory.sqlite"), ("moltbook-json", "posts_full.json")]
)
def test_an_imported_dump_exported_to_its_layout_imports_to_the_same_events(
    tmp_path: Path, layout: str, file: str
) -> None:
    generate(tmp_path / "gen", 300, seed=5, layouts=[layout])
    first = import_path(tmp_path / "gen" / file, "s").events
    out = tmp_path / ("again.sqlite" if layout == "observatory-sqlite" else "again.json")
    write = write_observatory if layout == "observatory-sqlite" else write_posts_full
    summary = write(out, ListSource(first))
    again = import_path(out, "s").events
    assert len(again) == len(first)
    assert _canon(again) == _canon(first)
    assert (
        summary.written["posts"] == json.loads((tmp_path / "gen" / "manifest.json").read_text())[0]["posts"]
    )
    assert not summary.not_exported or set(summary.not_exported) == {
        "agents without a post or comment (the layout has no agents listing)"
    }


def test_the_json_export_is_one_array_of_posts_with_nested_replies(tmp_path: Path) -> None:
    out = tmp_path / "posts_full.json"
    write_posts_full(out, ListSource(_simulated()))
    posts = orjson.loads(out.read_bytes())
    assert [p["id"] for p in posts] == [f"p{i}" for i in range(6)]
    p2 = posts[2]
    assert p2["author"] == {"id": "a2", "name": "agent 2"}
    assert [c["id"] for c in p2["comments"]] == ["c2_0"]
    assert [r["id"] for r in p2["comments"][0]["replies"]] == ["c2_1"]
    assert p2["comments"][0]["upvotes"] == 1
    assert p2["comment_count"] == 2
