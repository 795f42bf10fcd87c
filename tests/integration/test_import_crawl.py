"""The real crawl (``crawl-2026-01-31``: 8,438 raw ``GET /posts/<id>`` responses) imports exactly what a
direct reading of its files holds: every post, every nested comment at its depth, every author and every
submolt. The direct reading below uses plain json and walks ``replies`` itself, not the importer's code.
"""

from __future__ import annotations

import json
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from stack_helpers import CRAWL_ARCHIVE, needs_crawl

from molt_society.importers import ImportResult, import_path
from molt_society.schemas import events as E

pytestmark = needs_crawl()


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crawl")
    with tarfile.open(CRAWL_ARCHIVE) as tar:
        tar.extractall(out, filter="data")
    return out / "posts"


@pytest.fixture(scope="module")
def imported(crawl: Path) -> ImportResult:
    return import_path(crawl, "crawl")


def direct_reading(folder: Path) -> tuple[set[str], dict[str, int], set[str], set[str]]:
    """(post ids, comment id -> depth (1 = top-level), author ids, submolt names), read with json."""
    posts: set[str] = set()
    depths: dict[str, int] = {}
    authors: set[str] = set()
    submolts: set[str] = set()
    for path in folder.glob("*.json"):
        doc = json.loads(path.read_bytes())
        post = doc["post"]
        posts.add(post["id"])
        submolts.add(post["submolt"]["name"])
        if post["author"]:
            authors.add(post["author"]["id"])
        todo = [(c, 1) for c in doc.get("comments") or []]
        while todo:
            c, depth = todo.pop()
            depths[c["id"]] = depth
            if c["author"]:
                authors.add(c["author"]["id"])
            todo.extend((r, depth + 1) for r in c.get("replies") or [])
    return posts, depths, authors, submolts


def test_the_crawl_imports_exactly_what_its_files_hold(crawl: Path, imported: ImportResult) -> None:
    posts, depths, authors, submolts = direct_reading(crawl)
    assert (len(posts), len(depths)) == (8438, 77544)  # the sizes the data's README states
    assert max(depths.values()) == 5
    events = imported.events
    assert {e.body.post_id for e in events if isinstance(e, E.PostCreated)} == posts
    got = {e.body.comment_id: e.body.depth for e in events if isinstance(e, E.CommentCreated)}
    assert got == depths
    assert Counter(got.values()) == Counter(depths.values())
    assert {e.actor for e in events if isinstance(e, E.AgentRegistered)} == authors
    assert {e.body.submolt for e in events if isinstance(e, E.SubmoltCreated)} == submolts
    report = imported.report
    assert report.error_count == 0
    assert report.skipped_by_reason() == Counter()
    assert report.read_by_kind() == Counter({"posts": len(posts), "comments": len(depths)})
    assert all(f.status == "imported" and f.shape == "api_post_detail" for f in report.files)
    assert report.ignored_fields()["post.url"] == len(posts)  # read, left out of the events, counted
