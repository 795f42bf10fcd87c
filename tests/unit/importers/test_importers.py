"""Importers of real MoltBook dumps: counts against the shared samples, bad input, determinism.

Expectations are computed here by reading the sample files directly with json/csv, never through the
importer, and compared with what the importer's events say.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from molt_society.importers import ImportResult, import_path
from molt_society.schemas import events as E
from molt_society.schemas.wire import decode_event, encode_event
from molt_society.streams.partition_state import Accepted, PartitionState

DATA = Path(
    os.environ.get("MOLTBOOK_DATA") or Path(__file__).resolve().parents[4] / "shared" / "data" / "moltbook"
)
# CI has shared/ beside the clone: there a missing sample folder is a failure, not a skip.
if os.environ.get("CI") and not DATA.is_dir():
    raise RuntimeError(f"MoltBook samples not found at {DATA} (set MOLTBOOK_DATA)")
VIYERCAL = DATA / "api-samples" / "viyercal-moltbook_safety"
SUSHANT = DATA / "api-samples" / "SushantGautam-moltbook-observatory"
KELKALOT = DATA / "api-samples" / "kelkalot-moltbook-observatory" / "sample_data"
POSTS_RAW = DATA / "observatory-export" / "public" / "data" / "all" / "posts_raw.json"
DAILY = DATA / "observatory-export" / "public" / "data" / "daily"
DETAIL = SUSHANT / "sample_API_calls_json" / "get_post_with_comments.json"

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"MoltBook samples not found at {DATA}")


@dataclass(frozen=True)
class Stats:
    posts: int
    comments: int
    authors: int
    submolts: int
    max_depth: int
    share_without_comments: float


def stats_of_events(result: ImportResult) -> Stats:
    """The sample statistics as the importer's events tell them."""
    by_type = Counter(e.type for e in result.events)
    depths = [e.body.depth for e in result.events if isinstance(e, E.CommentCreated)]
    with_comments = {
        e.body.post_id
        for e in result.events
        if isinstance(e, E.VoteTallied)
        and e.body.target_type == "post"
        and (e.body.reported_comments or 0) > 0
    }
    posts = by_type["post_created"]
    return Stats(
        posts=posts,
        comments=by_type["comment_created"],
        authors=by_type["agent_registered"],
        submolts=by_type["submolt_created"],
        max_depth=max(depths, default=0),
        share_without_comments=round(1 - len(with_comments) / posts, 6) if posts else 0.0,
    )


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _walk(comments: list[dict[str, Any]], depth: int = 1) -> list[tuple[dict[str, Any], int]]:
    out: list[tuple[dict[str, Any], int]] = []
    stack = [(c, depth) for c in reversed(comments)]
    while stack:
        c, d = stack.pop()
        out.append((c, d))
        stack.extend((r, d + 1) for r in reversed(c.get("replies") or []))
    return out


def expected_api(folder: Path) -> Stats:
    """API post details and listings: first copy of each post (sorted paths) wins, as documented."""
    posts: dict[str, dict[str, Any]] = {}
    comments: dict[str, int] = {}
    authors: set[str] = set()
    for f in sorted(folder.rglob("*.json")):
        doc = _load(f)
        items = [doc["post"]] if "post" in doc else doc.get("posts", [])
        for p in items:
            posts.setdefault(p["id"], p)
        for c, d in _walk(doc.get("comments", [])):
            comments.setdefault(c["id"], d)
            if c.get("author"):
                authors.add(c["author"]["id"])
    for p in posts.values():
        if p.get("author"):
            authors.add(p["author"]["id"])
    submolts = {p["submolt"]["name"] for p in posts.values() if p.get("submolt")}
    zero = sum(1 for p in posts.values() if not p["comment_count"])
    return Stats(
        len(posts),
        len(comments),
        len(authors),
        len(submolts),
        max(comments.values(), default=0),
        round(zero / len(posts), 6),
    )


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def expected_csv(folder: Path) -> Stats:
    posts = _csv(folder / "moltbook_posts.csv")
    comments = _csv(folder / "moltbook_comments.csv")
    agents = _csv(folder / "moltbook_agents.csv")
    authors = {r["agent_name"] for r in posts + comments} | {a["name"] for a in agents if a["created_at"]}
    assert all(not c["parent_id"] for c in comments)  # every comment is top-level in this export
    zero = sum(1 for p in posts if p["comment_count"] == "0")
    return Stats(
        len({p["id"] for p in posts}),
        len({c["id"] for c in comments}),
        len(authors),
        len({p["submolt"] for p in posts}),
        1 if comments else 0,
        round(zero / len(posts), 6),
    )


