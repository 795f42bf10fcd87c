"""Run the behaviour model in one process, without a broker: for calibration and quick checks.

It wires the same pieces the distributed run uses (roster, brain, ``PartitionState``, feed merge) with
plain function calls, so its society is the one the brokered run produces for the same seed, up to the
assignment of threads to partitions (which does not change any event). ``society calibrate`` prints its
figures next to MoltBook's published ones.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from molt_society.agents.behaviour import Behaviour
from molt_society.agents.brain import FeedView, TickContext
from molt_society.agents.fitted import stochastic_brain
from molt_society.agents.roster import build_roster
from molt_society.algorithms.feeds import merge_feeds
from molt_society.schemas.events import CommentCreated, Event, PostCreated, partition_key
from molt_society.schemas.wire import encode_event
from molt_society.streams.feed_updates import FeedState
from molt_society.streams.outcomes import Accepted
from molt_society.streams.partition_state import PartitionState

MOLTBOOK_TARGETS = {
    "share_posts_without_comment": 0.5925,
    "share_top_level_comments": 0.9404,
    "share_depth_2": 0.0562,
    "share_depth_3_plus": 0.0034,
    "comments_per_post": 405_707 / 91_792,
    "posts_per_author_gini": 0.6097,
}


@dataclass
class OfflineResult:
    events: list[Event] = field(default_factory=list)

    def figures(self) -> dict[str, float]:
        posts = [e for e in self.events if isinstance(e, PostCreated)]
        comments = [e for e in self.events if isinstance(e, CommentCreated)]
        per_post = Counter(c.body.post_id for c in comments)
        depths = Counter(c.body.depth for c in comments)
        n_c = max(1, len(comments))
        per_author = np.array(sorted(Counter(p.actor for p in posts).values()), dtype=float)
        return {
            "events": float(len(self.events)),
            "posts": float(len(posts)),
            "comments": float(len(comments)),
            "share_posts_without_comment": sum(1 for p in posts if per_post[p.body.post_id] == 0)
            / max(1, len(posts)),
            "share_top_level_comments": depths.get(1, 0) / n_c,
            "share_depth_2": depths.get(2, 0) / n_c,
            "share_depth_3_plus": sum(v for d, v in depths.items() if d >= 3) / n_c,
            "max_depth": float(max(depths, default=0)),
            "comments_per_post": len(comments) / max(1, len(posts)),
            "posts_per_author_gini": gini(per_author),
        }


def gini(values: npt.NDArray[np.float64]) -> float:
    """Gini coefficient of non-negative values (0 for fewer than two)."""
    if len(values) < 2 or values.sum() == 0:
        return 0.0
    v = np.sort(values)
    n = len(v)
    return float((2 * np.arange(1, n + 1) - n - 1).dot(v) / (n * v.sum()))


def simulate(
    *,
    seed: int,
    agents: int,
    ticks: int,
    behaviour: Behaviour,
    shards: int = 8,
    partitions: int = 4,
    tick_seconds: float = 60.0,
    start: datetime,
    society: str = "offline",
    feed_size: int = 15,
    sink: Callable[[Event], None] | None = None,
) -> OfflineResult:
    """Run ``ticks`` ticks of a society in this process and return every accepted event (or hand each to
    ``sink`` instead, keeping none: a large society's events need not fit in memory)."""
    roster = build_roster(seed, agents, shards, behaviour)
    by_shard = [roster.cohort(s) for s in range(shards)]
    brain = stochastic_brain(behaviour)
    states = [
        PartitionState(
            q,
            partitions,
            window_us=3600 * 10**6,
            feed_size=feed_size,
            max_event_bytes=1 << 20,
            max_future_us=2**62,
        )
        for q in range(partitions)
    ]
    readers = [FeedState() for _ in range(partitions)]
    result = OfflineResult()
    keep = sink if sink is not None else result.events.append
    feed = FeedView(-1, {})
    subs = tuple(behaviour.submolts.names)
    for tick in range(ticks):
        t0 = start + timedelta(seconds=tick * tick_seconds)
        for shard, members in enumerate(by_shard):
            ctx = TickContext(
                society, tick, t0, tick_seconds, np.random.default_rng([seed, shard, tick]), subs
            )
            for ev in brain.decide_now(members, feed, ctx):
                q = zlib.crc32(partition_key(ev).encode()) % partitions
                if isinstance(states[q].accept_action(encode_event(ev), now_us=2**62), Accepted):
                    keep(ev)
        for st, reader in zip(states, readers, strict=True):  # the records the brokered run publishes
            reader.apply(st.feed_update(tick))
        feed = FeedView(tick, merge_feeds((r.view() for r in readers), feed_size))
    return result
