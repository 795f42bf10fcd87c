"""Feed ranking: Reddit's hot formula and the exact merge of per-partition top-n lists."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from molt_society.algorithms.feeds import hot_score, merge_feeds, rank_hot, rank_new
from molt_society.schemas.control import FeedItem

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T = (datetime(2026, 1, 28, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)
HOUR = 3600 * 1_000_000


def reddit_hot(score: int, created_us: int) -> float:
    """Reddit's ``_hot``: sign * log10(max(|s|, 1)) + (t - 1134028003) / 45000, t in Unix seconds."""
    if score > 0:
        sign = 1
    elif score < 0:
        sign = -1
    else:
        sign = 0
    seconds = created_us / 1_000_000 - 1134028003
    return sign * math.log10(max(abs(score), 1)) + seconds / 45000


@pytest.mark.parametrize("score", [0, 1, -1, 2, 9, 10, -10, 99, 100, 12345, -777])
@pytest.mark.parametrize("created_us", [T, T + 123_456_789, 1_134_028_003 * 1_000_000, 1_700_000_000_500_000])
def test_hot_score_matches_reddit(score: int, created_us: int) -> None:
    assert hot_score(score, created_us) == pytest.approx(reddit_hot(score, created_us), abs=1e-6)


def test_hot_score_known_values() -> None:
    # At Reddit's epoch the time term vanishes: the score is just sign * log10(|score|)
    at_epoch = 1_134_028_003 * 1_000_000
    assert hot_score(0, at_epoch) == 0
    assert hot_score(1, at_epoch) == 0
    assert hot_score(10, at_epoch) == pytest.approx(1.0)
    assert hot_score(-100, at_epoch) == pytest.approx(-2.0)
    # 45000 s later, one unit more
    assert hot_score(0, at_epoch + 45_000 * 1_000_000) == pytest.approx(1.0)


def test_hot_score_ordering() -> None:
    # same score: newer is hotter
    assert hot_score(5, T + 1_000_000) > hot_score(5, T)
    # same time: more net votes is hotter, negative is colder than none
    assert hot_score(100, T) > hot_score(10, T) > hot_score(1, T) == hot_score(0, T) > hot_score(-5, T)
    # ten times the votes are worth 12.5 hours
    assert hot_score(10, T) == pytest.approx(hot_score(1, T + 45_000 * 1_000_000), abs=1e-6)
    assert hot_score(100, T) > hot_score(1, T + 20 * HOUR)
    assert hot_score(100, T) < hot_score(1, T + 26 * HOUR)
    # a sort by hot_score agrees with a sort by the independent formula on random posts
    rng = random.Random(0)
    posts = [(rng.randint(-50, 5000), T + rng.randrange(0, 72 * HOUR)) for _ in range(300)]
    by_code = sorted(range(len(posts)), key=lambda i: -hot_score(*posts[i]))
    by_formula = sorted(range(len(posts)), key=lambda i: -reddit_hot(*posts[i]))
    assert by_code == by_formula


def _item(post_id: str, submolt: str, created_us: int, score: int) -> FeedItem:
    return {
        "post_id": post_id,
        "author": "a-" + post_id,
        "submolt": submolt,
        "title": "t",
        "created_us": created_us,
        "score": score,
        "comments": 0,
        "hot": hot_score(score, created_us),
        "recent": [],
    }


def _random_items(seed: int, n: int) -> list[FeedItem]:
    rng = random.Random(seed)
    submolts = ["general", "crypto", "ponderings", "rare"]
    items: list[FeedItem] = []
    ids = rng.sample(range(10**6), n)  # unique post ids in random lexical order
    for k in range(n):
        submolt = rng.choices(submolts, weights=[10, 4, 2, 0.2])[0]
        created = T + rng.randrange(0, 40) * HOUR // 4  # coarse times: many ties in "new" and "hot"
        score = rng.choice([0, 0, 1, 1, 2, 5, 10, -1, 50])
        items.append(_item(f"p{ids[k]:06d}", submolt, created, score))
    return items


@pytest.mark.parametrize(("seed", "n"), [(1, 5), (2, 15), (3, 1), (4, 40)])
def test_merge_of_partition_tops_equals_global_top(seed: int, n: int) -> None:
    rng = random.Random(seed)
    items = _random_items(seed, 600)
    partitions: list[list[FeedItem]] = [[] for _ in range(4)]
    for it in items:
        partitions[rng.randrange(4)].append(it)
    parts = []
    for part in partitions:
        by_sub: dict[str, list[FeedItem]] = {}
        for it in part:
            by_sub.setdefault(it["submolt"], []).append(it)
        parts.append({s: {"new": rank_new(v, n), "hot": rank_hot(v, n)} for s, v in by_sub.items()})
    # each partition sent only its own top n
    assert all(len(lists["new"]) <= n for p in parts for lists in p.values())

    merged = merge_feeds(parts, n)

    expected: dict[str, dict[str, list[FeedItem]]] = {}
    for s in sorted({it["submolt"] for it in items}):
        mine = [it for it in items if it["submolt"] == s]
        new = sorted(mine, key=lambda i: (-i["created_us"], i["post_id"]))[:n]
        hot = sorted(mine, key=lambda i: (-reddit_hot(i["score"], i["created_us"]), i["post_id"]))[:n]
        expected[s] = {"new": new, "hot": hot}
    assert merged == expected
    assert list(merged) == sorted(merged)
    # the data really has ties for the tie-break to decide
    general = [it for it in items if it["submolt"] == "general"]
    assert len({it["created_us"] for it in general}) < len(general)


def test_tie_break_by_post_id() -> None:
    same = [_item(pid, "general", T, 3) for pid in ("p-c", "p-a", "p-d", "p-b")]
    parts = [
        {"general": {"new": [same[0], same[2]], "hot": [same[0], same[2]]}},
        {"general": {"new": [same[1], same[3]], "hot": [same[1], same[3]]}},
    ]
    merged = merge_feeds(parts, 3)
    assert [i["post_id"] for i in merged["general"]["new"]] == ["p-a", "p-b", "p-c"]
    assert [i["post_id"] for i in merged["general"]["hot"]] == ["p-a", "p-b", "p-c"]


def test_merge_of_nothing() -> None:
    assert merge_feeds([], 5) == {}
    assert merge_feeds([{}, {}], 5) == {}
    only_new = merge_feeds([{"general": {"new": [_item("x", "general", T, 0)]}}], 5)
    assert [i["post_id"] for i in only_new["general"]["new"]] == ["x"]
    assert only_new["general"]["hot"] == []
