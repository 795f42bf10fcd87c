"""Export a run, replay the export into a new society: the same events and the same metrics.

Also: the streaming metrics of the replayed log equal the same figures computed in one batch SQL query
over its events table.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from stack_helpers import make_settings, run_ticks, running_stack, sql

from molt_society.replay.archive import read_archive
from molt_society.replay.export import export_society
from molt_society.replay.publisher import publish
from molt_society.runtime.record_auth import RecordKeys
from molt_society.society.drive import wait_drained

pytestmark = pytest.mark.integration

EVENTS_SQL = (
    "SELECT toString(event_id), type, actor, toUnixTimestamp64Micro(occurred_at), causation_id, body "
    "FROM events FINAL WHERE society = '{s}'"
)
METRICS_SQL = "SELECT metric, toString(window_start), dim, value FROM metrics FINAL WHERE society = '{s}'"


def test_run_export_replay_gives_identical_events_and_metrics(broker: str, tmp_path: Path, society_name: str):
    settings = make_settings(broker, tmp_path, agents=250)
    with running_stack(settings, society_name) as stack:
        run_ticks(stack, 35)
        original_events = {tuple(r) for r in sql(stack, EVENTS_SQL.format(s=society_name))}
        original_metrics = {tuple(r) for r in sql(stack, METRICS_SQL.format(s=society_name))}
        archives = [tmp_path / "run.jsonl.gz", tmp_path / "run.parquet"]
        headers = [export_society(stack.settings, society_name, path) for path in archives]
    assert all(h.events == len(original_events) for h in headers)

    # both formats read back to the same events, in event-time order
    read = [list(read_archive(p)[1]) for p in archives]
    assert [str(e.event_id) for e in read[0]] == [str(e.event_id) for e in read[1]]
    assert read[0] == read[1]
    assert [e.occurred_at for e in read[0]] == sorted(e.occurred_at for e in read[0])

    header, events = read_archive(archives[0])
    assert header is not None
    target = society_name + "r"
    with running_stack(settings, target, agents=False) as stack:
        stats = asyncio.run(
            publish(
                events,
                bootstrap=stack.bootstrap,
                society=target,
                partitions=settings.partitions,
                window_seconds=header.window_seconds or settings.window_seconds,
                origin_us=header.origin_us,
                last_window_us=header.last_window_us,
                keys=RecordKeys(settings.state_dir),
            )
        )
        assert header.last_window_us is not None
        asyncio.run(wait_drained(target, header.last_window_us, stack))
        replayed_events = {tuple(r) for r in sql(stack, EVENTS_SQL.format(s=target))}
        replayed_metrics = {tuple(r) for r in sql(stack, METRICS_SQL.format(s=target))}
        batch = _batch_figures(stack, target, int(settings.window_seconds))
        streamed = {
            (m, w, d): v
            for m, w, d, v in replayed_metrics
            if m in ("events", "share_no_comment", "depth_hist", "posts_total")
        }
    assert stats.events == len(original_events)
    assert replayed_events == original_events  # ids, types, actors, times, causes, bodies
    assert replayed_metrics == original_metrics  # every metric value of every window
    for key, value in batch.items():
        assert streamed.get(key) == pytest.approx(value, abs=1e-12), key
    assert len(batch) > 10


def _batch_figures(stack, society: str, window_s: int) -> dict[tuple[str, str, str], float]:
    """The same figures as the streaming metrics, in batch SQL over the events table."""
    out: dict[tuple[str, str, str], float] = {}
    for w, etype, n in sql(
        stack,
        f"SELECT toString(toStartOfInterval(occurred_at, INTERVAL {window_s} SECOND)) AS w, type, count() "
        f"FROM events FINAL WHERE society = '{society}' GROUP BY w, type",
    ):
        out[("events", _pad(w), etype)] = float(n)
    last = sql(
        stack,
        f"SELECT toString(max(toStartOfInterval(occurred_at, INTERVAL {window_s} SECOND))) "
        f"FROM events FINAL WHERE society = '{society}'",
    )[0][0]
    share, posts = sql(
        stack, f"SELECT countIf(comments = 0) / count(), count() FROM threads WHERE society = '{society}'"
    )[0]
    out[("share_no_comment", _pad(last), "")] = float(share)
    out[("posts_total", _pad(last), "")] = float(posts)
    for depth, n in sql(
        stack, f"SELECT max_depth, count() FROM threads WHERE society = '{society}' GROUP BY max_depth"
    ):
        out[("depth_hist", _pad(last), str(depth))] = float(n)
    return out


def _pad(ts: str) -> str:
    """toString(DateTime) has no fraction; DateTime64(6) has six digits."""
    return ts if "." in ts else ts + ".000000"


def test_replaying_the_same_archive_twice_gives_identical_tables(broker: str, tmp_path: Path):
    """Determinism of replay itself: two new societies from one archive hold the same rows."""
    from datetime import UTC, datetime, timedelta

    from molt_society.replay.archive import ArchiveHeader, write_archive
    from molt_society.schemas import events as E
    from molt_society.schemas.ids import uuid7

    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    evs: list[E.Event] = []
    for i in range(300):
        at = t0 + timedelta(minutes=i)
        evs.append(
            E.PostCreated(
                event_id=uuid7(at),
                society="x",
                actor=f"a{i % 17}",
                occurred_at=at,
                body={"post_id": f"p{i}", "submolt": "general", "title": f"t{i}"},
            )
        )
        if i > 3:
            at2 = at + timedelta(seconds=30)
            evs.append(
                E.CommentCreated(
                    event_id=uuid7(at2),
                    society="x",
                    actor=f"a{(i * 7) % 17}",
                    occurred_at=at2,
                    body={"comment_id": f"c{i}", "post_id": f"p{i - 3}", "depth": 1},
                )
            )
    path = tmp_path / "x.jsonl"
    write_archive(path, ArchiveHeader(society="x", events=len(evs)), evs)
    tables = []
    for k in range(2):
        target = f"twice{k}{int(time.time()) % 100000}"
        settings = make_settings(broker, tmp_path / f"r{k}")
        with running_stack(settings, target, agents=False) as stack:
            _, it = read_archive(path)
            stats = asyncio.run(
                publish(
                    it,
                    bootstrap=stack.bootstrap,
                    society=target,
                    partitions=4,
                    window_seconds=3600,
                    keys=RecordKeys(settings.state_dir),
                )
            )
            assert stats.last_us is not None
            asyncio.run(wait_drained(target, stats.last_us - stats.last_us % 3_600_000_000, stack))
            ev = {tuple(r) for r in sql(stack, EVENTS_SQL.format(s=target))}
            me = {tuple(r) for r in sql(stack, METRICS_SQL.format(s=target))}
        tables.append((ev, me))
    assert len(tables[0][0]) == len(evs)
    assert tables[0] == tables[1]