def expected_posts_raw(path: Path) -> Stats:
    posts = _load(path)
    zero = sum(1 for p in posts if not p["comment_count"])
    return Stats(
        len({p["id"] for p in posts}),
        0,
        len({p["author"] for p in posts if p.get("author")}),
        0,  # the flat array names no submolts
        0,
        round(zero / len(posts), 6),
    )


def expected_daily(folder: Path) -> Stats:
    posts = _load(folder / "posts.json")["posts"]
    comments = _load(folder / "comments.json")["comments"]
    authors = {x["author"] for x in posts + comments if x.get("author")}
    zero = sum(1 for p in posts if not p["comment_count"])
    return Stats(
        len({p["id"] for p in posts}),
        len({c["id"] for c in comments}),
        len(authors),
        len({p["submolt"] for p in posts if p.get("submolt")}),
        max((c["depth"] + 1 for c in comments), default=0),
        round(zero / len(posts), 6),
    )


SAMPLES = {
    "viyercal-api": (VIYERCAL, expected_api),
    "sushant-api": (SUSHANT, expected_api),
    "kelkalot-csv": (KELKALOT, expected_csv),
    "observatory-posts-raw": (POSTS_RAW, expected_posts_raw),
    "observatory-daily": (DAILY / "2026-02-03", expected_daily),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_counts_match_the_files(name: str) -> None:
    path, expected = SAMPLES[name]
    result = import_path(path, "moltbook")
    assert stats_of_events(result) == expected(path)
    assert result.report.error_count == 0


def test_known_sample_numbers() -> None:
    """The sizes the README states, read by the importer."""
    assert stats_of_events(import_path(POSTS_RAW, "m")).posts == 5389
    daily = stats_of_events(import_path(DAILY, "m"))
    assert daily.comments == 578
    csvs = stats_of_events(import_path(KELKALOT, "m"))
    assert (csvs.posts, csvs.comments) == (1710, 97)
    detail = import_path(DETAIL, "m")
    assert stats_of_events(detail).comments == 100
    assert stats_of_events(detail).max_depth == 2


@functools.cache
def everything() -> Any:
    """Every sample and the crawl, imported once per process (the two tests below share it)."""
    return import_path(DATA, "moltbook")


@pytest.mark.xdist_group("everything")  # one process imports it for both (tests/suite.sh: --dist loadgroup)
def test_every_event_is_valid_sorted_and_accepted_by_the_stream_processor() -> None:
    result = everything()
    assert result.report.error_count == 0
    keys = [(e.occurred_at, e.event_id.int) for e in result.events]
    assert keys == sorted(keys)
    assert len({e.event_id for e in result.events}) == len(result.events)
    state = PartitionState(
        0, 1, window_us=3_600_000_000, feed_size=5, max_event_bytes=65536, max_future_us=2**62
    )
    for event in result.events:
        raw = encode_event(event)
        assert decode_event(raw, max_bytes=65536) == event
        outcome = state.accept_action(raw, now_us=2**62)
        assert isinstance(outcome, Accepted), outcome


def test_unknown_shapes_are_left_aside_with_their_name() -> None:
    report = import_path(DATA / "observatory-export", "m").report
    for name in ("temp_data/2026-02-01/raw/network.csv", "temp_data/2026-02-01/metadata.json"):
        entry = report.file(name)
        assert entry.status == "skipped"
        assert entry.skip_reason is not None
        assert "unknown shape" in entry.skip_reason
        assert name in entry.skip_reason
    assert "network.csv" in report.render()


def test_api_thread_depth_parents_and_counts() -> None:
    result = import_path(DETAIL, "m")
    doc = _load(DETAIL)
    comments = {e.body.comment_id: e for e in result.events if isinstance(e, E.CommentCreated)}
    for c, depth in _walk(doc["comments"]):
        ev = comments[c["id"]]
        assert ev.body.depth == depth
        assert ev.body.parent_id == c["parent_id"]
        assert not ev.body.parent_unknown
        assert ev.causation_id == (c["parent_id"] or doc["post"]["id"])
        assert ev.actor == c["author"]["id"]
    (tally,) = [e for e in result.events if isinstance(e, E.VoteTallied) and e.body.target_type == "post"]
    post = doc["post"]
    assert (tally.body.upvotes, tally.body.downvotes) == (post["upvotes"], post["downvotes"])
    assert tally.body.reported_comments == post["comment_count"] == 2607  # only 100 are in the dump
    assert tally.actor == "platform"
    assert len(comments) == 100


def test_flat_comments_have_unknown_parents_only_when_not_top_level(tmp_path: Path) -> None:
    src = _load(DAILY / "2026-02-03" / "comments.json")
    post = _load(DAILY / "2026-02-03" / "posts.json")["posts"][0]
    mine = [dict(c, post_id=post["id"]) for c in src["comments"][:3]]
    mine[1]["depth"] = 2
    (tmp_path / "posts.json").write_text(json.dumps({"date": "d", "total": 1, "posts": [post]}))
    (tmp_path / "comments.json").write_text(json.dumps({"date": "d", "total": 3, "comments": mine}))
    result = import_path(tmp_path, "m")
    got = {e.body.comment_id: e.body for e in result.events if isinstance(e, E.CommentCreated)}
    assert got[mine[0]["id"]].depth == 1
    assert not got[mine[0]["id"]].parent_unknown
    assert got[mine[1]["id"]].depth == 3
    assert got[mine[1]["id"]].parent_unknown
    assert got[mine[1]["id"]].parent_id is None


def test_missing_authors_become_unknown_and_are_counted() -> None:
    result = import_path(DAILY, "m")
    comments = _load(DAILY / "2026-02-03" / "comments.json")["comments"]
    missing = sum(1 for c in comments if not c.get("author"))
    unknown = [e for e in result.events if isinstance(e, E.CommentCreated) and e.actor == "unknown"]
    assert len(unknown) == missing > 0
    entry = result.report.file("2026-02-03/comments.json")
    (reason,) = [r for r in entry.notes if r.startswith("author missing")]
    assert entry.notes[reason].count == missing
    assert not any(isinstance(e, E.AgentRegistered) and e.actor == "unknown" for e in result.events)


# --- bad input ------------------------------------------------------------------------------------


def test_truncated_json_is_an_error_with_a_position_and_other_files_still_import(tmp_path: Path) -> None:
    raw = DETAIL.read_bytes()
    (tmp_path / "cut.json").write_bytes(raw[:5000])
    (tmp_path / "good.json").write_bytes(raw)
    result = import_path(tmp_path, "m")
    entry = result.report.file("cut.json")
    assert entry.status == "partial"  # streamed: the post and the comments before the cut are read
    (err,) = entry.errors
    lines = raw[:5000].split(b"\n")
    last_line = lines[-1].decode("utf-8", "replace")
    assert err.position == f"line {len(lines)} column {len(last_line) + 1} (byte 5000)"
    assert "cut short" in err.message
    text = result.report.render()
    assert "cut.json" in text
    assert err.position in text
    assert stats_of_events(result).comments == 100  # good.json still imported


def test_a_deeply_nested_file_is_an_error_not_the_machine(tmp_path: Path) -> None:
    """200 KB of ``[[[[...`` once took the importer to 23 GB (ijson's builder); it is one error now, and
    the other files still import."""
    import resource

    (tmp_path / "deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (tmp_path / "deep_in_object.json").write_bytes(b'{"posts": [' + b"[" * 100_000 + b"]" * 100_001 + b"}")
    (tmp_path / "good.json").write_bytes(DETAIL.read_bytes())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = import_path(tmp_path, "m")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    for name in ("deep.json", "deep_in_object.json"):
        entry = result.report.file(name)
        assert entry.status == "failed", (name, entry)
        assert "nests deeper than 512 levels" in entry.errors[0].message
        assert "byte" in entry.errors[0].position
    assert stats_of_events(result).comments == 100
    assert grown_mib < 200


def test_a_deeply_nested_file_over_the_in_memory_size_is_an_error_too(tmp_path: Path) -> None:
    """A file larger than ``IN_MEMORY_MAX`` is streamed; 20 MB of nested arrays took ijson's C item
    builder 23 GB and 3 minutes. Parsed in a child limited to 2 GiB of address space (so that a regression
    fails here instead of taking the machine): one error naming the depth and the byte."""
    from molt_society.importers.jsonstream import IN_MEMORY_MAX

    n = IN_MEMORY_MAX // 2 + 1000
    path = tmp_path / "deep_large.json"
    path.write_bytes(b"[" + b"[" * n + b"]" * n + b"]")
    code = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from molt_society.importers.jsonstream import JsonError, parts\n"
        "try:\n"
        "    for _ in parts(Path(sys.argv[1])): pass\n"
        "except JsonError as exc:\n"
        "    print('error:', exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "nests deeper than 512 levels at byte" in out.stdout, out.stdout


def test_wrong_shape_and_not_json(tmp_path: Path) -> None:
    (tmp_path / "shape.json").write_text(json.dumps({"hello": [1, 2, 3]}))
    (tmp_path / "text.json").write_text("this is not json\n")
    (tmp_path / "numbers.json").write_text("[1, 2, 3]")
    report = import_path(tmp_path, "m").report
    shape = report.file("shape.json")
    assert shape.status == "skipped"
    reason = shape.skip_reason or ""
    assert "unknown shape" in reason
    assert "shape.json" in reason
    assert "hello" in reason
    text = report.file("text.json")
    assert text.status == "failed"
    assert text.errors[0].position == "line 1 column 2 (byte 1)"  # "t" may begin "true"; "h" may not
    assert "not JSON" in text.errors[0].message
    assert report.file("numbers.json").status == "skipped"
    d = report.to_dict()
    assert json.loads(json.dumps(d)) == d


def test_csv_with_missing_columns_and_a_bad_row(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text("id,post_id,content\nc1,p1,hi\n")
    rows = KELKALOT.joinpath("moltbook_posts.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "p.csv").write_text(rows[0] + "x,y,z\n" + rows[1])
    report = import_path(tmp_path, "m").report
    c = report.file("c.csv")
    assert c.status == "failed"
    assert c.errors[0].position == "line 1"
    assert "created_at" in c.errors[0].message
    p = report.file("p.csv")
    (skip,) = p.skipped.values()
    assert skip.examples[0].startswith("line 2")
    assert p.events["post_created"] == 1


def test_duplicated_ids_across_files_make_one_event(tmp_path: Path) -> None:
    shutil.copy(DETAIL, tmp_path / "a.json")
    shutil.copy(DETAIL, tmp_path / "b.json")
    result = import_path(tmp_path, "m")
    assert stats_of_events(result) == stats_of_events(import_path(DETAIL, "m"))
    ids = [e.event_id for e in result.events]
    assert len(ids) == len(set(ids))
    b = result.report.file("b.json")
    assert sum(b.events.values()) == 0
    assert b.skipped["duplicate post id (same record)"].count == 1
    assert b.skipped["duplicate comment id (same record)"].count == 100


def test_conflicting_copy_keeps_the_first_and_is_reported(tmp_path: Path) -> None:
    doc = _load(DETAIL)
    (tmp_path / "a.json").write_text(json.dumps(doc))
    doc["post"]["title"] = "something else"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    result = import_path(tmp_path, "m")
    (post,) = [e for e in result.events if isinstance(e, E.PostCreated)]
    assert post.body.title == _load(DETAIL)["post"]["title"]
    conflicts = result.report.file("b.json").skipped
    (reason,) = [r for r in conflicts if r.startswith("conflict")]
    assert "title" in conflicts[reason].examples[0]


def _thread(post_time: str = "2026-01-30T17:00:59.042247+00:00") -> dict[str, Any]:
    def comment(cid: str, parent: str | None, replies: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": cid,
            "content": f"comment {cid}",
            "parent_id": parent,
            "upvotes": 2,
            "downvotes": 0,
            "created_at": "2026-01-30T17:05:00+00:00",
            "author": {"id": f"agent-{cid}", "name": f"agent {cid}"},
            "replies": replies,
        }

    return {
        "success": True,
        "post": {
            "id": "p1",
            "title": "t",
            "content": "c",
            "upvotes": 0,
            "downvotes": 0,
            "comment_count": 4,
            "created_at": post_time,
            "submolt": {"id": "s", "name": "general", "display_name": "General"},
            "author": None,
        },
        "comments": [
            comment("c1", None, [comment("c2", "c1", [])]),
            # c3 names a parent that is not in the dump; c4 replies to c3
            comment("c3", "gone", [comment("c4", "c3", [])]),
        ],
    }


def test_comment_whose_parent_is_missing_is_skipped_with_its_replies(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps(_thread()))
    result = import_path(tmp_path, "m")
    made = {e.body.comment_id for e in result.events if isinstance(e, E.CommentCreated)}
    assert made == {"c1", "c2"}
    skipped = result.report.file("t.json").skipped
    assert skipped["parent not in dump"].count == 1
    assert "c3" in skipped["parent not in dump"].examples[0]
    assert "comments[1]" in skipped["parent not in dump"].examples[0]
    assert skipped["parent skipped"].count == 1
    tallies = {e.body.target_id for e in result.events if isinstance(e, E.VoteTallied)}
    assert tallies == {"p1", "c1", "c2"}  # the post's comment_count, the comments' upvotes
    (post,) = [e for e in result.events if isinstance(e, E.PostCreated)]
    assert post.actor == "unknown"


def test_comment_whose_post_is_not_in_the_dump(tmp_path: Path) -> None:
    doc = _load(DAILY / "2026-02-03" / "comments.json")
    (tmp_path / "comments.json").write_text(json.dumps(doc))
    result = import_path(tmp_path, "m")
    assert not any(isinstance(e, E.CommentCreated) for e in result.events)
    assert result.report.file("comments.json").skipped["post not in dump"].count == len(doc["comments"])


def test_timestamp_without_a_zone_is_reported_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps(_thread(post_time="2026-01-30T17:00:59.042247")))
    result = import_path(tmp_path, "m")
    assert not any(isinstance(e, E.PostCreated | E.CommentCreated) for e in result.events)
    skipped = result.report.file("t.json").skipped
    assert skipped["timestamp has no time zone"].count == 1
    assert skipped["timestamp has no time zone"].examples[0].startswith("post")
    assert skipped["post skipped"].count == 4
    assert "timestamp has no time zone" in result.report.render()


def test_long_titles_and_content_are_cut_to_fit_the_contract(tmp_path: Path) -> None:
    doc = _thread()
    doc["post"]["title"] = "T" * 500
    doc["post"]["content"] = "鱼" * 50_000  # 3 bytes each in UTF-8: over 64 KiB even at 40,000 chars
    (tmp_path / "t.json").write_text(json.dumps(doc))
    result = import_path(tmp_path, "m")
    (post,) = [e for e in result.events if isinstance(e, E.PostCreated)]
    assert len(post.body.title) == 300
    assert len(encode_event(post)) <= 60_000
    notes = result.report.file("t.json").notes
    assert notes["title truncated to 300 characters"].count == 1
    assert any(r.startswith("content truncated") for r in notes)


def test_reimport_gives_identical_events(tmp_path: Path) -> None:
    first = import_path(VIYERCAL, "moltbook")
    again = import_path(VIYERCAL, "moltbook")
    copy = tmp_path / "copy"
    shutil.copytree(VIYERCAL, copy)
    moved = import_path(copy, "moltbook")
    wire = [encode_event(e) for e in first.events]
    assert wire == [encode_event(e) for e in again.events]
    assert wire == [encode_event(e) for e in moved.events]
    assert first.report.to_dict()["totals"] == moved.report.to_dict()["totals"]


@pytest.mark.xdist_group("everything")
def test_reimport_of_everything_is_identical() -> None:
    a = everything()
    b = import_path(DATA, "moltbook")
    assert [encode_event(e) for e in a.events] == [encode_event(e) for e in b.events]
    assert a.report.to_dict() == b.report.to_dict()
