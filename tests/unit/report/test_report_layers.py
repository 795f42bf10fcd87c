"""The report's social, individual and collective layers against independent computations.

A seeded synthetic society (three days, topics that drift, votes, comments between agents) is stored in a
real chDB; the report computes from ClickHouse (embeddings stored there once per text). The references
encode the same texts with the model directly (not through ClickHouse) and compute every similarity
measure with plain numpy loops, and PageRank per day with networkx from the Python events.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import networkx as nx
import numpy as np
import pytest
from stored_events import open_chdb, store_events

from molt_society.report import collective, individual, social
from molt_society.report.build import build_report
from molt_society.report.embeddings import Encoder, ensure_embeddings, missing_count
from molt_society.report.model import Scalar
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.schemas.events import CommentCreated, Event, PostCreated, VoteCast
from molt_society.schemas.ids import uuid7

SOC = "layers"
T0 = datetime(2026, 2, 1, 6, 0, tzinfo=UTC)
TOPICS = [
    "memory consolidation in agent context windows",
    "token prices and the economics of inference",
    "poetry about the ocean and the moon at night",
    "debugging python async code and race conditions",
]
AGENTS = [f"a{i}" for i in range(8)]


def _society() -> list[Event]:
    rng = random.Random(7)
    events: list[Event] = []
    posts: list[tuple[str, str]] = []  # (post_id, author)
    comments: list[tuple[str, str, str]] = []  # (comment_id, post_id, author)
    n = 0
    for day in range(3):
        for slot in range(40):
            at = T0 + timedelta(days=day, minutes=10 * slot + rng.randint(0, 9))
            actor = rng.choice(AGENTS)
            n += 1
            if rng.random() < 0.55 or not posts:
                topic = TOPICS[(AGENTS.index(actor) + day) % len(TOPICS)]  # each agent's topic drifts daily
                pid = f"p{n}"
                title = f"{topic} {rng.choice(['notes', 'question', 'idea'])} {n}"
                content = " ".join(rng.choice(topic.split()) for _ in range(8))
                if n % 17 == 0:
                    title, content = "hello world", "same text"  # identical texts: embedded once
                events.append(
                    PostCreated(
                        event_id=uuid7(at),
                        society=SOC,
                        actor=actor,
                        occurred_at=at,
                        body={"post_id": pid, "submolt": "general", "title": title, "content": content},
                    )
                )
                posts.append((pid, actor))
            else:
                pid, _ = rng.choice(posts[-15:])
                mine = [c for c in comments if c[1] == pid]
                parent = rng.choice(mine) if mine and rng.random() < 0.4 else None
                cid = f"c{n}"
                body: dict[str, Any] = {
                    "comment_id": cid,
                    "post_id": pid,
                    "depth": 2 if parent else 1,
                    "content": f"reply {n} about " + rng.choice(TOPICS),
                }
                if parent:
                    body["parent_id"] = parent[0]
                events.append(
                    CommentCreated(event_id=uuid7(at), society=SOC, actor=actor, occurred_at=at, body=body)
                )
                comments.append((cid, pid, actor))
            if posts and rng.random() < 0.6:
                pid, _ = rng.choice(posts)
                vote = {
                    "target_type": "post",
                    "target_id": pid,
                    "post_id": pid,
                    "value": rng.choice([1, 1, -1]),
                }
                events.append(
                    VoteCast(
                        event_id=uuid7(at), society=SOC, actor=rng.choice(AGENTS), occurred_at=at, body=vote
                    )
                )
    return events


@pytest.fixture(scope="module")
def stored(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ClientWarehouse, list[Event], Encoder]]:
    events = _society()
    client = open_chdb(str(tmp_path_factory.mktemp("layers") / "ch"))
    store_events(client, events)
    wh = ClientWarehouse(client)
    enc = Encoder()
    ensure_embeddings(wh, SOC, enc)
    yield wh, events, enc
    wh.close()


def _text(e: Event) -> str:
    if isinstance(e, PostCreated):
        return f"{e.body.title}\n{e.body.content}".strip()
    assert isinstance(e, CommentCreated)
    return e.body.content


def _value(items: list[Any], key: str) -> float:
    found = [i for i in items if isinstance(i, Scalar) and i.key == key]
    assert found, key
    assert found[0].value is not None, (key, found)
    return float(found[0].value)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_each_distinct_text_is_embedded_once(stored: tuple[ClientWarehouse, list[Event], Encoder]) -> None:
    wh, events, enc = stored
    texts = {_text(e) for e in events if isinstance(e, PostCreated | CommentCreated)}
    rows = wh.query("SELECT count(), uniqExact(text_hash) FROM embeddings").rows[0]
    assert rows[0] == rows[1] == len(texts)
    assert missing_count(wh, SOC) == 0
    assert ensure_embeddings(wh, SOC, enc)[0] == 0  # a second run embeds nothing


def test_semantic_stability_matches_numpy(stored: tuple[ClientWarehouse, list[Event], Encoder]) -> None:
    wh, events, enc = stored
    by_day: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if isinstance(e, PostCreated | CommentCreated):
            by_day[e.occurred_at.date().isoformat()].append(_text(e))
    days = sorted(by_day)
    vecs = {d: enc.encode(by_day[d]).astype(np.float64) for d in days}
    pairwise, knn = [], []
    for d in days:
        v = vecs[d]
        n = len(v)
        sims = [_cos(v[i], v[j]) for i in range(n) for j in range(n) if i != j]
        pairwise.append(sum(sims) / len(sims))
        per_text = []
        for i in range(n):
            others = sorted((_cos(v[i], v[j]) for j in range(n) if j != i), reverse=True)
            per_text.append(sum(others[:10]) / 10)
        knn.append(sum(per_text) / n)
    centroid = [_cos(vecs[a].mean(axis=0), vecs[b].mean(axis=0)) for a, b in itertools.pairwise(days)]
    items = social.semantic(wh, SOC)
    assert _value(items, "semantic.mean_pairwise") == pytest.approx(np.mean(pairwise), abs=2e-5)
    assert _value(items, "semantic.knn10") == pytest.approx(np.mean(knn), abs=2e-5)
    assert _value(items, "semantic.centroid_similarity") == pytest.approx(np.mean(centroid), abs=2e-5)
    assert _value(items, "semantic.texts") == sum(len(t) for t in by_day.values())


def test_knn_similarity_against_brute_force() -> None:
    rng = np.random.default_rng(3)
    v = rng.normal(size=(60, 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    expected = np.mean([np.sort(np.delete(v @ v[i], i))[-10:].mean() for i in range(60)])
    assert social.knn_similarity(v) == pytest.approx(float(expected), rel=1e-6)
    assert social.knn_similarity(v[:10]) is None  # fewer than k + 1 texts


def test_individual_layer_matches_direct_loops(stored: tuple[ClientWarehouse, list[Event], Encoder]) -> None:
    wh, events, enc = stored
    post_ev = sorted(
        (e for e in events if isinstance(e, PostCreated)),
        key=lambda e: (e.actor, e.occurred_at, e.body.post_id),
    )
    vec = dict(
        zip(
            [p.body.post_id for p in post_ev],
            enc.encode([_text(p) for p in post_ev]).astype(np.float64),
            strict=True,
        )
    )
    score: dict[str, int] = defaultdict(int)
    for e in events:
        if isinstance(e, VoteCast):
            score[e.body.target_id] += e.body.value
    by_agent: dict[str, list[PostCreated]] = defaultdict(list)
    for p in post_ev:
        by_agent[p.actor].append(p)
    glob = np.mean([vec[p.body.post_id] for p in post_ev], axis=0)
    drifts, cons_vecs, pulls = [], [], []
    for posts in by_agent.values():
        if len(posts) < 4:
            continue
        h = len(posts) // 2
        early = np.mean([vec[p.body.post_id] for p in posts[:h]], axis=0)
        late = np.mean([vec[p.body.post_id] for p in posts[h:]], axis=0)
        drifts.append(1 - _cos(early, late))
        cons_vecs.append(late - early)
        pulls.append(_cos(late, glob) - _cos(early, glob))
    mean_vec = np.mean(cons_vecs, axis=0)
    cons = [_cos(d, mean_vec) for d in cons_vecs]
    # interaction impact: comments on another agent's post or comment, posts of the commenter before/after
    text_of: dict[tuple[str, str], tuple[str, str]] = {}
    for e in events:
        if isinstance(e, PostCreated):
            text_of[("post", e.body.post_id)] = (e.actor, _text(e))
        elif isinstance(e, CommentCreated):
            text_of[("comment", e.body.comment_id)] = (e.actor, _text(e))
    impacts = []
    for e in events:
        if not isinstance(e, CommentCreated):
            continue
        target = ("post", e.body.post_id) if e.body.depth == 1 else ("comment", e.body.parent_id or "")
        author, text = text_of[target]
        if author == e.actor:
            continue
        before = [vec[p.body.post_id] for p in by_agent.get(e.actor, []) if p.occurred_at < e.occurred_at]
        after = [vec[p.body.post_id] for p in by_agent.get(e.actor, []) if p.occurred_at > e.occurred_at]
        if before and after:
            x = enc.encode([text])[0].astype(np.float64)
            impacts.append(_cos(np.mean(after, axis=0), x) - _cos(np.mean(before, axis=0), x))
    items = individual.items(wh, SOC)
    assert _value(items, "individual.drift_agents") == len(drifts) > 0
    assert _value(items, "individual.drift") == pytest.approx(np.mean(drifts), abs=1e-5)
    assert _value(items, "individual.drift_consistency") == pytest.approx(np.mean(cons), abs=1e-5)
    assert _value(items, "individual.societal_pull") == pytest.approx(np.mean(pulls), abs=1e-5)
    assert _value(items, "individual.impact_pairs") == len(impacts) > 0
    assert _value(items, "individual.interaction_impact") == pytest.approx(np.mean(impacts), abs=1e-5)
    fb = next(i for i in items if isinstance(i, Scalar) and i.key == "individual.feedback_net_progress")
    most = max(len(p) for p in by_agent.values())
    if most < 20:
        assert fb.value is None
        assert fb.reason
        assert str(most) in fb.reason


def test_feedback_progress_against_hand_loop() -> None:
    rng = np.random.default_rng(5)
    posts = [individual.Post(float(i), float(rng.integers(-3, 4)), rng.normal(size=8)) for i in range(30)]
    expected = []
    for w in range(2):  # windows 0-1 and 1-2 of 10 posts
        cur, nxt = posts[10 * w : 10 * w + 10], posts[10 * w + 10 : 10 * w + 20]
        ranked = sorted(cur, key=lambda p: (p.score, p.at))
        bottom, top = (
            np.mean([p.vec for p in ranked[:3]], axis=0),
            np.mean([p.vec for p in ranked[7:]], axis=0),
        )
        now, nx_ = np.mean([p.vec for p in cur], axis=0), np.mean([p.vec for p in nxt], axis=0)
        d = lambda a, b: 1 - _cos(a, b)  # noqa: E731
        expected.append((d(nx_, bottom) - d(now, bottom)) - (d(nx_, top) - d(now, top)))
    assert individual.feedback_progress({"x": posts}) == pytest.approx(expected, abs=1e-12)
    flat = [individual.Post(p.at, 1.0, p.vec) for p in posts]
    assert individual.feedback_progress({"x": flat}) == []  # no spread of feedback: nothing to adapt to


def _window_pageranks(events: list[Event], bucket: Any) -> list[dict[str, float]]:
    """networkx PageRank of each window's interaction graph, windows in order (``bucket`` of a time)."""
    author = {}
    for e in events:
        if isinstance(e, PostCreated):
            author[("p", e.body.post_id)] = e.actor
        elif isinstance(e, CommentCreated):
            author[("c", e.body.comment_id)] = e.actor
    graphs: dict[Any, nx.DiGraph] = defaultdict(nx.DiGraph)
    for e in events:
        if isinstance(e, CommentCreated):
            dst = (
                author[("p", e.body.post_id)] if e.body.depth == 1 else author[("c", e.body.parent_id or "")]
            )
            if dst == e.actor:
                continue
            g = graphs[bucket(e.occurred_at)]
            w = g.get_edge_data(e.actor, dst, {"weight": 0})["weight"]
            g.add_edge(e.actor, dst, weight=w + 1)
    return [
        nx.pagerank(graphs[d], alpha=0.85, tol=1e-10, max_iter=200, weight="weight") for d in sorted(graphs)
    ]


