"""The fit's pieces: moments against an independent computation, the daily cycle, the fitted brain."""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import networkx as nx
import numpy as np
import pytest

from molt_society.agents.behaviour import Population, load_behaviour
from molt_society.agents.brain import TickContext
from molt_society.agents.fitted import tick_counts
from molt_society.agents.offline import simulate
from molt_society.agents.roster import build_roster
from molt_society.calibration.dump import daily_cycle
from molt_society.calibration.moments import BY_KEY, Moments, distance
from molt_society.calibration.observed import observe
from molt_society.schemas.events import CommentCreated, PostCreated

T0 = datetime(2026, 1, 28, tzinfo=UTC).timestamp()


def _society(
    seed: int = 3,
) -> tuple[list[tuple[str, str, float]], list[tuple[str, str, str | None, str, float]]]:
    """Random posts (id, author, t) and comments (id, post, parent, author, t) with skewed authors."""
    r = random.Random(seed)
    authors = [f"a{i}" for i in range(60)]
    weights = [1 / (i + 1) for i in range(60)]
    posts = [(f"p{i}", r.choices(authors, weights)[0], T0 + r.uniform(0, 3 * 86400)) for i in range(300)]
    comments: list[tuple[str, str, str | None, str, float]] = []
    for i in range(2500):
        pid, _a, pt = r.choice(posts[:150])
        mine = [c for c in comments[-200:] if c[1] == pid]
        parent = r.choice(mine)[0] if mine and r.random() < 0.2 else None
        comments.append((f"c{i}", pid, parent, r.choices(authors, weights)[0], pt + r.expovariate(1 / 900)))
    return posts, comments


def _moments(posts, comments) -> dict[str, float | None]:
    m = Moments()
    depth: dict[str, int] = {}
    for pid, a, t in posts:
        m.add_post(pid, a, t)
    for cid, pid, parent, a, t in comments:
        depth[cid] = depth[parent] + 1 if parent else 1
        m.add_comment(cid, pid, parent, a, t, depth[cid])
    return m.result()


def test_moments_equal_an_independent_computation() -> None:
    posts, comments = _society()
    got = _moments(posts, comments)
    author = {p[0]: p[1] for p in posts} | {c[0]: c[3] for c in comments}
    when = {p[0]: p[2] for p in posts}
    per_post: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for _cid, pid, _parent, a, t in comments:
        per_post[pid].append((a, t))
    assert got["top_level_share"] == pytest.approx(sum(c[2] is None for c in comments) / len(comments))
    assert got["comments_per_commented_post_median"] == statistics.median(len(v) for v in per_post.values())
    assert got["commenters_per_commented_post_mean"] == pytest.approx(
        statistics.fmean(len({a for a, _ in v}) for v in per_post.values())
    )
    counts = list(Counter(p[1] for p in posts).values())
    mad = sum(abs(x - y) for x in counts for y in counts) / (2 * len(counts) ** 2 * statistics.fmean(counts))
    assert got["posts_per_author_gini"] == pytest.approx(mad)
    by_author: dict[str, list[float]] = defaultdict(list)
    for _pid, a, t in posts:
        by_author[a].append(t)
    covs = []
    for ts in by_author.values():
        if len(ts) >= 3:
            gaps = [b - a for a, b in zip(sorted(ts), sorted(ts)[1:], strict=False)]
            covs.append(statistics.pstdev(gaps) / statistics.fmean(gaps))
    assert got["post_gap_cov_median"] == pytest.approx(statistics.median(covs))
    hours = Counter(
        datetime.fromtimestamp(t, UTC).hour for t in [p[2] for p in posts] + [c[4] for c in comments]
    )
    per_hour = [hours.get(h, 0) for h in range(24)]
    assert got["hourly_cv"] == pytest.approx(statistics.pstdev(per_hour) / statistics.fmean(per_hour))
    commenters = sorted(Counter(c[3] for c in comments).values(), reverse=True)
    top = commenters[: math.ceil(0.01 * len(commenters))]
    assert got["top1pct_comment_share"] == pytest.approx(sum(top) / len(comments))
    g = nx.DiGraph()
    for _cid, pid, parent, a, _t in comments:
        target = author[parent] if parent else author[pid]
        if target != a:
            g.add_edge(a, target)
    assert got["reciprocity"] == pytest.approx(nx.reciprocity(g))
    first = [min(t for _, t in v) - when[pid] for pid, v in per_post.items()]
    assert got["first_comment_median_s"] == pytest.approx(statistics.median(first))


