"""The community's archive layouts import whole: the observatory SQLite (posts, comments with their parent
chain, agents with their creation time, submolts, follows), the posts_full JSON array whose posts hold
their comment threads, the same as JSON Lines, and each inside a ``.tar.gz``, ``.zip`` or ``.gz``; the
streamed import (events sorted on disk) gives the list import's events. Expected values come from reading
the generated files directly with ``sqlite3`` and ``json`` (and from the generator's own manifest), not
from the importer's code."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from molt_society.bench.archive_gen import generate
from molt_society.importers import ImportResult, import_path, import_stream
from molt_society.importers.builder import event_id
from molt_society.schemas import events as E
from molt_society.schemas.events import EVENT_ADAPTER

POSTS = 400


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    out = tmp_path_factory.mktemp("gen")
    manifests = generate(out, POSTS, 7, ["observatory-sqlite", "posts-full-json"])
    return out, {m["layout"]: m for m in manifests}


def _threads_of_json(path: Path) -> tuple[set[str], dict[str, tuple[str | None, int]], set[str]]:
    """(post ids, comment id -> (parent id, depth), author ids) read with json, walking ``replies``."""
    posts: set[str] = set()
    comments: dict[str, tuple[str | None, int]] = {}
    authors: set[str] = set()
    for post in json.loads(path.read_bytes()):
        posts.add(post["id"])
        authors.add(post["author"]["id"])
        todo = [(c, None, 1) for c in post["comments"]]
        while todo:
            c, parent, depth = todo.pop()
            comments[c["id"]] = (parent, depth)
            authors.add(c["author"]["id"])
            todo.extend((r, c["id"], depth + 1) for r in c["replies"])
    return posts, comments, authors


def _by_type(result: ImportResult) -> Counter[str]:
    return Counter(e.type for e in result.events)


def test_posts_full_json_keeps_every_nested_comment(archive: tuple[Path, dict[str, Any]]) -> None:
    folder, manifests = archive
    path = folder / "posts_full.json"
    posts, comments, authors = _threads_of_json(path)
    assert len(comments) == manifests["posts-full-json"]["comments"] > POSTS  # the generator agrees
    result = import_path(path, "x")
    got = {
        e.body.comment_id: (e.body.parent_id, e.body.depth)
        for e in result.events
        if isinstance(e, E.CommentCreated)
    }
    assert got == comments
    assert {e.body.post_id for e in result.events if isinstance(e, E.PostCreated)} == posts
    assert {e.actor for e in result.events if isinstance(e, E.AgentRegistered)} == authors
    assert max(d for _, d in got.values()) == manifests["posts-full-json"]["deepest_comment"]
    report = result.report
    assert report.skipped_by_reason() == Counter()
    assert report.error_count == 0
    assert report.read_by_kind() == Counter({"posts": len(posts), "comments": len(comments)})
    assert "post.comments" not in report.ignored_fields()  # read, not "left out"


def test_observatory_sqlite_imports_every_table(archive: tuple[Path, dict[str, Any]]) -> None:
    folder, manifests = archive
    path = folder / "observatory.sqlite"
    db = sqlite3.connect(path)
    posts = {r[0] for r in db.execute("SELECT id FROM posts")}
    parents = dict(db.execute("SELECT id, parent_id FROM comments").fetchall())
    agents = dict(db.execute("SELECT id, created_at FROM agents").fetchall())
    follows = set(db.execute("SELECT follower_id, following_id FROM follows").fetchall())
    db.close()
    depth: dict[str, int] = {}
    for cid in parents:  # depth by walking parent_id up to a top-level comment
        n, cur = 1, parents[cid]
        while cur is not None:
            n, cur = n + 1, parents[cur]
        depth[cid] = n
    result = import_path(path, "x")
    ev = result.events
    got = {e.body.comment_id: (e.body.parent_id, e.body.depth) for e in ev if isinstance(e, E.CommentCreated)}
    assert got == {c: (parents[c], depth[c]) for c in parents}
    assert {e.body.post_id for e in ev if isinstance(e, E.PostCreated)} == posts
    registered = {e.actor: e.occurred_at for e in ev if isinstance(e, E.AgentRegistered)}
    assert registered == {
        a: datetime.fromisoformat(t) for a, t in agents.items()
    }  # every listed agent, at its creation
    assert {(e.actor, e.body.target_agent) for e in ev if isinstance(e, E.AgentFollowed)} == follows
    m = manifests["observatory-sqlite"]
    assert (len(posts), len(parents), len(follows)) == (m["posts"], m["comments"], m["follows"])
    assert max(depth.values()) == m["deepest_comment"]
    f = result.report.files[0]
    assert (f.shape, f.status) == ("observatory_sqlite", "imported")
    assert result.report.skipped_by_reason() == Counter()


def test_stream_import_gives_the_same_events_in_order(archive: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = archive
    for name in ("observatory.sqlite", "posts_full.json"):
        listed = import_path(folder / name, "x")
        streamed = import_stream(folder / name, "x", run_size=500)  # several runs on disk
        try:
            assert streamed.spill.runs > 1
            got = [EVENT_ADAPTER.validate_json(b) for b in streamed.spill]
            assert got == listed.events
            assert streamed.report.events_by_type() == _by_type(listed)
        finally:
            streamed.close()


def test_a_sqlite_file_without_the_tables_is_an_unknown_shape(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (id TEXT)")
    db.commit()
    db.close()
    result = import_path(path, "x")
    assert result.events == []
    assert "SQLite database without the observatory's tables" in (result.report.files[0].skip_reason or "")
    assert "users" in (result.report.files[0].skip_reason or "")


def test_sqlite_timestamps_without_zone_are_utc_and_noted(tmp_path: Path) -> None:
    path = tmp_path / "obs.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE agents (id TEXT PRIMARY KEY, name TEXT, created_at TIMESTAMP);"
        "CREATE TABLE follows (follower_id TEXT, following_id TEXT, first_seen_at TIMESTAMP);"
        "INSERT INTO agents VALUES ('a1', 'one', '2026-02-01 10:00:00'),"
        " ('a2', 'two', '2026-02-01T09:00:00Z');"
        "INSERT INTO follows VALUES ('a1', 'a2', '2026-02-02 08:30:00'), ('a1', 'a2', '2026-02-03 08:30:00');"
    )
    db.commit()
    db.close()
    result = import_path(path, "x")
    times = {e.type + ":" + e.actor: e.occurred_at.isoformat() for e in result.events}
    assert times == {
        "agent_registered:a1": "2026-02-01T10:00:00+00:00",
        "agent_registered:a2": "2026-02-01T09:00:00+00:00",
        "agent_followed:a1": "2026-02-02T08:30:00+00:00",
    }
    report = result.report
    assert report.skipped_by_reason() == Counter({"duplicate follow (first kept)": 1})
    assert any("read as UTC" in reason for reason in report.notes_by_reason())


def test_event_ids_are_stable_uuid7s_of_their_time() -> None:
    t = datetime(2026, 2, 1, 12, 0, 0, 123000, tzinfo=UTC)
    a, b = event_id("post_created", "p1", t), event_id("post_created", "p1", t)
    assert a == b
    assert a.version == 7
    assert a.int >> 80 == int(t.timestamp() * 1000)
    assert event_id("post_created", "p2", t) != a
    assert event_id("comment_created", "p1", t) != a


def _ids(result: ImportResult) -> list[str]:
    return [str(e.event_id) for e in result.events]


def test_containers_are_read_without_unpacking_by_hand(
    archive: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    import gzip
    import io
    import tarfile
    import zipfile

    folder, _ = archive
    direct = _ids(import_path(folder / "observatory.sqlite", "x"))  # one society in two layouts:
    tgz = tmp_path / "dump.tar.gz"  # both in one import would be one society, deduplicated
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(folder / "observatory.sqlite", "db/observatory.sqlite")
        link = tarfile.TarInfo("raw/escape.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    result = import_path(tgz, "x")
    assert sorted(_ids(result)) == sorted(direct)
    files = {f.file: f for f in result.report.files}
    assert files["dump.tar.gz/db/observatory.sqlite"].status == "imported"
    assert "not a regular file" in (files["dump.tar.gz/raw/escape.json"].skip_reason or "")

    zipped = tmp_path / "dump.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.write(folder / "posts_full.json", "posts_full.json")
        zf.writestr("../outside.json", b"[]")
    zres = import_path(zipped, "x")
    assert sorted(_ids(zres)) == sorted(_ids(import_path(folder / "posts_full.json", "x")))
    assert "leaves the container" in (
        {f.file: f for f in zres.report.files}["dump.zip/../outside.json"].skip_reason or ""
    )

    gz = tmp_path / "posts_full.json.gz"
    gz.write_bytes(gzip.compress((folder / "posts_full.json").read_bytes()))
    assert _ids(import_path(gz, "x")) == _ids(import_path(folder / "posts_full.json", "x"))

    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(tgz.read_bytes()[: tgz.stat().st_size // 2])
    broken = import_path(cut, "x")
    assert broken.report.error_count == 1  # said, with what was read before it kept
    assert "cannot be read to its end" in io.StringIO(broken.report.render()).getvalue()


def test_json_lines_of_posts_import_like_the_array(
    archive: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    from molt_society.replay.archive import is_archive

    folder, _ = archive
    posts = json.loads((folder / "posts_full.json").read_bytes())
    lines = tmp_path / "posts.jsonl"
    lines.write_text("\n".join(json.dumps(p) for p in posts) + "\n\n")
    got, want = import_path(lines, "x"), import_path(folder / "posts_full.json", "x")
    assert _ids(got) == _ids(want)
    assert got.report.files[0].shape == "jsonl_posts"
    assert not is_archive(lines)  # a dump, not the project's event log
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(posts[0]) + "\n{not json\n" + json.dumps(posts[1]) + "\n")
    res = import_path(bad, "x")
    assert {e.body.post_id for e in res.events if isinstance(e, E.PostCreated)} == {
        posts[0]["id"],
        posts[1]["id"],
    }
    assert res.report.error_count == 1


def test_a_container_is_told_by_its_content_and_json_is_never_one(tmp_path: Path) -> None:
    import gzip
    import io
    import tarfile

    from molt_society.importers.containers import kind_of

    payload = b'{"posts": []}'
    (tmp_path / "doc.tar.gz").write_bytes(payload)  # a name says nothing
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf \n[1, 2]")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:  # a plain tar whose first member's name is JSON-like
        info = tarfile.TarInfo("{weird}.json")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    (tmp_path / "plain").write_bytes(buf.getvalue())
    (tmp_path / "packed").write_bytes(gzip.compress(buf.getvalue()))
    (tmp_path / "single").write_bytes(gzip.compress(payload))
    assert kind_of(tmp_path / "doc.tar.gz") is None
    assert kind_of(tmp_path / "bom.json") is None
    assert kind_of(tmp_path / "plain") == "tar"
    assert kind_of(tmp_path / "packed") == "tar"
    assert kind_of(tmp_path / "single") == "gzip"