def _top_share(pr: dict[str, float], k: int) -> float:
    return sum(v for _, v in sorted(pr.items(), key=lambda kv: (-kv[1], kv[0]))[:k])


def test_collective_layer_per_day_against_networkx(
    stored: tuple[ClientWarehouse, list[Event], Encoder],
) -> None:
    wh, events, _ = stored
    days = _window_pageranks(events, lambda t: t.date().isoformat())
    tops: dict[int, list[float]] = {1: [], 3: [], 10: []}
    sets, supers_n = [], []
    for pr in days:
        ranked = sorted(pr.items(), key=lambda kv: (-kv[1], kv[0]))
        for k in tops:
            tops[k].append(_top_share(pr, k))
        sets.append({n for n, _ in ranked[:10]})
        scores = np.array(list(pr.values()))
        supers_n.append(int((scores > scores.mean() + 3 * scores.std()).sum()))
    churns = [1 - len(a & b) / len(a | b) for a, b in itertools.pairwise(sets)]
    items = collective.items(wh, SOC)
    assert _value(items, "collective.window_seconds") == 86400
    assert _value(items, "collective.windows") == len(days) == 3
    for k, vals in tops.items():
        assert _value(items, f"collective.top{k}_share") == pytest.approx(np.mean(vals), abs=1e-8)
    assert _value(items, "collective.topk_churn") == pytest.approx(np.mean(churns), abs=1e-12)
    assert _value(items, "collective.super_nodes") == pytest.approx(np.mean(supers_n))
    assert _value(items, "collective.top1_share_first") == pytest.approx(tops[1][0], abs=1e-8)
    assert _value(items, "collective.top1_share_last") == pytest.approx(tops[1][-1], abs=1e-8)
    assert not any(isinstance(i, Scalar) and i.key.startswith(collective.STREAM_VARIANT) for i in items)