def test_observe_reads_events_like_the_accumulator() -> None:
    b = load_behaviour()
    res = simulate(seed=2, agents=300, ticks=40, behaviour=b, start=datetime(2026, 1, 28, tzinfo=UTC))
    got = observe(res.events).result()
    posts = [
        (e.body.post_id, e.actor, e.occurred_at.timestamp()) for e in res.events if isinstance(e, PostCreated)
    ]
    comments = [
        (e.body.comment_id, e.body.post_id, e.body.parent_id, e.actor, e.occurred_at.timestamp())
        for e in res.events
        if isinstance(e, CommentCreated)
    ]
    want = _moments(posts, comments)
    for key in ("top_level_share", "posts_per_author_gini", "reciprocity", "first_comment_median_s"):
        assert got[key] == pytest.approx(want[key]), key


def test_distance_is_in_band_widths() -> None:
    assert distance("top_level_share", 0.96, 0.93) == pytest.approx(1.0)
    assert distance("first_comment_median_s", 33.0, 22.0) == pytest.approx(1.0)
    assert distance("reciprocity", None, 0.1) is None
    assert all(m.band.width > 0 for m in BY_KEY.values())


def test_daily_cycle_recovers_a_known_cycle_and_growth() -> None:
    rng = np.random.default_rng(5)
    hours = np.arange(96)
    cycle = 1 + 0.6 * np.sin(2 * np.pi * (hours % 24) / 24)
    counts = rng.poisson(200 * np.exp(0.04 * hours) * cycle)
    stamps = np.concatenate([T0 + 3600 * (h + rng.random(n)) for h, n in zip(hours, counts, strict=True)])
    got, growth = daily_cycle(stamps)
    want = cycle[:24] / cycle[:24].mean()
    assert growth == pytest.approx(24 * 0.04, rel=0.1)
    assert np.allclose(got, want, atol=0.08)


def _fitted(**changes: float) -> Population:
    values = {
        "agents": 400, "hours": 24.0, "start": "2026-01-28T00:00:00+00:00", "tick_seconds": 300.0,
        "post_per_hour": 0.05, "post_sigma": 0.5, "comment_per_hour": 0.3, "comment_sigma": 1.0,
        "vote_per_comment": 1.0, "heartbeat_share": 0.2, "heartbeat_hours": 3.0, "heartbeat_skip": 0.0,
        "initial_share": 0.3, "growth_per_day": 1.0, "hourly": [1.0] * 24, "new_share": 0.5,
        "post_lead_seconds": 5.0, "first_delay_seconds": 5.0,
    } | changes  # fmt: skip
    return Population.model_validate(values)


def test_agents_act_only_after_they_arrive_and_heartbeats_keep_time() -> None:
    b = load_behaviour().model_copy(update={"population": _fitted()})
    roster = build_roster(1, 400, 1, b)
    cols = roster.fitted
    assert cols is not None
    everyone = roster.everyone()
    start = datetime(2026, 1, 28, tzinfo=UTC)
    posts_by_tick = []
    for t in range(1, 289):
        ctx = TickContext(
            "x", t, start + timedelta(seconds=300 * t), 300.0, np.random.default_rng([1, t]), ()
        )
        posts, comments, votes = tick_counts(everyone, b, ctx)
        absent = cols.join_s >= 300 * (t + 1)
        assert not (posts[absent].any())
        assert not (comments[absent].any())
        assert not (votes[absent].any())
        posts_by_tick.append(posts)
    beats = np.flatnonzero((cols.beat_s > 0) & (cols.join_s == 0))
    assert len(beats) > 10
    made = np.array(posts_by_tick)[:, beats].sum(axis=0)
    expected = np.floor((300 * 289 - cols.phase_s[beats]) / cols.beat_s[beats]) - np.floor(
        (300 - cols.phase_s[beats]) / cols.beat_s[beats]
    )
    assert np.array_equal(made, expected)  # heartbeat_skip 0: every beat is a post, nothing else is


def test_fitted_society_is_deterministic_and_places_events_inside_their_tick() -> None:
    b = load_behaviour().model_copy(update={"population": _fitted(initial_share=1.0)})
    start = datetime(2026, 1, 28, tzinfo=UTC)
    one = simulate(seed=4, agents=400, ticks=60, behaviour=b, tick_seconds=300.0, start=start)
    two = simulate(seed=4, agents=400, ticks=60, behaviour=b, tick_seconds=300.0, start=start)
    assert [e.event_id for e in one.events] == [e.event_id for e in two.events]
    posts = [e for e in one.events if isinstance(e, PostCreated)]
    comments = [e for e in one.events if isinstance(e, CommentCreated)]
    assert posts
    assert comments
    leads = [300 - ((e.occurred_at - start).total_seconds() % 300) for e in posts]
    assert statistics.median(leads) < 30  # placed Exp(5 s) before their tick's end
    when = {p.body.post_id: p.occurred_at for p in posts}
    assert all(c.occurred_at > when[c.body.post_id] for c in comments)


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_replies_of_a_fitted_society_are_authors_answering_their_commenters(share: float) -> None:
    b = load_behaviour().model_copy(
        update={
            "population": _fitted(initial_share=1.0, return_share=share, comment_per_hour=1.0),
            "targets": load_behaviour().targets.model_copy(update={"reply_prob": 0.0}),
        }
    )
    res = simulate(seed=6, agents=300, ticks=60, behaviour=b, tick_seconds=300.0,
                   start=datetime(2026, 1, 28, tzinfo=UTC))  # fmt: skip
    author = {e.body.post_id: e.actor for e in res.events if isinstance(e, PostCreated)}
    comments = [e for e in res.events if isinstance(e, CommentCreated)]
    by_id = {c.body.comment_id: c for c in comments}
    replies = [c for c in comments if c.body.parent_id is not None]
    if share == 0.0:
        assert replies == []
        return
    assert len(replies) > 20
    for r in replies:
        parent = by_id[r.body.parent_id]  # type: ignore[index]
        assert r.actor == author[r.body.post_id]
        assert parent.actor != r.actor
        assert parent.body.post_id == r.body.post_id
        assert r.occurred_at > parent.occurred_at


