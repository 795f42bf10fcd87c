"""``society export NAME --format observatory-sqlite``: a society as the observatory's SQLite database.

The schema of kelkalot/moltbook-observatory (``observatory/database/migrations.py``): ``agents``
(``created_at`` = registration), ``posts`` (net ``score``, ``comment_count``), ``comments`` (``parent_id``
NULL for a top-level comment), ``submolts``, ``follows`` (``first_seen_at`` = the follow's time). One
difference: ``agents.name`` is not declared UNIQUE, since a society's names need not be (every agent is
written; the observatory reads them by id). Scores are the votes cast plus the tallied counts (the
warehouse's ``threads`` view). The file is written beside its path as ``<path>.partial`` and renamed when
complete: an interrupted export leaves no file that looks whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import orjson

from molt_society.replay.export_layout import (
    UNKNOWN,
    Export,
    ExportSummary,
    Progress,
    RowSource,
    iso,
    writing,
)
from molt_society.replay.export_threads import Thread

SCHEMA = """
CREATE TABLE agents (id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT,
  karma INTEGER DEFAULT 0, follower_count INTEGER DEFAULT 0, following_count INTEGER DEFAULT 0,
  is_claimed BOOLEAN DEFAULT FALSE, owner_x_handle TEXT, first_seen_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  last_seen_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, created_at TIMESTAMP, avatar_url TEXT);
CREATE TABLE posts (id TEXT PRIMARY KEY, agent_id TEXT REFERENCES agents(id), agent_name TEXT, submolt TEXT,
  title TEXT, content TEXT, url TEXT, score INTEGER DEFAULT 0, comment_count INTEGER DEFAULT 0,
  created_at TIMESTAMP, fetched_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, is_pinned BOOLEAN DEFAULT FALSE);
CREATE TABLE comments (id TEXT PRIMARY KEY, post_id TEXT REFERENCES posts(id),
  agent_id TEXT REFERENCES agents(id), agent_name TEXT, parent_id TEXT, content TEXT,
  score INTEGER DEFAULT 0, created_at TIMESTAMP, fetched_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE submolts (name TEXT PRIMARY KEY, display_name TEXT, description TEXT,
  subscriber_count INTEGER DEFAULT 0, post_count INTEGER DEFAULT 0, created_at TIMESTAMP,
  first_seen_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, avatar_url TEXT, banner_url TEXT);
CREATE TABLE follows (follower_id TEXT REFERENCES agents(id), following_id TEXT REFERENCES agents(id),
  first_seen_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (follower_id, following_id));
"""
BATCH = 5_000


def write_observatory(path: Path, source: RowSource, on_rows: Progress = lambda n: None) -> ExportSummary:
    """Write the society of ``source`` to the SQLite file ``path`` (replaced if it exists)."""
    summary = ExportSummary("observatory-sqlite", path)
    export = Export(source, summary, on_rows, exported={"agent_followed"})
    with writing(path) as tmp:
        db = sqlite3.connect(tmp)
        try:
            db.executescript(SCHEMA)
            export.load_actors()
            _agents(db, export)
            _submolts(db, export)
            _threads(db, export, tmp.parent)
            _follows(db, export)
            db.commit()
        finally:
            db.close()
    if export.counts.get("comment_created"):
        summary.notes.append(
            "a comment's depth is its parent chain's (a reply whose parent was unknown is top-level)"
        )
    return summary


def _agent_id(actor: str) -> str | None:
    return None if actor == UNKNOWN else actor


def _agents(db: sqlite3.Connection, export: Export) -> None:
    rows = ((actor, a.name, a.persona, iso(a.us), iso(a.us), iso(a.us)) for actor, a in export.agents.items())
    db.executemany(
        "INSERT INTO agents (id, name, description, created_at, first_seen_at, last_seen_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )
    export.summary.written["agents"] = len(export.agents)


def _submolts(db: sqlite3.Connection, export: Export) -> None:
    db.executemany(
        "INSERT INTO submolts (name, display_name, description, created_at) VALUES (?, ?, ?, ?)",
        ((name, s.title or None, s.description or None, iso(s.us)) for name, s in export.submolts.items()),
    )
    export.summary.written["submolts"] = len(export.submolts)


def _post_row(export: Export, t: Thread) -> tuple[object, ...]:
    p = t.post
    pid = p.post_id
    return (
        pid, _agent_id(p.actor), export.name_of(p.actor) if p.actor != UNKNOWN else None,
        None if p.submolt == UNKNOWN else p.submolt, p.title, p.content,
        t.up[pid] - t.down[pid], t.comment_count(), iso(p.us),
    )  # fmt: skip


def _comment_rows(export: Export, t: Thread) -> Iterator[tuple[object, ...]]:
    for c in t.comments:
        cid = c.comment_id
        if c.parent_id == "" and c.depth > 1:
            export.summary.not_exported[
                "reply depths of replies with an unknown parent (written top-level)"
            ] += 1
        yield (
            cid, c.post_id, _agent_id(c.actor), export.name_of(c.actor) if c.actor != UNKNOWN else None,
            c.parent_id or None, c.content, t.up[cid] - t.down[cid], iso(c.us),
        )  # fmt: skip


def _threads(db: sqlite3.Connection, export: Export, folder: Path) -> None:
    posts: list[tuple[object, ...]] = []
    comments: list[tuple[object, ...]] = []
    for t in export.threads(folder):
        posts.append(_post_row(export, t))
        comments.extend(_comment_rows(export, t))
        if len(posts) + len(comments) >= BATCH:
            _insert_threads(db, posts, comments, export)
            posts, comments = [], []
    _insert_threads(db, posts, comments, export)


def _insert_threads(
    db: sqlite3.Connection,
    posts: list[tuple[object, ...]],
    comments: list[tuple[object, ...]],
    export: Export,
) -> None:
    db.executemany(
        "INSERT INTO posts (id, agent_id, agent_name, submolt, title, content, score, comment_count, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        posts,
    )
    db.executemany(
        "INSERT INTO comments (id, post_id, agent_id, agent_name, parent_id, content, score, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        comments,
    )
    export.summary.written["posts"] += len(posts)
    export.summary.written["comments"] += len(comments)


def _follows(db: sqlite3.Connection, export: Export) -> None:
    batch: list[tuple[str, str, str]] = []
    for row in export.rows("agent_followed"):
        batch.append((row.actor, orjson.loads(row.body)["target_agent"], iso(row.us)))
        if len(batch) >= BATCH:
            _insert_follows(db, batch, export)
            batch = []
    _insert_follows(db, batch, export)


def _insert_follows(db: sqlite3.Connection, batch: list[tuple[str, str, str]], export: Export) -> None:
    before = db.total_changes
    db.executemany(
        "INSERT OR IGNORE INTO follows (follower_id, following_id, first_seen_at) VALUES (?, ?, ?)", batch
    )
    added = db.total_changes - before
    export.summary.written["follows"] += added
    if len(batch) > added:
        export.summary.not_exported["repeated follows of the same pair (the first kept)"] += (
            len(batch) - added
        )
