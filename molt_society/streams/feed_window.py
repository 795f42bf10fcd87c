"""One submolt's feed candidates (its newest posts) kept in both feed orders, so a feed costs its length.

A partition ranks a submolt's feeds over the ``feeds.hot_window`` newest posts of that submolt. Sorting
all of them again after every change made a tick's feed work grow with the society's age until each
submolt held a full window (``bench.aging``: the stream worker's feed refresh went from 1.2 to 3.7 ms a
tick over a simulated month). ``FeedWindow`` keeps the candidates sorted by creation time and by hot rank
as posts arrive, are voted on, leave the window or are removed, and answers ``top_new`` / ``top_hot``
with exactly the lists ``feeds.rank_new`` / ``feeds.rank_hot`` give over all the candidates.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable


class FeedWindow:
    """The newest ``cap`` posts of one submolt: ``newest`` as (created_us, post_id) ascending (the order a
    snapshot stores), ``hottest`` as (-hot, post_id) ascending, ``hot_of`` each post's hot rank."""

    __slots__ = ("cap", "hot_of", "hottest", "newest")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.newest: list[tuple[int, str]] = []
        self.hottest: list[tuple[float, str]] = []
        self.hot_of: dict[str, float] = {}

    @classmethod
    def of(cls, cap: int, newest: list[tuple[int, str]], hot: Callable[[str], float]) -> FeedWindow:
        """A window holding ``newest`` (ascending, at most ``cap``), each post's rank from ``hot``."""
        w = cls(cap)
        w.newest = sorted((c, p) for c, p in newest)
        w.hot_of = {p: hot(p) for _, p in w.newest}
        w.hottest = sorted((-h, p) for p, h in w.hot_of.items())
        return w

    def __len__(self) -> int:
        return len(self.newest)

    def add(self, created_us: int, post_id: str, hot: float) -> None:
        """A new post; the oldest leaves when the window is over ``cap`` (it may be the new one)."""
        bisect.insort(self.newest, (created_us, post_id))
        self.hot_of[post_id] = hot
        bisect.insort(self.hottest, (-hot, post_id))
        if len(self.newest) > self.cap:
            _, gone = self.newest.pop(0)
            self._drop_hot(gone)

    def remove(self, created_us: int, post_id: str) -> None:
        """Take a post out (a moderator removed it); nothing if it is not in the window."""
        at = bisect.bisect_left(self.newest, (created_us, post_id))
        if at < len(self.newest) and self.newest[at][1] == post_id:
            del self.newest[at]
            self._drop_hot(post_id)

    def rescore(self, post_id: str, hot: float) -> None:
        """A post's hot rank changed (a vote); nothing if it is not in the window."""
        old = self.hot_of.get(post_id)
        if old is None or old == hot:
            return
        self._drop_hot(post_id)
        self.hot_of[post_id] = hot
        bisect.insort(self.hottest, (-hot, post_id))

    def retain(self, keep: Callable[[str], bool]) -> bool:
        """Keep only the posts ``keep`` accepts; whether any left."""
        kept = [(c, p) for c, p in self.newest if keep(p)]
        if len(kept) == len(self.newest):
            return False
        self.newest = kept
        self.hottest = [(h, p) for h, p in self.hottest if keep(p)]
        self.hot_of = {p: h for p, h in self.hot_of.items() if keep(p)}
        return True

    def top_new(self, n: int) -> list[str]:
        """The ``n`` newest post ids, newest first, ties by post id ascending (``feeds.rank_new``)."""
        if n <= 0 or not self.newest:
            return []
        start = max(len(self.newest) - n, 0)
        boundary = self.newest[start][0]
        while start > 0 and self.newest[start - 1][0] == boundary:  # the whole tie at the cut
            start -= 1
        tail = sorted(self.newest[start:], key=lambda cp: (-cp[0], cp[1]))
        return [p for _, p in tail[:n]]

    def top_hot(self, n: int) -> list[str]:
        """The ``n`` hottest post ids, ties by post id ascending (``feeds.rank_hot``)."""
        return [p for _, p in self.hottest[: max(n, 0)]]

    def _drop_hot(self, post_id: str) -> None:
        hot = self.hot_of.pop(post_id)
        at = bisect.bisect_left(self.hottest, (-hot, post_id))
        del self.hottest[at]
