"""Clone swarms, posting rhythm, burstiness and the Li-crawl comparators (report section "patterns").

Synthetic societies of known answer are stored in a real chDB through the sink's row builders; the
expected values come from the construction itself and from plain Python / numpy on the generated times
and texts (statistics.stdev, pairwise Gini, Python shingling), never from the views.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import statistics
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from stored_events import open_chdb, store_events

from molt_society.report import clones, platform_patterns, reference_stats, rhythm
from molt_society.report.model import Item, Scalar, Table
from molt_society.report.published import annotate
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.schemas.events import CommentCreated, Event, PostCreated, VoteCast, VoteTallied
from molt_society.schemas.ids import uuid7
from molt_society.warehouse import Result

T0 = datetime(2026, 2, 1, tzinfo=UTC)
HOUR = 3600.0

# gaps in hours per agent of the "rhythm" society, and the class Li 2026's thresholds give each CoV
RHYTHM: dict[str, list[int]] = {
    "metronome": [4, 4, 4, 4, 4],  # CoV 0
    "steady": [3, 4, 5, 4],  # CoV 0.204: very regular
    "regular": [2, 4, 6, 4],  # CoV 0.408: regular
    "mixed": [1, 1, 4],  # CoV 0.866: mixed
    "irregular": [1, 1, 1, 9],  # CoV 1.333: irregular
    "erratic": [1] * 9 + [31],  # CoV 2.37: very irregular
    "twice": [5],  # 2 posts: not in the population
}


def _post(soc: str, actor: str, pid: str, at: datetime, title: str = "t", content: str = "") -> Event:
    body = {"post_id": pid, "submolt": "general", "title": title, "content": content}
    return PostCreated(event_id=uuid7(at), society=soc, actor=actor, occurred_at=at, body=body)


def _comment(soc: str, actor: str, cid: str, pid: str, at: datetime, content: str = "c") -> Event:
    body = {"comment_id": cid, "post_id": pid, "depth": 1, "content": content}
    return CommentCreated(event_id=uuid7(at), society=soc, actor=actor, occurred_at=at, body=body)


def _rhythm_society() -> list[Event]:
    events: list[Event] = []
    for actor, gaps in RHYTHM.items():
        at = T0 + timedelta(minutes=len(events))
        times = [at]
        for g in gaps:
            times.append(times[-1] + timedelta(hours=g))
        events += [_post("rhythm", actor, f"{actor}-{i}", t) for i, t in enumerate(times)]
    # three posts at one instant: CoV undefined (mean gap 0), counted apart
    events += [_post("rhythm", "instant", f"instant-{i}", T0 + timedelta(hours=1)) for i in range(3)]
    # two posts and four comments: outside the posts population, inside the posts-and-comments variant
    events += [_post("rhythm", "talker", f"talker-{i}", T0 + timedelta(hours=10 * i)) for i in range(2)]
    events += [
        _comment("rhythm", "talker", f"tc{i}", "metronome-0", T0 + timedelta(hours=3 + 7 * i))
        for i in range(4)
    ]
    # no author: never an agent
    events += [_post("rhythm", "unknown", f"u{i}", T0 + timedelta(hours=i)) for i in range(4)]
    return events


POISSON_AGENTS, POISSON_POSTS = 12, 400


def _poisson_society() -> tuple[list[Event], dict[str, list[float]]]:
    rng = np.random.default_rng(3)
    events: list[Event] = []
    gaps: dict[str, list[float]] = {}
    for a in range(POISSON_AGENTS):
        actor = f"poisson{a}"
        g = np.round(rng.exponential(4 * HOUR, POISSON_POSTS - 1), 6)  # microsecond times, as stored
        gaps[actor] = [float(x) for x in g]
        t = T0 + timedelta(seconds=float(a))
        events.append(_post("poisson", actor, f"{actor}-0", t))
        for i, x in enumerate(g, start=1):
            t = t + timedelta(seconds=float(x))
            events.append(_post("poisson", actor, f"{actor}-{i}", t))
    return events, gaps


# clone society: random texts over a made-up vocabulary, plus planted near-duplicates
_RNG = random.Random(11)
VOCAB = [
    "".join(_RNG.choice("bcdfghjklmnprstvz") + _RNG.choice("aeiou") for _ in range(3)) for _ in range(3000)
]


def _words(n: int) -> list[str]:
    return [_RNG.choice(VOCAB) for _ in range(n)]


BASE = _words(40)
VARIANTS = [[*BASE[:p], f"zzzq{p}", *BASE[p + 1 :]] for p in (8, 16, 24, 32)]  # one word swapped each
NEAR_MISS = BASE[:20] + _words(20)
COPY = _words(15)
SELF = _words(15)
DISTINCT = [_words(12) for _ in range(30)]


def _shingles(text: str) -> set[tuple[str, ...]]:
    w = re.findall(r"[^\W_]+", text.lower())
    return {tuple(w[i : i + 3]) for i in range(len(w) - 2)}


def _jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb)


def _clone_society() -> list[Event]:
    soc = "clones"
    events: list[Event] = []
    at = iter(T0 + timedelta(minutes=i) for i in itertools.count())
    for i, w in enumerate(DISTINCT):
        events.append(_post(soc, f"d{i}", f"dp{i}", next(at), title=" ".join(w[:4]), content=" ".join(w[4:])))
    # swarm A: the base and 4 one-word edits, comments by 5 agents
    for i, w in enumerate([BASE, *VARIANTS]):
        events.append(_comment(soc, f"a{i}", f"ac{i}", "dp0", next(at), " ".join(w)))
    events.append(_comment(soc, "miss", "mc", "dp1", next(at), " ".join(NEAR_MISS)))
    # swarm B: 3 copies up to case and punctuation, posts by 2 agents
    text = " ".join(COPY)
    for i, (actor, variant) in enumerate(
        [("b0", text), ("b0", text.upper() + "!"), ("b1", text.replace(" ", ", "))]
    ):
        events.append(_post(soc, actor, f"bp{i}", next(at), title="", content=variant))
    # one agent repeating itself: not a swarm
    events += [_post(soc, "self", f"sp{i}", next(at), title="", content=" ".join(SELF)) for i in range(3)]
    # short generic comments by many agents: too short to be considered
    events += [_comment(soc, f"g{i}", f"gc{i}", "dp2", next(at), "Great post, thanks!") for i in range(6)]
    return events


# post -> (author, stored comments, reported comment count or None, upvotes cast, upvotes tallied)
REF_POSTS = {
    "r1": ("ann", 2, None, 3, 0),
    "r2": ("ann", 0, 5, 0, 7),  # imported: the platform counted 5 comments, none present
    "r3": ("bob", 0, None, 0, 0),
    "r4": ("cat", 1, 0, 1, 2),  # a reported 0 wins over the 1 present: the crawl counted comment_count
    "r5": ("ann", 0, None, 0, 0),
}


def _reference_society() -> tuple[list[Event], list[int]]:
    soc = "ref"
    events: list[Event] = []
    comment_up: list[int] = []
    for n, (pid, (author, stored, reported, cast, tallied)) in enumerate(REF_POSTS.items(), start=1):
        at = T0 + timedelta(hours=n)
        events.append(_post(soc, author, pid, at))
        for k in range(cast):
            body = {"target_type": "post", "target_id": pid, "post_id": pid, "value": 1}
            events.append(VoteCast(event_id=uuid7(at), society=soc, actor=f"v{k}", occurred_at=at, body=body))
        body2 = {"target_type": "post", "target_id": pid, "post_id": pid, "value": -1}
        events.append(VoteCast(event_id=uuid7(at), society=soc, actor="hater", occurred_at=at, body=body2))
        if reported is not None or tallied:
            tb: dict[str, Any] = {"target_type": "post", "target_id": pid, "post_id": pid, "upvotes": tallied}
            tb["downvotes"] = 0
            if reported is not None:
                tb["reported_comments"] = reported
            events.append(
                VoteTallied(event_id=uuid7(at), society=soc, actor="platform", occurred_at=at, body=tb)
            )
        for c in range(stored):
            cid = f"{pid}c{c}"
            ct = at + timedelta(minutes=c + 1)
            events.append(_comment(soc, "zed", cid, pid, ct))
            up = c + 1
            comment_up.append(up + (4 if cid == "r1c0" else 0))
            for k in range(up):
                body = {"target_type": "comment", "target_id": cid, "post_id": pid, "value": 1}
                events.append(
                    VoteCast(event_id=uuid7(ct), society=soc, actor=f"w{k}", occurred_at=ct, body=body)
                )
            if cid == "r1c0":
                tb = {
                    "target_type": "comment",
                    "target_id": cid,
                    "post_id": pid,
                    "upvotes": 4,
                    "downvotes": 1,
                }
                events.append(
                    VoteTallied(event_id=uuid7(ct), society=soc, actor="platform", occurred_at=ct, body=tb)
                )
    return events, comment_up


class RecordingWarehouse:
    """Passes queries through and keeps their text (to check that no agent text is ever put in SQL)."""

    def __init__(self, inner: ClientWarehouse) -> None:
        self.inner = inner
        self.sql: list[str] = []

    def query(self, sql: str) -> Result:
        self.sql.append(sql)
        return self.inner.query(sql)

    def store_embeddings(self, model: str, hashes: Any, vectors: Any) -> None:
        raise AssertionError("the patterns section stores nothing")

    def close(self) -> None:
        return None


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingWarehouse]:
    client = open_chdb(str(tmp_path_factory.mktemp("patterns")))
    poisson, _ = _poisson_society()
    ref, _ = _reference_society()
    store_events(client, _rhythm_society() + poisson + _clone_society() + ref)
    yield RecordingWarehouse(ClientWarehouse(client))
    client.close()


def _by_key(items: list[Item]) -> dict[str, Item]:
    return {i.key: i for i in items}


def _value(items: list[Item], key: str) -> float:
    item = _by_key(items)[key]
    assert isinstance(item, Scalar), key
    assert item.value is not None, (key, item.reason)
    return float(item.value)


def _cv(gaps: list[float]) -> float:
    return statistics.stdev(gaps) / statistics.fmean(gaps)


def _b(gaps: list[float]) -> float:
    sigma, mu = statistics.pstdev(gaps), statistics.fmean(gaps)
    return (sigma - mu) / (sigma + mu)


# ---- posting rhythm -------------------------------------------------------------------------------------


def test_cv_classes_and_autonomous_share_as_li_2026(wh: RecordingWarehouse) -> None:
    items = rhythm.items(wh, "rhythm")
    covs = {a: _cv([g * HOUR for g in gaps]) for a, gaps in RHYTHM.items() if len(gaps) >= 2}
    assert [
        rhythm.classify(covs[a]) for a in ("metronome", "steady", "regular", "mixed", "irregular", "erratic")
    ] == [
        "very regular",
        "very regular",
        "regular",
        "mixed",
        "irregular",
        "very irregular",
    ]
    assert _value(items, "rhythm.agents") == 6  # not: twice (2 posts), instant (undefined), talker, unknown
    assert _value(items, "rhythm.cv_undefined") == 1
    assert _value(items, "rhythm.autonomous_share") == pytest.approx(3 / 6)
    assert _value(items, "rhythm.cv_median") == pytest.approx(statistics.median(covs.values()), rel=1e-9)
    assert _value(items, "rhythm.cv_mean") == pytest.approx(statistics.fmean(covs.values()), rel=1e-9)
    for q in ("cv_median", "cv_mean"):  # a bootstrap CI over the 6 agents: inside their range, around it
        low, high = _value(items, f"rhythm.{q}_ci_low"), _value(items, f"rhythm.{q}_ci_high")
        assert min(covs.values()) <= low <= _value(items, f"rhythm.{q}") <= high <= max(covs.values())
        assert low < high
    for key, share in [
        ("rhythm.share_very_regular", 2 / 6),
        ("rhythm.share_regular", 1 / 6),
        ("rhythm.share_mixed", 1 / 6),
        ("rhythm.share_irregular", 1 / 6),
        ("rhythm.share_very_irregular", 1 / 6),
    ]:
        assert _value(items, key) == pytest.approx(share)
    # the published comparison is attached to the faithful key only, never to the variant
    scalars = {i.key: annotate(i) for i in items if isinstance(i, Scalar)}
    assert scalars["rhythm.autonomous_share"].published == pytest.approx(0.265)
    assert scalars["rhythm.variant_activity.autonomous_share"].published is None
    assert "variant" in scalars["rhythm.variant_activity.autonomous_share"].label
    # the variant counts comments too: the talker (2 posts, 4 comments) joins it
    assert _value(items, "rhythm.variant_activity.agents") == 7


def test_regular_vs_poisson_posting(wh: RecordingWarehouse) -> None:
    _, gaps = _poisson_society()
    res = wh.query(
        "SELECT actor, cv, burstiness FROM rhythm_agents "
        "WHERE society = 'poisson' AND scope = 'posts' ORDER BY actor"
    )
    got = {r[0]: (r[1], r[2]) for r in res.rows}
    assert set(got) == set(gaps)
    for actor, g in gaps.items():
        assert got[actor][0] == pytest.approx(_cv(g), rel=1e-6)
        assert got[actor][1] == pytest.approx(_b(g), rel=1e-6, abs=1e-9)
    covs = [c for c, _ in got.values()]
    assert 0.85 < statistics.fmean(covs) < 1.15  # exponential gaps: CoV ~ 1
    assert all(abs(b) < 0.1 for _, b in got.values())  # ... and B ~ 0
    metro = wh.query(
        "SELECT cv, burstiness FROM rhythm_agents "
        "WHERE society = 'rhythm' AND scope = 'posts' AND actor = 'metronome'"
    ).rows[0]
    assert metro[0] == pytest.approx(0.0, abs=1e-12)
    assert metro[1] == pytest.approx(-1.0)


def test_burstiness_hand_computed(wh: RecordingWarehouse) -> None:
    # gaps 1, 1, 4 hours: mu = 2, sigma = sqrt(2) -> B = (sqrt 2 - 2) / (sqrt 2 + 2)
    b = wh.query(
        "SELECT burstiness FROM rhythm_agents "
        "WHERE society = 'rhythm' AND scope = 'posts' AND actor = 'mixed'"
    ).rows[0][0]
    assert b == pytest.approx((math.sqrt(2) - 2) / (math.sqrt(2) + 2), rel=1e-9)
    items = rhythm.items(wh, "rhythm")
    agent_b = [_b(gaps) for gaps in RHYTHM.values() if len(gaps) >= 2]  # not: twice, instant (no spread)
    agent_b.append(_b([3, 7, 0, 7, 7]))  # talker: posts at 0 h, 10 h; comments at 3, 10, 17, 24 h
    assert _value(items, "burstiness.agents") == len(agent_b)
    assert _value(items, "burstiness.agent_median") == pytest.approx(statistics.median(agent_b), rel=1e-9)
    # the platform's sequence of posts: every agent's (not 'unknown')
    times = sorted(
        e.occurred_at.timestamp()
        for e in _rhythm_society()
        if isinstance(e, PostCreated) and e.actor != "unknown"
    )
    assert _value(items, "burstiness.platform_posts") == pytest.approx(_b(list(np.diff(times))), rel=1e-9)


# ---- clone swarms ---------------------------------------------------------------------------------------


def test_planted_data_is_what_it_claims() -> None:
    base = " ".join(BASE)
    assert all(_jaccard(base, " ".join(v)) >= clones.THRESHOLD for v in VARIANTS)
    assert all(
        _jaccard(" ".join(a), " ".join(b)) < clones.THRESHOLD for a, b in itertools.combinations(VARIANTS, 2)
    )
    assert _jaccard(base, " ".join(NEAR_MISS)) < 0.5


@pytest.mark.parametrize("listed", [clones.LISTED_SETS, 0], ids=["paired-sets-named", "paired-sets-queried"])
def test_clone_swarms(wh: RecordingWarehouse, listed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clones, "LISTED_SETS", listed)
    items = clones.items(wh, "clones")
    assert _value(items, "clones.threshold") == clones.THRESHOLD
    assert _value(items, "clones.swarms") == 2  # A (5 comments, 5 agents) and B (3 posts, 2 agents)
    table = _by_key(items)["clones.top"]
    assert isinstance(table, Table)
    cols = table.columns
    rows = [dict(zip(cols, r, strict=True)) for r in table.rows]
    assert [(r["texts"], r["agents"], r["posts"], r["comments"], r["distinct texts"]) for r in rows] == [
        (5, 5, 0, 5, 5),
        (3, 2, 3, 0, 1),
    ]
    assert [r["earliest text id"] for r in rows] == ["ac0", "bp0"]
    n_posts = 30 + 3 + 3
    n_comments = 5 + 1 + 6
    assert _value(items, "clones.share_posts") == pytest.approx(3 / n_posts)
    assert _value(items, "clones.share_comments") == pytest.approx(5 / n_comments)
    assert _value(items, "clones.largest") == 5
    assert _value(items, "clones.max_authors") == 5
    # short comments are not considered: 30 + 5 + 1 + 3 + 3 texts
    assert _value(items, "clones.texts") == 42


def test_clone_pair_jaccard_is_exact(wh: RecordingWarehouse) -> None:
    res = wh.query("SELECT item_id, set_hash FROM clone_items WHERE society = 'clones'")
    set_of = {r[0]: int(r[1]) for r in res.rows}
    pairs = {
        (int(r[0]), int(r[1])): float(r[2])
        for r in wh.query("SELECT set_a, set_b, jaccard FROM clone_pairs WHERE society = 'clones'").rows
    }
    for i, v in enumerate(VARIANTS, start=1):
        a, b = sorted((set_of["ac0"], set_of[f"ac{i}"]))
        assert pairs[(a, b)] == pytest.approx(_jaccard(" ".join(BASE), " ".join(v)), rel=1e-12)
    assert set_of["bp0"] == set_of["bp1"] == set_of["bp2"]  # copies up to case and punctuation: one set


def _int_hash64(x: int) -> int:
    """ClickHouse's SQL ``intHash64``: the MurmurHash3 finalizer of x XOR 0x4CF2D2BAAE6DA887."""
    m = (1 << 64) - 1
    x ^= 0x4CF2D2BAAE6DA887
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & m
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & m
    return x ^ (x >> 33)