def test_a_fitted_file_round_trips_and_gives_the_run_its_population_and_period(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from molt_society.calibration.fitted_file import read_record, write_fitted
    from molt_society.society.cli import _fitted_defaults

    b = load_behaviour().model_copy(update={"population": _fitted(feed_size=40)})
    path = tmp_path / "f.toml"
    record = {"dump": "/data/x", "moments": [{"key": "reciprocity", "real": 0.16, "simulated": 0.15}]}
    write_fitted(path, b, record, None)
    again = load_behaviour(path)
    assert again.population == b.population
    assert again.targets == b.targets
    assert read_record(again) == record["moments"]
    got = _fitted_defaults(path, ticks_given=False)
    assert got["hours"] == 24.0
    assert got["settings"] == {
        "behaviour_file": path.resolve(),
        "agents": 400,
        "tick_seconds": 300.0,
        "sim_start": "2026-01-28T00:00:00+00:00",
    }
    assert got["population"] == b.population
    assert "hours" not in _fitted_defaults(path, ticks_given=True)


def test_the_fitted_feed_spans_the_same_time_at_any_population_and_tick() -> None:
    """40 posts per list at 400 agents and 300 s ticks: a tick brings twice the posts at 800 agents, half
    at 150 s ticks, ten times at 4,000 agents with ticks as long; the cap is the settings' own bound."""
    from molt_society.runtime.settings import FEED_SIZE_MAX

    pop = _fitted(feed_size=40)
    assert pop.feed_size_for(400, 300.0) == 40
    assert pop.feed_size_for(800, 300.0) == 80
    assert pop.feed_size_for(400, 150.0) == 20
    assert pop.feed_size_for(4000, 300.0) == 400
    assert pop.feed_size_for(40_000, 300.0) == FEED_SIZE_MAX
    assert pop.feed_size_for(1, 1.0) == 1
    assert _fitted().feed_size_for(800, 300.0) is None


def test_fitted_rates_and_arrivals_follow_their_distributions_quantile_by_quantile() -> None:
    """The population is drawn by randomised quasi-Monte Carlo: its empirical distributions lie within
    about 1/n of the model's, far closer than independent draws (~0.9/sqrt(n)), the comment and post
    rates keep their correlation, and the seed still changes who is who."""
    from scipy.stats import kstest, norm

    from molt_society.agents.roster import fitted_columns

    n = 4096
    pop = _fitted(agents=n, comment_sigma=2.0, post_sigma=0.8, rate_correlation=0.5, initial_share=0.1)
    b = load_behaviour().model_copy(update={"population": pop})
    cols = fitted_columns(7, n, b)
    z_comment = (np.log(cols.comment_rate / pop.comment_per_hour) + 2.0**2 / 2) / 2.0
    assert kstest(z_comment, norm.cdf).statistic < 3 / n
    z_post = (np.log(cols.post_rate / pop.post_per_hour) + 0.8**2 / 2) / 0.8
    assert abs(float(np.corrcoef(z_comment, z_post)[0, 1]) - 0.5) < 0.05
    assert abs(float((cols.join_s == 0).mean()) - 0.1) < 3 / n
    later = cols.join_s[cols.join_s > 0]
    g, period = 1.0 / 86400, 24 * 3600.0
    model_cdf = np.expm1(g * later) / np.expm1(g * period)  # the density grows as exp(g t)
    assert kstest(model_cdf, "uniform").statistic < 4 / n
    other = fitted_columns(8, n, b)
    assert not np.array_equal(cols.comment_rate, other.comment_rate)
    assert float(cols.comment_rate.max()) < pop.comment_per_hour * np.exp(2.0 * norm.ppf(1 - 0.5 / n))
