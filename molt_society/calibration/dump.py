"""Read a real MoltBook dump for a fit: its moments, what can be estimated directly, and its texts.

Any layout ``society replay`` reads (``importers.import_path``). Estimated directly from the dump, not by
simulation: the observed period and its first instant, the population (distinct authors of posts and
comments), the submolts and their popularity (the 63 most used; the posts of the others are counted in
proportion), the daily cycle (activity per hour of the day over a log-linear trend, see ``daily_cycle``),
the growth of that trend, the share of upvotes and the votes per comment, and the size the feed lists need
(twice the most posts the busiest submolt saw in one tick, 15 to 200).
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from molt_society.agents.roster import MAX_SUBMOLTS
from molt_society.agents.text_model import TextSample
from molt_society.calibration.moments import Moments
from molt_society.calibration.observed import observe
from molt_society.importers import import_path
from molt_society.schemas.events import CommentCreated, Event, PostCreated, VoteTallied

MAX_TEXT_CHARS = 20_000
"""Longer texts (spam of megabytes exists in real dumps) are cut to this before the text model sees them."""


@dataclass
class Dump:
    path: Path
    moments: dict[str, float | None]
    start: datetime
    hours: float
    agents: int
    posts: int
    comments: int
    submolts: list[tuple[str, float]]
    hourly: list[float]
    growth_per_day: float
    upvote_share: float
    votes_per_comment: float
    peak_posts_per_hour: float  # in the most used submolt: what its feed must hold
    texts: list[TextSample] = field(default_factory=list, repr=False)
    import_summary: str = ""


def sample_threads(events: list[Event], share: float) -> list[Event]:
    """The threads (post, comments, vote tallies) of a ``share`` of the posts, chosen by a hash of the post
    id (the same threads on every machine), and every event outside a thread: a smaller dump of the same
    kind, over the same period, at a fraction of the population."""
    cut = int(share * 2**32)

    def kept(post_id: str) -> bool:
        return zlib.crc32(post_id.encode()) < cut

    timed = (PostCreated, CommentCreated, VoteTallied)
    return [e for e in events if not isinstance(e, timed) or kept(e.body.post_id)]


def read_dump(path: Path, sample: float | None = None) -> Dump:
    """The dump at ``path`` (a file or a folder); ``ValueError`` when it holds no posts and comments.
    ``sample``: only that share of its threads (``sample_threads``; ``SOCIETY_FIT_SAMPLE``)."""
    result = import_path(path, "fit")
    events = result.events if sample is None else sample_threads(result.events, sample)
    posts = [e for e in events if isinstance(e, PostCreated)]
    comments = [e for e in events if isinstance(e, CommentCreated)]
    if not posts or not comments:
        raise ValueError(
            f"{path}: a fit needs posts and comments; the import found {len(posts)} posts and "
            f"{len(comments)} comments (events by type: {dict(result.report.events_by_type())})"
        )
    m: Moments = observe(events)
    stamps = np.array([e.occurred_at.timestamp() for e in (*posts, *comments)])
    lo, hi = float(stamps.min()), float(stamps.max())
    agents = len({e.actor for e in posts} | {e.actor for e in comments})
    votes = [e for e in events if isinstance(e, VoteTallied)]
    up = sum(v.body.upvotes for v in votes)
    down = sum(v.body.downvotes for v in votes)
    hourly, growth = daily_cycle(stamps)
    shares = submolt_shares(Counter(p.body.submolt for p in posts))
    main = shares[0][0]
    by_hour = Counter(int(p.occurred_at.timestamp() // 3600) for p in posts if p.body.submolt == main)
    return Dump(
        path=path,
        moments=m.result(),
        start=datetime.fromtimestamp(math.floor(lo / 3600) * 3600, UTC),
        hours=max(1.0, math.ceil((hi - math.floor(lo / 3600) * 3600) / 3600)),
        agents=agents,
        posts=len(posts),
        comments=len(comments),
        submolts=shares,
        hourly=hourly,
        growth_per_day=growth,
        upvote_share=up / (up + down) if up + down else 0.9,
        votes_per_comment=(up + down) / len(comments),
        peak_posts_per_hour=float(max(by_hour.values(), default=0)),
        texts=list(text_samples(events)),
    )


def submolt_shares(counts: Counter[str]) -> list[tuple[str, float]]:
    """The ``MAX_SUBMOLTS - 1`` most used submolts with their share of posts, renormalised."""
    top = counts.most_common(MAX_SUBMOLTS - 1)
    total = sum(n for _, n in top)
    return [(name, n / total) for name, n in top]


def daily_cycle(stamps: npt.NDArray[np.float64]) -> tuple[list[float], float]:
    """Activity per hour of the day (mean 1) and the trend's growth per day.

    Hourly counts are fitted by a Poisson model ``exp(a + g * hour + w[hour of day])`` (a few rounds of
    alternating updates); the cycle is ``exp(w)`` normalised to mean 1, the growth ``24 * g``."""
    h0 = math.floor(stamps.min() / 3600)
    idx = (np.floor(stamps / 3600) - h0).astype(np.int64)
    counts = np.bincount(idx).astype(float)
    hours = np.arange(len(counts), dtype=float)
    hod = ((h0 + np.arange(len(counts))) % 24).astype(np.int64)
    w = np.zeros(24)
    a, g = math.log(max(counts.mean(), 1e-9)), 0.0
    for _ in range(30):
        y = np.log(np.maximum(counts, 0.5)) - w[hod]
        weight = np.maximum(counts, 1.0)
        g, a = np.polyfit(hours, y, 1, w=np.sqrt(weight))
        base = np.exp(a + g * hours)
        for k in range(24):
            sel = hod == k
            if sel.any():
                w[k] = math.log(max(counts[sel].sum(), 0.5) / base[sel].sum())
    cycle = np.exp(w - w.mean())
    cycle = cycle / cycle.mean()
    return [round(float(x), 4) for x in cycle], float(24 * g)


def text_samples(events: list[Event]) -> list[TextSample]:
    """Titles, posts and comments with what each comment answers, for the text model."""
    texts: dict[str, str] = {}
    out: list[TextSample] = []
    for ev in events:
        if isinstance(ev, PostCreated):
            b = ev.body
            texts[b.post_id] = f"{b.title}\n{b.content[:MAX_TEXT_CHARS]}"
            out.append(TextSample("post", b.content[:MAX_TEXT_CHARS], b.title, b.submolt))
    for ev in events:
        if isinstance(ev, CommentCreated):
            c = ev.body
            content = c.content[:MAX_TEXT_CHARS]
            texts[c.comment_id] = content
            parent = texts.get(c.parent_id) if c.parent_id else texts.get(c.post_id)
            out.append(TextSample("comment", content, parent=parent))
    return out
