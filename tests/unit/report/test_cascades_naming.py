"""Issue 14, defect 7: the streaming power-law fit of comments per thread is named for threads, old stored
rows stay readable under the new name, and the published alpha = 2.57 / 10,323 sit only next to the Molt
Dynamics cascade figures they belong to."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from stored_events import open_chdb

from molt_society.report.published import PUBLISHED
from molt_society.schemas.control import WindowPartial
from molt_society.streams.aggregate import InfluenceMemory, window_metrics
from molt_society.warehouse.schema import ensure_schema

OLD = ("cascade_size_powerlaw", "cascade_participants_powerlaw")
NEW = ("thread_comments_powerlaw", "thread_participants_powerlaw")


def partial() -> WindowPartial:
    # a power-law-like histogram of comments per thread (and of participants) the fit accepts
    hist = {str(s): max(1, int(400 * s**-2.2)) for s in range(1, 60)}
    return {
        "window_start_us": 0,
        "window_end_us": 3_600_000_000,
        "partition": 0,
        "partitions": 1,
        "counts": {"comment_created": 10},
        "active_agents": ["a", "b"],
        "edges": [["a", "b", 1]],
        "size_hist": hist,
        "participants_hist": hist,
        "depth_hist": {"1": 5},
        "threads_touched": [],
    }


def test_the_stream_names_its_fit_after_threads() -> None:
    names = {m["metric"] for m in window_metrics("s", [partial()], InfluenceMemory(), top_k=3)}
    assert set(NEW) <= names
    assert not names & set(OLD)


def test_rows_stored_under_the_old_names_are_renamed_by_the_schema(tmp_path: Path) -> None:
    client = open_chdb(str(tmp_path / "ch"))
    try:
        t = datetime(2026, 3, 1, tzinfo=UTC)
        rows = [
            [
                "00000000-0000-0000-0000-00000000000" + str(i),
                "old",
                metric,
                t,
                t,
                dim,
                value,
                t,
                "topic",
                0,
                i,
            ]
            for i, (metric, dim, value) in enumerate(
                [
                    (OLD[0], "alpha", 2.1),
                    (OLD[0], "xmin", 3.0),
                    (OLD[1], "alpha", 2.4),
                    ("posts_total", "", 9.0),
                ]
            )
        ]
        cols = ["metric_id", "society", "metric", "window_start", "window_end", "dim", "value", "emitted_at"]
        client.insert("metrics", rows, column_names=[*cols, "_topic", "_partition", "_offset"])
        want = [
            (NEW[0], "alpha", 2.1, 0),
            (NEW[0], "xmin", 3.0, 1),
            (NEW[1], "alpha", 2.4, 2),
            ("posts_total", "", 9.0, 3),
        ]
        for _ in range(2):  # applying the schema again changes nothing
            ensure_schema(client)
            got = client.query(
                "SELECT metric, dim, value, _offset FROM metrics WHERE society = 'old' ORDER BY _offset"
            ).result_rows
            assert [tuple(r) for r in got] == want
    finally:
        client.close()  # chDB serves one data directory per process at a time


def test_published_cascade_values_sit_only_beside_the_cascade_figures() -> None:
    assert PUBLISHED["cascades.alpha"][0] == 2.57
    assert [k for k, (v, _) in PUBLISHED.items() if v == 2.57] == ["cascades.alpha"]
    # 10,323 is the paper's number of propagation events, not a number of cascades
    assert PUBLISHED["cascades.propagation_events"][0] == 10_323
    assert "cascades.count" not in PUBLISHED
    assert not [k for k in PUBLISHED if "thread_comments" in k or k.startswith("agreement.")]
