"""``python -m molt_society.bench.archive_gen``: a MoltBook-shaped archive in the community's layouts.

Written independently of the importers (plain ``sqlite3`` and JSON, no project code), so that what an
import stores can be checked against what the generator says it wrote:

- ``observatory.sqlite``: the schema of kelkalot/moltbook-observatory
  (``observatory/database/migrations.py``): ``agents``, ``posts``, ``comments`` (``parent_id`` NULL for a
  top-level comment), ``submolts``, ``follows``; net ``score`` only.
- ``posts_full.json``: one JSON array of posts as the API's post detail gives them, each with its
  ``comments`` tree nested through ``replies`` (takschdube/moltbook-dataset's ``raw/posts_full.json``);
  ``upvotes``/``downvotes``.

Both layouts hold the same society (same seed): posts over seven days in Zipf-popular submolts by
Zipf-active agents, threads that rarely go deeper than one reply, and one long reply chain so the deepest
comment is known. ``manifest.json`` beside the files gives the counts the generator computed while
writing: posts, comments, distinct authors, agents listed, follows, submolts and the deepest comment
(1 = a top-level comment).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import random
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

START = datetime(2026, 1, 28, tzinfo=UTC)
SPAN_S = 7 * 86_400
SCHEMA = """
CREATE TABLE agents (id TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL, description TEXT,
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
TOPICS = (
    "agent memory context tokens model human loop emergence society karma submolt protocol alignment tool "
    "reason signal noise feed thread reply vote upvote consensus drift identity persona prompt weights"
)
WORDS = TOPICS.split(" ")


@dataclass
class Counts:
    posts: int = 0
    comments: int = 0
    deepest: int = 0
    authors: set[str] = field(default_factory=set)
    agents: int = 0
    follows: int = 0
    submolts: int = 0


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="microseconds")


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


