"""Simulations the fit evaluates: the activity process alone (fast), and the whole society offline.

``activity_moments`` draws only who posts and comments when (``agents.fitted.tick_counts``, the brain's
own draw, over every agent as one cohort): it needs no feed, so it costs a fraction of a second, and the
moments of posting, commenting volume, rhythm, growth and the daily cycle depend on nothing else.
``society_moments`` runs the whole society in one process (``agents.offline.simulate``: the same brain,
partition state and feeds as the brokered run) and measures every moment.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from molt_society.agents.behaviour import Behaviour
from molt_society.agents.brain import TickContext
from molt_society.agents.fitted import tick_counts
from molt_society.agents.offline import simulate
from molt_society.agents.roster import build_roster
from molt_society.calibration.moments import Moments
from molt_society.calibration.observed import observe
from molt_society.schemas.events import Event

Figures = dict[str, float | None]


def ticks_of(behaviour: Behaviour) -> int:
    """Ticks covering the fitted period (tick 0 is genesis)."""
    pop = behaviour.population
    assert pop is not None
    return round(pop.hours * 3600 / pop.tick_seconds) + 1


def activity_moments(behaviour: Behaviour, *, seed: int, agents: int) -> tuple[Figures, dict[str, int]]:
    """Posting and commenting moments of the activity process, and its totals (posts, comments, agents)."""
    pop = behaviour.population
    assert pop is not None
    roster = build_roster(seed, agents, 1, behaviour)
    everyone = roster.everyone()
    start = datetime.fromisoformat(pop.start)
    sec = pop.tick_seconds
    m = Moments()
    active: set[int] = set()
    n_posts = n_comments = 0
    for t in range(1, ticks_of(behaviour)):
        ctx = TickContext(
            "fit", t, start + timedelta(seconds=t * sec), sec, np.random.default_rng([seed, t]), ()
        )
        posts, comments, _votes = tick_counts(everyone, behaviour, ctx)
        t0 = ctx.start.timestamp()
        u = ctx.rng.random(int(comments.sum()) + 1)
        j = 0
        for k in np.flatnonzero(posts).tolist():
            active.add(k)
            for i in range(int(posts[k])):
                n_posts += 1
                m.add_post(f"{t}.{k}.{i}", str(k), t0 + sec - min(pop.post_lead_seconds, sec / 2))
        for k in np.flatnonzero(comments).tolist():
            active.add(k)
            for _ in range(int(comments[k])):
                n_comments += 1
                m.add_comment("", "", None, str(k), t0 + float(u[j]) * sec, 1)
                j += 1
    return m.result(), {"posts": n_posts, "comments": n_comments, "agents": len(active)}


def society_moments(
    behaviour: Behaviour, *, seed: int, agents: int, feed_size: int | None = None
) -> tuple[Figures, dict[str, int]]:
    """Every moment of the whole society run offline, and its totals."""
    pop = behaviour.population
    assert pop is not None
    m = Moments()

    def add(ev: Event) -> None:
        observe((ev,), m)

    simulate(
        seed=seed,
        agents=agents,
        ticks=ticks_of(behaviour),
        behaviour=behaviour,
        tick_seconds=pop.tick_seconds,
        start=datetime.fromisoformat(pop.start),
        society="fit",
        feed_size=feed_size or pop.feed_size_for(agents, pop.tick_seconds) or 15,
        sink=add,  # measured as they come: none is kept
    )
    totals = {
        "posts": len(m.post_author),
        "comments": len(m.comments),
        "agents": len(set(m.post_author.values()) | {c[2] for c in m.comments}),
    }
    return m.result(), totals
