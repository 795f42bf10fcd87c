"""End to end on the real broker and real ClickHouse (chDB): agents -> streams -> sink.

Expected values come from independent computations: the events agents wrote to the actions topic, an
in-process run of the same society (``agents.offline``), and batch recomputation of the metrics from the
events table with networkx and the ``powerlaw`` package.
"""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import networkx as nx
import pytest
from stack_helpers import emitted_event_ids, make_settings, offline_ids, run_ticks, running_stack, sql

pytestmark = pytest.mark.integration
TICKS = 40


def _metrics(stack_sql: list[list[object]]) -> dict[tuple[str, str, str], float]:
    return {(str(m), str(w), str(d)): float(v) for m, w, d, v in stack_sql}  # type: ignore[arg-type]


METRICS_SQL = (
    "SELECT metric, toString(window_start), dim, value FROM metrics FINAL WHERE society = '{s}' "
    "ORDER BY metric, window_start, dim"
)


def test_every_event_once_same_as_offline_and_metrics_match_batch(
    broker: str, tmp_path: Path, society_name: str
):
    settings = make_settings(broker, tmp_path)
    with running_stack(settings, society_name) as stack:
        run_ticks(stack, TICKS)
        stored = sql(stack, f"SELECT toString(event_id) FROM events WHERE society = '{society_name}'")
        rows = sql(
            stack,
            "SELECT type, toString(event_id), actor, post_id, comment_id, parent_id, "
            "toUnixTimestamp64Micro(occurred_at) "
            f"FROM events FINAL WHERE society = '{society_name}'",
        )
        metrics = _metrics(sql(stack, METRICS_SQL.format(s=society_name)))
        dead = sql(stack, f"SELECT count() FROM dead_letters WHERE society = '{society_name}'")[0][0]

    emitted = emitted_event_ids(broker, society_name)
    stored_ids = [r[0] for r in stored]
    # exactly once: no row twice (no FINAL above), and the same set as what the agents emitted
    assert len(stored_ids) == len(set(stored_ids))
    assert set(stored_ids) == set(emitted)
    assert len(emitted) == len(set(emitted))
    assert dead == 0

    # the same society computed in one process, without Kafka, has the very same events
    assert offline_ids(settings, society_name, TICKS) == set(stored_ids)

    _check_metrics_against_batch(rows, metrics, int(settings.window_seconds * 1e6), settings.top_k)


def _check_metrics_against_batch(
    rows: list[list[object]], metrics: dict[tuple[str, str, str], float], window_us: int, top_k: int
) -> None:
    post_author: dict[str, str] = {}
    comment_author: dict[str, str] = {}
    comments_per_post: Counter[str] = Counter()
    depth: dict[str, int] = {}
    for etype, _eid, actor, post_id, comment_id, _parent, _us in rows:
        if etype == "post_created":
            post_author[str(post_id)] = str(actor)
        elif etype == "comment_created":
            comment_author[str(comment_id)] = str(actor)
    edges_by_window: dict[int, Counter[tuple[str, str]]] = defaultdict(Counter)
    counts_by_window: dict[int, Counter[str]] = defaultdict(Counter)
    parents: dict[str, str] = {}
    for etype, _eid, actor, post_id, comment_id, parent, us in rows:
        w = int(us) - int(us) % window_us  # type: ignore[call-overload]
        counts_by_window[w][str(etype)] += 1
        if etype != "comment_created":
            continue
        comments_per_post[str(post_id)] += 1
        parents[str(comment_id)] = str(parent)
        dst = comment_author[str(parent)] if parent else post_author[str(post_id)]
        if dst != actor:
            edges_by_window[w][(str(actor), dst)] += 1
    for cid in comment_author:  # depth by walking parents: an independent check of the stated depth
        d, cur = 0, cid
        while cur:
            d, cur = d + 1, parents[cur]
        depth[cid] = d

    windows = sorted(counts_by_window)
    key_of = {w: _fmt(w) for w in windows}
    # event counts per window and type
    for w in windows:
        for etype, n in counts_by_window[w].items():
            assert metrics[("events", key_of[w], etype)] == n
    # thread shape at the last window's close = the whole history
    last = key_of[windows[-1]]
    posts = len(post_author)
    no_comment = sum(1 for p in post_author if comments_per_post[p] == 0)
    assert metrics[("share_no_comment", last, "")] == pytest.approx(no_comment / posts, abs=1e-12)
    max_depth_per_post: dict[str, int] = dict.fromkeys(post_author, 0)
    comment_post = {str(r[4]): str(r[3]) for r in rows if r[0] == "comment_created"}
    for cid, d in depth.items():
        p = comment_post[cid]
        max_depth_per_post[p] = max(max_depth_per_post[p], d)
    hist = Counter(max_depth_per_post.values())
    for d, n in hist.items():
        assert metrics[("depth_hist", last, str(d))] == n
    # cascade-size power law at the last window vs the powerlaw package on the raw sizes
    sizes = [n for n in comments_per_post.values() if n >= 1]
    if ("thread_comments_powerlaw", last, "alpha") in metrics:
        import powerlaw

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = powerlaw.Fit(sizes, discrete=True, verbose=False)
        assert metrics[("thread_comments_powerlaw", last, "xmin")] == fit.xmin
        assert metrics[("thread_comments_powerlaw", last, "alpha")] == pytest.approx(fit.alpha, rel=1e-3)
    # PageRank top-k share per window vs networkx on the window's interaction graph
    checked = 0
    for w in windows:
        edges = edges_by_window.get(w)
        if not edges:
            continue
        g = nx.DiGraph()
        for (s, d), wt in edges.items():
            g.add_edge(s, d, weight=wt)
        pr = nx.pagerank(g, alpha=0.85, tol=1e-10, max_iter=200)
        ranked = sorted(pr.values(), reverse=True)
        assert metrics[("pagerank_top_share", key_of[w], f"top{top_k}")] == pytest.approx(
            sum(ranked[:top_k]) / sum(ranked), abs=1e-6
        )
        assert metrics[("pagerank_top_share", key_of[w], "top1")] == pytest.approx(
            ranked[0] / sum(ranked), abs=1e-6
        )
        checked += 1
    assert checked >= 2


