"""The notebook library (``from molt_society import open_store``) on a real chDB store (issue 29): it finds
the project's store from a subfolder, never creates one, and its DataFrames hold what was stored (counted
here from the events written, not read back through the library)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from stored_events import open_chdb, store_events

import molt_society
from molt_society.runtime.settings import get_settings
from molt_society.schemas.events import (
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
)
from molt_society.schemas.ids import uuid7

T0 = datetime(2026, 1, 28, tzinfo=UTC)


def _events() -> list[Event]:
    out: list[Event] = []
    for society, posts in (("alpha", 4), ("beta", 1)):
        for i in range(posts):
            t = T0 + timedelta(hours=i)
            body = PostCreatedBody(post_id=f"{society}p{i}", submolt="general", title="t", content="c")
            out.append(
                PostCreated(event_id=uuid7(t), society=society, actor=f"a{i}", occurred_at=t, body=body)
            )
            for j in range(i):  # post i gets i comments
                tc = t + timedelta(minutes=j + 1)
                cb = CommentCreatedBody(
                    comment_id=f"{society}c{i}.{j}",
                    post_id=f"{society}p{i}",
                    parent_id=None,
                    depth=1,
                    content="x",
                )
                out.append(
                    CommentCreated(
                        event_id=uuid7(tc), society=society, actor=f"b{j}", occurred_at=tc, body=cb
                    )
                )
    return out


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project folder with a store in .society/clickhouse; the working directory is its docs/."""
    store = tmp_path / "project" / ".society" / "clickhouse"
    store.parent.mkdir(parents=True)
    client = open_chdb(str(store))
    store_events(client, _events())
    client.close()
    (tmp_path / "project" / "docs").mkdir()
    monkeypatch.chdir(tmp_path / "project" / "docs")
    monkeypatch.delenv("CLICKHOUSE_URL", raising=False)
    monkeypatch.delenv("SOCIETY_STATE_DIR", raising=False)
    get_settings.cache_clear()
    yield tmp_path / "project"
    get_settings.cache_clear()


def test_open_store_finds_the_project_store_from_a_subfolder(project: Path) -> None:
    expected = _events()
    with molt_society.open_store() as store:
        assert store.settings.clickhouse_url == f"chdb://{(project / '.society' / 'clickhouse').resolve()}"
        held = store.societies().set_index("society")["events"].to_dict()
        assert held == {s: sum(e.society == s for e in expected) for s in ("alpha", "beta")}


def test_events_filter_by_type_and_time_in_order(project: Path) -> None:
    expected = [e for e in _events() if e.society == "alpha" and e.type == "comment_created"]
    with molt_society.open_store() as store:
        df = store.events("alpha", types=["comment_created"])
        ordered = sorted(expected, key=lambda e: e.occurred_at)
        assert list(df["comment_id"]) == [e.body.comment_id for e in ordered]
        late = store.events("alpha", since=T0 + timedelta(hours=2))
        assert len(late) == sum(
            e.occurred_at >= T0 + timedelta(hours=2) for e in _events() if e.society == "alpha"
        )
        assert len(store.events("alpha", limit=2)) == 2


def test_an_unknown_society_names_those_the_store_holds(project: Path) -> None:
    with (
        molt_society.open_store() as store,
        pytest.raises(KeyError, match=r"alpha \(10 events\), beta \(1 events\)"),
    ):
        store.events("gamma")


def test_a_missing_store_is_an_error_and_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLICKHOUSE_URL", raising=False)
    get_settings.cache_clear()
    with pytest.raises(molt_society.StoreNotFound, match=r"no \.society/clickhouse"):
        molt_society.open_store()
    with pytest.raises(molt_society.StoreNotFound, match="no store at"):
        molt_society.open_store(tmp_path / "elsewhere")
    assert not (tmp_path / ".society").exists()
    assert not (tmp_path / "elsewhere").exists()


def test_a_report_section_as_dataframes(project: Path) -> None:
    with molt_society.open_store() as store:
        report = store.report("alpha", only=["threads"])
        scalars = report.scalars()
        assert set(scalars["section"]) <= {"threads", "comparisons"}
        depth = report.figure("threads.depth_hist")
        # post i has i comments at depth 1: one post without comment (depth 0), three at depth 1
        by_depth = {int(x): y for x, y in zip(depth["x"], depth["y"], strict=True)}
        assert by_depth == {0: 1, 1: 3}
        with pytest.raises(KeyError, match=r"threads\.depth_hist"):
            report.figure("nope")


def test_sql_binds_values_as_literals_never_text(project: Path) -> None:
    with molt_society.open_store() as store:
        hostile = "alpha' OR 1=1 --"
        assert store.sql("SELECT count() AS n FROM events WHERE society = {s:String}", s=hostile)["n"][0] == 0
        assert store.sql("SELECT count() AS n FROM events WHERE society = {s:String}", s="beta")["n"][0] == 1
