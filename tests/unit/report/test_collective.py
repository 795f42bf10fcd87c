"""The socialization study's "the daily top-1 PageRank share drops rapidly", judged against its null
(``report.collective.null_trend_items``) on two constructed societies stored in a real chDB: one whose
share falls only because each day's graph is larger (the null falls as much: not distinguishable), and
one of constant size whose attention really disperses from a hub (the null does not fall)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from scipy.stats import kendalltau
from stored_events import open_chdb, store_events

from molt_society.algorithms.pagerank import pagerank, top_k_share
from molt_society.report import collective
from molt_society.report.comparisons import compare
from molt_society.report.model import Scalar
from molt_society.report.verdicts import NOT_DISTINGUISHABLE
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.schemas.events import CommentCreated, Event, PostCreated
from molt_society.schemas.ids import uuid7

T0 = datetime(2026, 2, 1, tzinfo=UTC)
GROWS, DISPERSES = "grows", "disperses"


def _society(name: str, days: int, plan: Any) -> list[Event]:
    """Each day, every agent of ``plan(day)`` comments once on the post of the agent it names."""
    rng = random.Random(name)
    events: list[Event] = []
    for day in range(days):
        at = T0 + timedelta(days=day, hours=1)
        pairs = plan(day, rng)
        targets = sorted({dst for _, dst in pairs})
        post_of = {}
        for i, agent in enumerate(targets):
            pid = f"{name}-d{day}-p{i}"
            post_of[agent] = pid
            body = {"post_id": pid, "submolt": "general", "title": "t", "content": "c"}
            events.append(
                PostCreated(event_id=uuid7(at), society=name, actor=agent, occurred_at=at, body=body)
            )
        for j, (src, dst) in enumerate(pairs):
            when = at + timedelta(minutes=1 + j % 600)
            body = {"comment_id": f"{name}-d{day}-c{j}", "post_id": post_of[dst], "depth": 1, "content": "x"}
            events.append(
                CommentCreated(event_id=uuid7(when), society=name, actor=src, occurred_at=when, body=body)
            )
    return events


def _grows(day: int, rng: random.Random) -> list[tuple[str, str]]:
    agents = [f"g{i}" for i in range(10 * 2**day)]  # a random graph that doubles every day
    return [(a, rng.choice([b for b in agents if b != a])) for a in agents]


def _disperses(day: int, rng: random.Random) -> list[tuple[str, str]]:
    agents = [f"a{i}" for i in range(120)]
    to_hub = 0.85 - 0.1 * day  # 85% of the day's comments answer the hub on day 0, 15% on day 7
    return [(a, "a0" if rng.random() < to_hub else rng.choice(agents[1:])) for a in agents[1:]]


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientWarehouse]:
    client = open_chdb(str(tmp_path_factory.mktemp("influence") / "ch"))
    store_events(client, _society(GROWS, 6, _grows) + _society(DISPERSES, 8, _disperses))
    yield ClientWarehouse(client)
    client.close()


def _comparison(wh: ClientWarehouse, society: str) -> Any:
    scalars = {i.key: i for i in collective.items(wh, society) if isinstance(i, Scalar)}
    (c,) = [c for c in compare(scalars) if c.key == "collective.top1_share_trend"]
    return c, scalars


def test_a_share_that_falls_with_growth_is_not_distinguishable_from_the_null(wh: ClientWarehouse) -> None:
    c, s = _comparison(wh, GROWS)
    assert s["collective.top1_share_trend"].value < -0.5  # it falls
    assert c.verdict == "reproduced"
    assert c.null is not None
    assert c.null.value < -0.5  # the null falls with the growth too
    assert c.null_flag == NOT_DISTINGUISHABLE


def test_attention_that_really_disperses_is_more_than_the_null(wh: ClientWarehouse) -> None:
    c, s = _comparison(wh, DISPERSES)
    assert s["collective.top1_share_trend"].value < -0.9
    assert c.verdict == "reproduced"
    assert c.null is not None
    assert c.null.ci is not None
    assert c.null.ci[0] > -0.9  # constant size: the null's top share does not fall like that
    assert c.null_flag is None


def test_the_null_is_seeded(wh: ClientWarehouse) -> None:
    a = collective.null_trend_items(wh, DISPERSES, shuffles=5, seed=3)
    b = collective.null_trend_items(wh, DISPERSES, shuffles=5, seed=3)
    assert [i.value for i in a if isinstance(i, Scalar)] == [i.value for i in b if isinstance(i, Scalar)]


def _named_null(wh: ClientWarehouse, society: str, shuffles: int, seed: int) -> list[float]:
    """The null's Kendall taus computed on agents' names with ``algorithms.pagerank`` (the reading
    ``null_trend_items`` runs on integer ids): the same draws, pools sorted by name."""
    rows = wh.query(
        f"SELECT intDiv(toUnixTimestamp64Micro(occurred_at), {collective.DAY_US}) AS d, src, dst "
        f"FROM interaction_edges WHERE society = '{society}' ORDER BY d, occurred_at, src, dst"
    ).rows
    days: dict[int, list[str]] = {}
    agents: dict[int, set[str]] = {}
    for d, src, dst in rows:
        days.setdefault(int(d), []).append(str(src))
        agents.setdefault(int(d), set()).update({str(src), str(dst)})
    order = sorted(days)
    rng = np.random.default_rng(seed)
    taus = []
    for _ in range(shuffles):
        shares = []
        for d in order:
            pool = sorted(agents[d])
            targets = rng.integers(0, len(pool), len(days[d]))
            pr = pagerank([(s, pool[t], 1.0) for s, t in zip(days[d], targets, strict=True)])
            shares.append(top_k_share(pr, 1) if pr else 0.0)
        if len(set(shares)) > 1:
            taus.append(float(kendalltau(order, shares)[0]))
    return taus


@pytest.mark.parametrize("society", [GROWS, DISPERSES])
def test_the_null_on_ids_equals_the_null_on_names(wh: ClientWarehouse, society: str) -> None:
    taus = _named_null(wh, society, shuffles=12, seed=5)
    got = {
        i.key: i.value
        for i in collective.null_trend_items(wh, society, shuffles=12, seed=5)
        if isinstance(i, Scalar)
    }
    assert got[collective.NULL_KEY] == float(np.median(taus))
    assert got[f"{collective.NULL_KEY}_ci_low"] == float(np.percentile(taus, 2.5))
    assert got[f"{collective.NULL_KEY}_ci_high"] == float(np.percentile(taus, 97.5))