class Society:
    """The generated society: agents, submolts, and posts with their threads, one post at a time."""

    def __init__(self, posts: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n_posts = posts
        n_agents = max(10, posts // 5)
        self.agents = [(_uuid(self.rng), f"agent_{i:07d}") for i in range(n_agents)]
        self.created = [START - timedelta(seconds=self.rng.randrange(30 * 86_400)) for _ in self.agents]
        self.cum = list(itertools.accumulate(1.0 / (i + 1) ** 0.8 for i in range(n_agents)))
        self.submolts = [f"sub_{i:04d}" for i in range(max(3, min(2_000, posts // 500)))]
        self.sub_cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(self.submolts))))
        self.deep_post = posts // 2  # the post that carries the long reply chain

    def _agent(self) -> int:
        return bisect.bisect_right(self.cum, self.rng.random() * self.cum[-1])

    def posts(self) -> Iterator[dict[str, Any]]:
        rng = self.rng
        for i in range(self.n_posts):
            at = START + timedelta(microseconds=rng.randrange(SPAN_S * 1_000_000))
            a = self._agent()
            post: dict[str, Any] = {
                "id": _uuid(rng),
                "title": _text(rng, rng.randint(3, 10)),
                "content": _text(rng, rng.randint(10, 60)),
                "agent": a,
                "submolt": self.submolts[bisect.bisect_right(self.sub_cum, rng.random() * self.sub_cum[-1])],
                "created_at": at,
                "upvotes": int(rng.paretovariate(1.5)) - 1,
                "downvotes": rng.choice((0, 0, 0, 1)),
            }
            post["comments"] = self._thread(post, chain=40 if i == self.deep_post else 0)
            yield post

    def _thread(self, post: dict[str, Any], chain: int) -> list[dict[str, Any]]:
        rng = self.rng
        top = [self._comment(post["created_at"], 1) for _ in range(min(50, int(rng.expovariate(0.6))))]
        frontier = list(top)
        while frontier:
            c = frontier.pop()
            if rng.random() < 0.25 / c["depth"]:
                reply = self._comment(c["created_at"], c["depth"] + 1)
                c["replies"].append(reply)
                frontier.append(reply)
        if chain:
            node = top[0] if top else None
            if node is None:
                node = self._comment(post["created_at"], 1)
                top.append(node)
            while node["depth"] < chain:
                reply = self._comment(node["created_at"], node["depth"] + 1)
                node["replies"].append(reply)
                node = reply
        return top

    def _comment(self, after: datetime, depth: int) -> dict[str, Any]:
        rng = self.rng
        return {
            "id": _uuid(rng),
            "agent": self._agent(),
            "content": _text(rng, rng.randint(4, 40)),
            "created_at": after + timedelta(microseconds=1 + int(rng.expovariate(1 / 1_800) * 1e6)),
            "upvotes": rng.choice((0, 0, 1, 2)),
            "downvotes": 0,
            "depth": depth,
            "replies": [],
        }


def _walk(comments: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], str | None]]:
    stack: list[tuple[dict[str, Any], str | None]] = [(c, None) for c in reversed(comments)]
    while stack:
        c, parent = stack.pop()
        yield c, parent
        stack.extend((r, c["id"]) for r in reversed(c["replies"]))


def _count(counts: Counts, soc: Society, post: dict[str, Any]) -> None:
    counts.posts += 1
    counts.authors.add(soc.agents[post["agent"]][0])
    for c, _ in _walk(post["comments"]):
        counts.comments += 1
        counts.deepest = max(counts.deepest, c["depth"])
        counts.authors.add(soc.agents[c["agent"]][0])


def _api_comment(soc: Society, c: dict[str, Any], post_id: str, parent: str | None) -> dict[str, Any]:
    aid, name = soc.agents[c["agent"]]
    return {
        "id": c["id"],
        "post_id": post_id,
        "parent_id": parent,
        "content": c["content"],
        "author": {"id": aid, "name": name},
        "upvotes": c["upvotes"],
        "downvotes": c["downvotes"],
        "created_at": _iso(c["created_at"]),
        "replies": [_api_comment(soc, r, post_id, c["id"]) for r in c["replies"]],
    }


def write_posts_full(path: Path, posts: int, seed: int) -> Counts:
    soc, counts = Society(posts, seed), Counts()
    with path.open("wb") as f:
        f.write(b"[\n")
        for i, p in enumerate(soc.posts()):
            _count(counts, soc, p)
            aid, name = soc.agents[p["agent"]]
            n = sum(1 for _ in _walk(p["comments"]))
            doc = {
                "id": p["id"],
                "title": p["title"],
                "content": p["content"],
                "author": {"id": aid, "name": name},
                "submolt": {"name": p["submolt"], "display_name": p["submolt"].replace("_", " ")},
                "upvotes": p["upvotes"],
                "downvotes": p["downvotes"],
                "comment_count": n,
                "created_at": _iso(p["created_at"]),
                "comments": [_api_comment(soc, c, p["id"], None) for c in p["comments"]],
            }
            f.write((b",\n" if i else b"") + orjson.dumps(doc))
        f.write(b"\n]\n")
    counts.submolts = len({s for s in soc.submolts})
    return counts


def write_observatory(path: Path, posts: int, seed: int) -> Counts:
    soc, counts = Society(posts, seed), Counts()
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    with db:
        db.executemany(
            "INSERT INTO agents (id, name, description, created_at) VALUES (?, ?, ?, ?)",
            (
                (a, n, f"generated agent {n}", _iso(t))
                for (a, n), t in zip(soc.agents, soc.created, strict=True)
            ),
        )
        counts.agents = len(soc.agents)
        used: set[str] = set()
        for p in soc.posts():
            _count(counts, soc, p)
            used.add(p["submolt"])
            aid, name = soc.agents[p["agent"]]
            rows = [(c["id"], p["id"], *soc.agents[c["agent"]], parent, c["content"],
                     c["upvotes"] - c["downvotes"], _iso(c["created_at"]))
                    for c, parent in _walk(p["comments"])]  # fmt: skip
            score = p["upvotes"] - p["downvotes"]
            db.execute(
                "INSERT INTO posts (id, agent_id, agent_name, submolt, title, content, score, comment_count,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    p["id"],
                    aid,
                    name,
                    p["submolt"],
                    p["title"],
                    p["content"],
                    score,
                    len(rows),
                    _iso(p["created_at"]),
                ),
            )
            db.executemany(
                "INSERT INTO comments (id, post_id, agent_id, agent_name, parent_id, content, score,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        db.executemany(
            "INSERT INTO submolts (name, display_name, description) VALUES (?, ?, ?)",
            ((s, s.replace("_", " "), f"the {s} community") for s in soc.submolts),
        )
        counts.submolts = len(soc.submolts)
        follows: set[tuple[int, int]] = set()
        seen = START + timedelta(days=8)
        for _ in range(len(soc.agents)):
            a, b = soc._agent(), soc._agent()
            if a != b:
                follows.add((a, b))
        db.executemany(
            "INSERT INTO follows (follower_id, following_id, first_seen_at) VALUES (?, ?, ?)",
            ((soc.agents[a][0], soc.agents[b][0], _iso(seen)) for a, b in sorted(follows)),
        )
        counts.follows = len(follows)
    db.close()
    return counts


def manifest(counts: Counts, layout: str, path: Path, seconds: float) -> dict[str, Any]:
    return {
        "layout": layout,
        "file": path.name,
        "bytes": path.stat().st_size,
        "posts": counts.posts,
        "comments": counts.comments,
        "authors": len(counts.authors),
        "deepest_comment": counts.deepest,
        "agents_listed": counts.agents,
        "follows": counts.follows,
        "submolts": counts.submolts,
        "seconds": round(seconds, 1),
    }


def generate(out: Path, posts: int, seed: int, layouts: list[str]) -> list[dict[str, Any]]:
    """Write the layouts into ``out``; their manifests (also written to ``out/manifest.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    done = []
    for layout in layouts:
        t0 = time.perf_counter()
        if layout == "observatory-sqlite":
            path = out / "observatory.sqlite"
            counts = write_observatory(path, posts, seed)
        else:
            path = out / "posts_full.json"
            counts = write_posts_full(path, posts, seed)
        done.append(manifest(counts, layout, path, time.perf_counter() - t0))
    (out / "manifest.json").write_text(json.dumps(done, indent=2) + "\n", encoding="utf-8")
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--posts", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("archive-gen"))
    ap.add_argument(
        "--layout",
        action="append",
        choices=["observatory-sqlite", "posts-full-json"],
        help="layouts to write (default both)",
    )
    args = ap.parse_args()
    layouts = args.layout or ["observatory-sqlite", "posts-full-json"]
    for m in generate(args.out, args.posts, args.seed, layouts):
        print(json.dumps(m))


if __name__ == "__main__":
    main()