def test_collective_layer_keeps_days_when_the_stream_windows_are_shorter(
    stored: tuple[ClientWarehouse, list[Event], Encoder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replayed crawl whose streaming metrics are 6-hourly: the study's figures stay per UTC day, the
    6-hour windows are the labelled variant."""
    wh, events, _ = stored
    six_h = 6 * 3600 * 1_000_000
    monkeypatch.setattr(collective, "window_us", lambda *_a: (six_h, "the society's streaming metrics"))
    items = collective.items(wh, SOC)
    days = _window_pageranks(events, lambda t: t.date().isoformat())
    quarters = _window_pageranks(events, lambda t: int(t.timestamp() * 1e6) // six_h)
    assert len(quarters) > len(days)
    assert _value(items, "collective.window_seconds") == 86400
    assert _value(items, "collective.top1_share") == pytest.approx(np.mean([_top_share(p, 1) for p in days]))
    v = collective.STREAM_VARIANT
    assert _value(items, f"{v}.window_seconds") == 6 * 3600
    assert _value(items, f"{v}.top1_share") == pytest.approx(np.mean([_top_share(p, 1) for p in quarters]))
    labels = [i.label for i in items if isinstance(i, Scalar) and i.key.startswith(v)]
    assert labels
    assert all(label.startswith("variant: windows of 21600 s") for label in labels)


def test_the_trend_of_the_top_share_says_whether_it_falls() -> None:
    """Kendall's tau of the share against the day, as scipy computes it on the same pairs."""
    day = 86_400_000_000
    falling = [0.138, 0.109, 0.066, 0.020, 0.021]  # the review's four days on a crawl, and a fifth
    rows: list[dict[str, float | int | None]] = [
        {"window_start_us": i * day, "top1": v} for i, v in enumerate(falling)
    ]
    got = {i.key: i.value for i in collective.trend_items(rows) if isinstance(i, Scalar)}
    assert got["collective.top1_share_trend"] == pytest.approx(-0.8)  # 9 of 10 pairs fall: (1 - 9) / 10
    assert got["collective.top1_share_first"] == 0.138
    assert got["collective.top1_share_last"] == 0.021
    rising = [{"window_start_us": i * day, "top1": 0.1 * i + 0.01} for i in range(4)]
    up = {i.key: i.value for i in collective.trend_items(rising) if isinstance(i, Scalar)}
    assert up["collective.top1_share_trend"] == pytest.approx(1.0)
    flat = {i.key: i for i in collective.trend_items(rows[:2]) if isinstance(i, Scalar)}
    assert flat["collective.top1_share_trend"].value is None
    assert flat["collective.top1_share_trend"].reason


def test_whole_report_has_no_unexplained_gap(stored: tuple[ClientWarehouse, list[Event], Encoder]) -> None:
    wh, _, enc = stored
    rep = build_report(
        wh, SOC, encoder=enc, only={"activity", "threads", "lexical", "semantic", "collective"}
    )
    assert [s.error for s in rep.sections] == [None] * len(rep.sections)
    for s in rep.sections:
        for i in s.items:
            if isinstance(i, Scalar) and i.value is None:
                assert i.reason, i.key


def test_thread_shape_matches_a_direct_count(stored: tuple[ClientWarehouse, list[Event], Encoder]) -> None:
    wh, events, _ = stored
    posts = [e for e in events if isinstance(e, PostCreated)]
    comments = [e for e in events if isinstance(e, CommentCreated)]
    deepest: dict[str, int] = defaultdict(int)
    for c in comments:
        deepest[c.body.post_id] = max(deepest[c.body.post_id], c.body.depth)
    depths = [deepest.get(p.body.post_id, 0) for p in posts]
    items = social.threads(wh, SOC)
    assert _value(items, "threads.share_posts_without_comment") == depths.count(0) / len(posts)
    assert _value(items, "threads.comments_per_post") == pytest.approx(len(comments) / len(posts))
    per_post = Counter(c.body.post_id for c in comments)
    counts = [per_post.get(p.body.post_id, 0) for p in posts]
    low, high = (
        _value(items, "threads.comments_per_post_ci_low"),
        _value(items, "threads.comments_per_post_ci_high"),
    )
    assert low is not None
    assert high is not None
    assert min(counts) <= low <= len(comments) / len(posts) <= high <= max(counts)
    assert _value(items, "threads.mean_depth_all") == pytest.approx(sum(depths) / len(depths))
    nonzero = [d for d in depths if d]
    assert _value(items, "threads.mean_depth_commented") == pytest.approx(sum(nonzero) / len(nonzero))
    top = sum(1 for c in comments if c.body.depth == 1)
    assert _value(items, "threads.share_top_level_comments") == pytest.approx(top / len(comments))
    assert _value(items, "threads.share_reply_comments") == pytest.approx(1 - top / len(comments))
    assert _value(items, "threads.max_depth") == max(c.body.depth for c in comments)