def test_clone_signatures_are_the_minhash_of_each_set(wh: RecordingWarehouse) -> None:
    rows = wh.query(
        "SELECT set_hash, shingles, signature FROM clone_sets WHERE society = 'clones' ORDER BY set_hash"
    ).rows
    assert len(rows) >= 10
    for _, shingles, signature in rows:
        expected = [
            min(_int_hash64(int(s) ^ _int_hash64(k)) for s in shingles) for k in range(clones.PERMUTATIONS)
        ]
        assert [int(v) for v in signature] == expected


def test_one_agent_repeating_itself_is_no_swarm() -> None:
    members = [
        (1, "post", "self", 3, "sp0", "t0"),
        (2, "post", "x", 1, "x0", "t1"),
        (3, "post", "y", 1, "y0", "t2"),
    ]
    assert clones.swarms(members, []) == []
    found = clones.swarms(members, [(1, 2)])
    assert [(s.texts, len(s.authors), s.sets) for s in found] == [(4, 2, 2)]


# ---- comparators ----------------------------------------------------------------------------------------


def _pairwise_gini(x: list[float]) -> float:
    n, total = len(x), sum(x)
    return sum(abs(a - b) for a in x for b in x) / (2 * n * total) if total else 0.0


def test_reference_comparators_on_the_crawls_population(wh: RecordingWarehouse) -> None:
    items = reference_stats.items(wh, "ref")
    counts = [
        rep if rep is not None else stored for _, stored, rep, _, _ in REF_POSTS.values()
    ]  # 2, 5, 0, 0, 0
    assert _value(items, "reference.share_posts_without_comment") == pytest.approx(3 / 5)
    assert _value(items, "reference.mean_comment_count") == pytest.approx(statistics.fmean(counts))
    upvotes = [float(cast + tallied) for _, _, _, cast, tallied in REF_POSTS.values()]  # -1 votes not upvotes
    assert _value(items, "reference.post_upvotes_gini") == pytest.approx(_pairwise_gini(upvotes))
    _, comment_up = _reference_society()
    assert _value(items, "reference.comment_upvotes_gini") == pytest.approx(
        _pairwise_gini([float(u) for u in comment_up])
    )
    per_author = [3.0, 1.0, 1.0]  # ann, bob, cat
    assert _value(items, "reference.posts_per_author_mean") == pytest.approx(5 / 3)
    assert _value(items, "reference.posts_per_author_median") == 1.0
    assert _value(items, "reference.posts_per_author_gini") == pytest.approx(_pairwise_gini(per_author))
    # bootstrap CIs of each: authors (3, 1, 1) resampled give a mean of 1 with chance 8/27 and 3 with 1/27
    assert _value(items, "reference.posts_per_author_mean_ci_low") == 1.0
    assert _value(items, "reference.posts_per_author_mean_ci_high") == 3.0
    for key in (
        "share_posts_without_comment",
        "mean_comment_count",
        "post_upvotes_gini",
        "comment_upvotes_gini",
    ):
        low, high = _value(items, f"reference.{key}_ci_low"), _value(items, f"reference.{key}_ci_high")
        assert low is not None
        assert high is not None
        assert low <= (_value(items, f"reference.{key}") or 0) <= high
    assert reference_stats.gini([1, 1, 1]) == 0.0
    assert reference_stats.gini([0, 0, 4]) == pytest.approx(2 / 3)
    table = _by_key(items)["reference.li_crawl"]
    assert isinstance(table, Table)
    by_label = {r[0]: r for r in table.rows}
    assert by_label["comments that are top-level (their depth 0)"][1:3] == [1.0, 0.9404]
    assert by_label["posts without a comment"][2] == pytest.approx(0.5925)


def test_threads_share_without_comment_carries_no_crawl_value() -> None:
    # the crawl's 59.25% counts each post's platform comment_count; the threads key counts comments present
    s = annotate(Scalar("threads.share_posts_without_comment", "share", 0.5))
    assert s.published is None
    r = annotate(Scalar("reference.share_posts_without_comment", "share", 0.5))
    assert r.published == pytest.approx(1 - 0.4075)
    assert "a4_thread_structure" in (r.published_source or "")


# ---- the section ----------------------------------------------------------------------------------------


def test_section_runs_and_never_puts_agent_text_in_sql(wh: RecordingWarehouse) -> None:
    wh.sql.clear()
    got = platform_patterns.items(wh, "clones")
    keys = {i.key for i in got}
    assert {
        "rhythm.autonomous_share",
        "clones.swarms",
        "burstiness.platform_activity",
        "reference.li_crawl",
    } <= keys
    words = {w for t in [BASE, COPY, SELF, NEAR_MISS, *VARIANTS, *DISTINCT] for w in t}  # made-up words
    for sql in wh.sql:
        found = set(re.findall(r"[a-z0-9]+", sql.lower())) & words
        assert not found, (found, sql)
