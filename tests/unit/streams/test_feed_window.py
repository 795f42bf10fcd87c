"""FeedWindow keeps a submolt's candidates in both feed orders as they change; its top lists must be what
sorting all the candidates again gives (``feeds.rank_new`` / ``feeds.rank_hot``)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from molt_society.algorithms.feeds import hot_score, rank_hot, rank_new
from molt_society.streams.feed_window import FeedWindow


class _Reference:
    """The window by brute force: every post with its score, the newest ``cap`` by re-sorting all."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.posts: dict[str, tuple[int, int]] = {}  # post id -> (created_us, score)

    def add(self, created: int, pid: str) -> None:
        self.posts[pid] = (created, 0)
        if len(self.posts) > self.cap:
            oldest = min((c, p) for p, (c, _) in self.posts.items())
            del self.posts[oldest[1]]

    def items(self) -> list[Any]:
        return [{"post_id": p, "created_us": c, "hot": hot_score(s, c)} for p, (c, s) in self.posts.items()]


@pytest.mark.parametrize("seed", range(12))
def test_top_lists_equal_a_full_sort_after_every_change(seed: int) -> None:
    rng = random.Random(seed)
    cap, n = rng.choice([(5, 3), (20, 7), (50, 50), (30, 40)])
    window, ref = FeedWindow(cap), _Reference(cap)
    scores: dict[str, int] = {}
    next_id = 0
    for _ in range(600):
        op = rng.random()
        if op < 0.35 or not ref.posts:
            # coarse creation times: many ties, and posts older than the window's oldest
            created = 1_700_000_000_000_000 + rng.randrange(40) * 1_000_000
            pid = f"p{rng.randrange(10**6):06d}-{next_id}"
            next_id += 1
            window.add(created, pid, hot_score(0, created))
            ref.add(created, pid)
            scores[pid] = 0
        elif op < 0.85:
            pid = rng.choice(sorted(scores))  # a vote, also on posts that left the window
            scores[pid] += rng.choice([-3, -1, 1, 1, 2, 10, 100])
            if pid in ref.posts:
                c = ref.posts[pid][0]
                ref.posts[pid] = (c, scores[pid])
                window.rescore(pid, hot_score(scores[pid], c))
            else:
                window.rescore(pid, 0.0)  # not in the window: must change nothing
        elif op < 0.95:
            pid = rng.choice(sorted(scores))
            if pid in ref.posts:
                window.remove(ref.posts.pop(pid)[0], pid)
            else:
                window.remove(1, pid)
        else:
            gone = {p for p in ref.posts if rng.random() < 0.2}
            keep = set(ref.posts) - gone
            assert window.retain(keep.__contains__) == bool(gone)
            for p in gone:
                del ref.posts[p]
        items = ref.items()
        assert window.top_new(n) == [i["post_id"] for i in rank_new(items, n)]
        assert window.top_hot(n) == [i["post_id"] for i in rank_hot(items, n)]
        assert len(window) == len(ref.posts)


def test_of_rebuilds_the_same_window() -> None:
    rng = random.Random(3)
    window = FeedWindow(10)
    hots: dict[str, float] = {}
    for k in range(25):
        created = rng.randrange(5)
        pid = f"p{k}"
        hots[pid] = hot_score(rng.randrange(-5, 50), created)
        window.add(created, pid, hots[pid])
    again = FeedWindow.of(10, list(reversed(window.newest)), hots.__getitem__)
    assert again.newest == window.newest
    assert again.top_hot(10) == window.top_hot(10)
    assert again.top_new(4) == window.top_new(4)