def _fmt(us: int) -> str:
    from molt_society.schemas.control import from_us

    return from_us(us).strftime("%Y-%m-%d %H:%M:%S.%f")


def test_two_workers_each_give_the_same_society_and_metrics(broker: str, tmp_path: Path):
    results = []
    for n, name in ((1, "one"), (2, "two")):
        society = f"w{n}{os.getpid()}{int(time.time()) % 100000}"
        settings = make_settings(broker, tmp_path / name, agents=1500)
        with running_stack(settings, society, stream_workers=n, agent_workers=n) as stack:
            run_ticks(stack, 30)
            events = sql(
                stack,
                "SELECT toString(event_id), type, actor, toUnixTimestamp64Micro(occurred_at), body "
                f"FROM events FINAL WHERE society = '{society}'",
            )
            metrics = sql(
                stack,
                "SELECT metric, toString(window_start), dim, value FROM metrics FINAL "
                f"WHERE society = '{society}'",
            )
        # the society name is in every event and metric id; compare what does not depend on it
        results.append(({tuple(e) for e in events}, {(m, w, d, v) for m, w, d, v in metrics}))
    (ev1, m1), (ev2, m2) = results
    assert len(ev1) > 500
    assert ev1 == ev2
    assert m1 == m2


def test_sink_killed_with_sigkill_mid_run_loses_and_duplicates_nothing(
    broker: str, tmp_path: Path, society_name: str
):
    settings = make_settings(broker, tmp_path, agents=400, sink_batch_rows=200, sink_batch_seconds=0.2)
    with running_stack(settings, society_name) as stack:
        import threading

        killed: list[int] = []

        def killer() -> None:
            deadline = time.monotonic() + 120
            sink = next(c for c in stack.children if c.role == "sinks")
            while time.monotonic() < deadline:
                try:
                    n = sql(stack, f"SELECT count() FROM events WHERE society = '{society_name}'")[0][0]
                except Exception:
                    n = 0
                if n >= 60:  # early: with pipelined ticks the whole run is stored within seconds
                    os.kill(sink.process.pid, signal.SIGKILL)
                    sink.process.wait()
                    killed.append(int(n))
                    (stack.run_dir / "sink.json").unlink(missing_ok=True)
                    stack.children.remove(sink)
                    stack.spawn("sinks")
                    return
                time.sleep(0.2)

        t = threading.Thread(target=killer)
        t.start()
        run_ticks(stack, 150)
        t.join()
        stored = [
            r[0]
            for r in sql(stack, f"SELECT toString(event_id) FROM events WHERE society = '{society_name}'")
        ]
    assert killed, "the sink was never killed: the run was too short to test anything"
    emitted = emitted_event_ids(broker, society_name)
    assert killed[0] < len(emitted)
    assert len(stored) == len(set(stored))
    assert set(stored) == set(emitted)


def test_realtime_mode_runs_on_the_wall_clock(broker: str, tmp_path: Path, society_name: str):
    """Real time: ticks every tick_seconds of wall time, event times near now, windows still close."""
    settings = make_settings(
        broker, tmp_path, agents=300, mode="realtime", tick_seconds=0.5, window_seconds=2.0
    )
    started = time.time()
    with running_stack(settings, society_name) as stack:
        run_ticks(stack, 16)
        by_type = f"SELECT type, count() FROM events WHERE society = '{society_name}' GROUP BY type"
        kinds = dict(sql(stack, by_type))
        span = sql(
            stack,
            "SELECT toUnixTimestamp64Micro(min(occurred_at)), toUnixTimestamp64Micro(max(occurred_at)) "
            f"FROM events WHERE society = '{society_name}'",
        )[0]
        windows = sql(
            stack,
            f"SELECT uniqExact(window_start) FROM metrics WHERE society = '{society_name}' "
            "AND metric = 'events_total'",
        )[0][0]
        ids = f"SELECT toString(event_id) FROM events WHERE society = '{society_name}'"
        stored = [r[0] for r in sql(stack, ids)]
    assert set(kinds) >= {"agents_joined", "post_created", "comment_created", "vote_cast"}
    assert started * 1e6 <= span[0] <= span[1] <= time.time() * 1e6 + 5e6
    # 16 ticks of 0.5 s after genesis: at least 3 windows of 2 s, each closed by a watermark
    assert windows >= 3
    assert sorted(stored) == sorted(emitted_event_ids(broker, society_name))
