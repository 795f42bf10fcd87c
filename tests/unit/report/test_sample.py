"""The report's sample of agents (``report.sample``) for the semantic and individual sections.

A seeded society of 40 agents over four days is stored in a real chDB. Checked against computations made
here from the Python events and plain numpy: which agents a limit selects (hash order, running text
count), which texts are embedded, that the sampled path with every agent gives the view's numbers, that a
sample reads only its agents' texts, and that the bootstrap intervals are those of the normal theory
where it applies.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from stored_events import open_chdb, store_events

from molt_society.report import individual, social
from molt_society.report.embeddings import Encoder, ensure_embeddings, missing_count, vectors_for
from molt_society.report.model import Scalar
from molt_society.report.sample import AgentSample, agent_bootstrap, agent_sample
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.runtime.settings import get_settings
from molt_society.schemas.events import CommentCreated, Event, PostCreated
from molt_society.schemas.ids import uuid7

SOC = "sampled"
T0 = datetime(2026, 2, 1, 6, 0, tzinfo=UTC)
WORDS = ["memory", "tokens", "ocean", "moon", "python", "async", "race", "prices", "poetry", "context"]
AGENTS = [f"agent-{i}" for i in range(40)]
EVERY = 2**64 - 1


def _society() -> list[Event]:
    rng = random.Random(11)
    events: list[Event] = []
    texts: list[tuple[str, str, int, str]] = []  # (kind, id, depth, post id)
    for n in range(480):
        at = T0 + timedelta(days=n // 120, minutes=n % 120 * 7)
        actor = AGENTS[min(int(rng.paretovariate(1.2)) - 1, len(AGENTS) - 1)] if n % 3 else rng.choice(AGENTS)
        content = " ".join(rng.choice(WORDS) for _ in range(6))
        if rng.random() < 0.5 or not texts:
            pid = f"p{n}"
            events.append(
                PostCreated(
                    event_id=uuid7(at),
                    society=SOC,
                    actor=actor,
                    occurred_at=at,
                    body={"post_id": pid, "submolt": "general", "title": f"t{n % 9}", "content": content},
                )
            )
            texts.append(("post", pid, 0, pid))
        else:
            kind, tid, depth, pid = rng.choice(texts)
            events.append(
                CommentCreated(
                    event_id=uuid7(at),
                    society=SOC,
                    actor=actor,
                    occurred_at=at,
                    body={
                        "comment_id": f"c{n}",
                        "post_id": pid,
                        "parent_id": None if kind == "post" else tid,
                        "depth": depth + 1,
                        "content": content,
                    },
                )
            )
            texts.append(("comment", f"c{n}", depth + 1, pid))
    return events


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClientWarehouse, list[Event]]]:
    events = _society()
    client = open_chdb(str(tmp_path_factory.mktemp("sample") / "ch"))
    store_events(client, events)
    wh = ClientWarehouse(client)
    yield wh, events
    wh.close()


def _hashes(wh: ClientWarehouse) -> dict[str, int]:
    return {str(a): int(h) for a, h in wh.query("SELECT DISTINCT actor, cityHash64(actor) FROM texts").rows}


def _texts_by_agent(events: list[Event]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        if isinstance(e, PostCreated):
            out.setdefault(e.actor, []).append(f"{e.body.title}\n{e.body.content}".strip())
        elif isinstance(e, CommentCreated):
            out.setdefault(e.actor, []).append(e.body.content)
    return out


def test_a_limit_takes_agents_in_hash_order_until_their_texts_reach_it(
    stored: tuple[ClientWarehouse, list[Event]],
) -> None:
    wh, events = stored
    by_agent = _texts_by_agent(events)
    hashes = _hashes(wh)
    total = sum(len(t) for t in by_agent.values())
    assert agent_sample(wh, SOC, limit=total).cut is None  # within the limit: every agent
    assert agent_sample(wh, SOC, limit=0).cut is None  # 0: no sample
    for limit in (50, 200, 400):
        s = agent_sample(wh, SOC, limit=limit)
        chosen, running = [], 0
        for agent in sorted(by_agent, key=lambda a: hashes[a]):
            if running + len(by_agent[agent]) > limit and chosen:
                break
            chosen.append(agent)
            running += len(by_agent[agent])
        assert s.sampled
        assert s.cut == hashes[chosen[-1]]
        assert (s.agents, s.texts, s.texts_total, s.agents_total) == (
            len(chosen),
            running,
            total,
            len(by_agent),
        )
        got = {str(r[0]) for r in wh.query(f"SELECT DISTINCT actor FROM texts WHERE {s.where()}").rows}
        assert got == set(chosen)


def test_only_the_sampled_agents_texts_are_embedded(stored: tuple[ClientWarehouse, list[Event]]) -> None:
    wh, events = stored
    s = agent_sample(wh, SOC, limit=200)
    chosen = {a for a, h in _hashes(wh).items() if h <= (s.cut or EVERY)}
    expected = {t for a, ts in _texts_by_agent(events).items() if a in chosen for t in ts if t}
    enc = Encoder()
    assert missing_count(wh, SOC, s.where()) == len(expected)
    assert ensure_embeddings(wh, SOC, enc, agents=s.where())[0] == len(expected)
    assert missing_count(wh, SOC) == len({t for ts in _texts_by_agent(events).values() for t in ts}) - len(
        expected
    )
    ensure_embeddings(wh, SOC, enc)  # the rest, for the tests below


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _scalars(items: list[Any]) -> dict[str, Any]:
    return {i.key: i.value for i in items if isinstance(i, Scalar)}


def test_the_sampled_path_with_every_agent_gives_the_views_numbers(
    stored: tuple[ClientWarehouse, list[Event]],
) -> None:
    wh, _ = stored
    ensure_embeddings(wh, SOC, Encoder())
    every = AgentSample(EVERY, 40, 40, 480, 480, 480)
    whole = _scalars(social.semantic(wh, SOC))  # the view's path: the society is under the limit
    sampled = _scalars(social.semantic_of_sample(wh, SOC, every))
    for key in ("semantic.texts", "semantic.centroid_similarity", "semantic.mean_pairwise", "semantic.knn10"):
        assert sampled[key] == pytest.approx(whole[key], rel=1e-5, abs=1e-6), key
    # the intervals: agents drawn with replacement, each day's sum rebuilt text by text (a loop here)
    rows = wh.query(
        f"SELECT toString(toDate(occurred_at)), actor, text_hash FROM texts WHERE society = '{SOC}'"
    )
    vec = vectors_for(wh, "SELECT text_hash FROM texts")
    agents = sorted({str(r[1]) for r in rows.rows})
    days = sorted({str(r[0]) for r in rows.rows})
    rng = np.random.default_rng(1)
    loops: dict[str, list[float]] = {"semantic.centroid_similarity": [], "semantic.mean_pairwise": []}
    for _ in range(1000):
        mult = dict.fromkeys(agents, 0)
        for a in rng.choice(agents, size=len(agents)):
            mult[str(a)] += 1
        total = {d: np.zeros(384) for d in days}
        n = dict.fromkeys(days, 0)
        for d, a, h in rows.rows:
            total[str(d)] += mult[str(a)] * vec[int(h)]
            n[str(d)] += mult[str(a)]
        pair = [(total[d] @ total[d] - n[d]) / (n[d] * (n[d] - 1)) for d in days if n[d] >= 2]
        cent = [_cos(total[d], total[p]) for p, d in itertools.pairwise(days) if n[d] and n[p]]
        loops["semantic.mean_pairwise"].append(float(np.mean(pair)))
        loops["semantic.centroid_similarity"].append(float(np.mean(cent)))
    for key, values in loops.items():
        lo, hi = np.quantile(values, [0.025, 0.975])
        width = hi - lo
        assert sampled[f"{key}_ci_low"] == pytest.approx(lo, abs=0.25 * width), key
        assert sampled[f"{key}_ci_high"] == pytest.approx(hi, abs=0.25 * width), key
    # the individual layer's data: the same with the whole sample as without one
    a, b = individual.load(wh, SOC), individual.load(wh, SOC, every)
    assert {k: len(v) for k, v in a[0].items()} == {k: len(v) for k, v in b[0].items()}
    assert len(a[1]) == len(b[1])
    assert np.allclose(a[2], b[2])  # type: ignore[arg-type]


def test_a_sample_reads_its_agents_only(stored: tuple[ClientWarehouse, list[Event]]) -> None:
    wh, events = stored
    ensure_embeddings(wh, SOC, Encoder())
    s = agent_sample(wh, SOC, limit=200)
    chosen = {a for a, h in _hashes(wh).items() if h <= (s.cut or EVERY)}
    posts, comments, _ = individual.load(wh, SOC, s)
    assert set(posts) <= chosen
    assert {c[0] for c in comments} <= chosen
    n_posts = sum(1 for e in events if isinstance(e, PostCreated) and e.actor in chosen)
    assert sum(len(p) for p in posts.values()) == n_posts
    # comments counted only between two sampled agents (the text commented on is theirs too)
    author = {e.body.post_id: e.actor for e in events if isinstance(e, PostCreated)}
    author |= {e.body.comment_id: e.actor for e in events if isinstance(e, CommentCreated)}
    between = [
        e
        for e in events
        if isinstance(e, CommentCreated)
        and e.actor in chosen
        and author[e.body.parent_id or e.body.post_id] in chosen
        and author[e.body.parent_id or e.body.post_id] != e.actor
    ]
    assert len(comments) == len(between)
    got = _scalars(social.semantic_of_sample(wh, SOC, s))
    assert got["semantic.sample_agents"] == s.agents
    kept = sum(1 for ts in (_texts_by_agent(events)[a] for a in chosen) for t in ts if t)
    assert got["semantic.texts"] == kept


def test_the_bootstrap_interval_of_a_mean_matches_normal_theory() -> None:
    rng = np.random.default_rng(5)
    values = rng.normal(0.3, 1.0, size=800)
    lo, hi = agent_bootstrap([np.array([v]) for v in values], draws=4000)  # type: ignore[misc]
    half = 1.96 * values.std(ddof=1) / np.sqrt(len(values))
    assert lo == pytest.approx(values.mean() - half, abs=0.25 * half)
    assert hi == pytest.approx(values.mean() + half, abs=0.25 * half)
    # agents with several values: agents are drawn, not values (wider than the values' own interval)
    clustered = [np.full(20, rng.normal()) for _ in range(40)]
    c_lo, c_hi = agent_bootstrap(clustered)  # type: ignore[misc]
    pooled = np.concatenate(clustered)
    assert (c_hi - c_lo) > 3 * (2 * 1.96 * pooled.std() / np.sqrt(len(pooled)))
    assert agent_bootstrap([np.array([1.0])]) is None


def test_the_sections_sample_above_the_setting(
    stored: tuple[ClientWarehouse, list[Event]], monkeypatch: pytest.MonkeyPatch
) -> None:
    wh, _ = stored
    ensure_embeddings(wh, SOC, Encoder())
    monkeypatch.setenv("SOCIETY_REPORT_SAMPLE_TEXTS", "200")
    get_settings.cache_clear()
    try:
        s = agent_sample(wh, SOC)
        sem = _scalars(social.semantic(wh, SOC))
        ind = _scalars(individual.items(wh, SOC))
    finally:
        monkeypatch.delenv("SOCIETY_REPORT_SAMPLE_TEXTS")
        get_settings.cache_clear()
    assert s.sampled
    assert sem["semantic.sample_agents"] == ind["individual.sample_agents"] == s.agents
    assert sem["semantic.mean_pairwise_ci_low"] < sem["semantic.mean_pairwise_ci_high"]
    posts, _, _ = individual.load(wh, SOC, s)
    assert ind["individual.drift_agents"] == sum(1 for p in posts.values() if len(p) >= individual.MIN_POSTS)
    assert ind["individual.drift_ci_low"] <= ind["individual.drift"] <= ind["individual.drift_ci_high"]
