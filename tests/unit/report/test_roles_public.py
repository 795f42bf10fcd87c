"""The public code's full feature set (report.roles_public) against a literal port of its feature code.

A small society stored in a real chDB: agents post in several submolts and comment at irregular times,
with titles, bodies and comments carrying technical words and sentiment. The expected columns come from
the public code's own functions (``features.FeatureExtractor._compute_*_from_data``) ported line for line
below over the Python events (datetimes, ``str.split``, VADER on every text); each agent has fewer than
``SENTIMENT_TEXTS`` texts, short, so the sampled sentiment must equal the full one. ``reduced`` is checked
against scikit-learn's ``StandardScaler`` and ``PCA`` as ``RoleAnalyzer`` applies them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler
from stored_events import open_chdb, store_events
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from molt_society.report import roles, roles_public
from molt_society.report.model import Scalar
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.schemas.events import (
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
)
from molt_society.schemas.ids import uuid7

SOC = "rolespub"
T0 = datetime(2026, 3, 1, 5, 30, tzinfo=UTC)
TEXTS = [
    "I love this python function, great work!",
    "The server returned an error and the database query failed. Terrible.",
    "Nice idea",
    "debug the api endpoint with a unit test",
    "",
    "What a wonderful day for memory and cpu talk",
    "meh",
]


def _society() -> list[Event]:
    rng = np.random.default_rng(4)
    events: list[Event] = []
    posts: list[str] = []
    for i in range(40):
        actor = f"a{i % 9}"
        t = T0 + timedelta(minutes=float(rng.exponential(300)) + 600 * i)
        if i % 3 == 0 or not posts:
            pid = f"p{i}"
            posts.append(pid)
            body = PostCreatedBody(
                post_id=pid,
                submolt=("general", "code", "poetry")[int(rng.integers(3))],
                title=TEXTS[i % len(TEXTS)][:20],
                content=TEXTS[(i + 3) % len(TEXTS)],
            )
            events.append(PostCreated(event_id=uuid7(t), society=SOC, actor=actor, occurred_at=t, body=body))
        else:
            cb = CommentCreatedBody(
                comment_id=f"c{i}",
                post_id=posts[int(rng.integers(len(posts)))],
                depth=1,
                content=TEXTS[i % 7],
            )
            events.append(CommentCreated(event_id=uuid7(t), society=SOC, actor=actor, occurred_at=t, body=cb))
    return events


# --- the public code's feature functions, ported line for line (features.py) ------------------------------


def _activity(posts: list[Any], comments: list[Any]) -> dict[str, float]:
    total_posts, total_comments = len(posts), len(comments)
    if total_comments > 0:
        ratio = total_posts / total_comments
    else:
        ratio = float(total_posts) if total_posts > 0 else 0.0
    ts = [e.occurred_at for e in posts] + [e.occurred_at for e in comments]
    life = (max(ts) - min(ts)).total_seconds() / 86400 if len(ts) >= 2 else 0.0
    per_day = total_posts / life if life > 0 else float(total_posts)
    return {
        "total_posts": total_posts,
        "total_comments": total_comments,
        "post_comment_ratio": ratio,
        "active_lifespan_days": life,
        "posts_per_day": per_day,
    }


def _topics(posts: list[Any]) -> tuple[float, float]:
    if not posts:
        return 0.0, 0.0
    counts = Counter(p.body.submolt for p in posts if p.body.submolt)
    if not counts:
        return 0.0, 0.0
    total = sum(counts.values())
    entropy = 0.0
    for c in counts.values():
        p = c / total
        if p > 0:
            entropy -= p * math.log2(p)
    top = math.log2(len(counts)) if len(counts) > 1 else 1.0
    return entropy, entropy / top if top > 0 else 0.0


def _temporal(posts: list[Any], comments: list[Any]) -> dict[str, Any]:
    ts = [e.occurred_at for e in posts] + [e.occurred_at for e in comments]
    hours = np.zeros(24)
    for t in ts:
        hours[t.hour] += 1
    dist = hours / hours.sum()
    auto = 0.0
    s = sorted(ts)
    inter = [(s[i + 1] - s[i]).total_seconds() for i in range(len(s) - 1)]
    if len(ts) >= 3 and len(inter) >= 2 and np.std(inter) > 0:
        auto = float(np.corrcoef(inter[:-1], inter[1:])[0, 1])
        auto = 0.0 if np.isnan(auto) else auto
    burst = 0.0
    if len(ts) >= 2 and np.mean(inter) > 0:
        burst = float(np.std(inter) / np.mean(inter))
    return {"hours": dist, "autocorrelation": auto, "burst_coefficient": burst}


def _content(posts: list[Any], comments: list[Any], vader: SentimentIntensityAnalyzer) -> dict[str, float]:
    texts = []
    for p in posts:
        if p.body.content:
            texts.append(p.body.content)
        if p.body.title:
            texts.append(p.body.title)
    texts += [c.body.content for c in comments if c.body.content]
    if not texts:
        return dict.fromkeys(roles_public.CONTENT, 0.0)
    words = " ".join(texts).lower().split()
    return {
        "avg_post_length": float(np.mean([len(t) for t in texts])),
        "vocabulary_diversity": len(set(words)) / len(words) if words else 0.0,
        "avg_sentiment": float(np.mean([vader.polarity_scores(t)["compound"] for t in texts])),
        "technical_density": (
            sum(1 for w in words if w in set(roles_public.TECHNICAL_KEYWORDS)) / len(words) if words else 0.0
        ),
    }


def _expected(events: list[Event], agents: list[str]) -> np.ndarray:
    vader = SentimentIntensityAnalyzer()
    rows = []
    for a in agents:
        posts = [e for e in events if isinstance(e, PostCreated) and e.actor == a]
        comments = [e for e in events if isinstance(e, CommentCreated) and e.actor == a]
        act, (h, hn), tmp = _activity(posts, comments), _topics(posts), _temporal(posts, comments)
        con = _content(posts, comments, vader)
        row = [act[c] for c in roles_public.ACTIVITY] + [h, hn] + [0.0] * 5
        row += [tmp["autocorrelation"], tmp["burst_coefficient"]] + [con[c] for c in roles_public.CONTENT]
        rows.append(row + list(tmp["hours"]))
    return np.asarray(rows, dtype=np.float64)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClientWarehouse, list[Event]]]:
    client = open_chdb(str(tmp_path_factory.mktemp("rolespub") / "ch"))
    events = _society()
    store_events(client, events)
    yield ClientWarehouse(client), events
    client.close()


def test_every_column_equals_the_public_codes(stored: tuple[ClientWarehouse, list[Event]]) -> None:
    wh, events = stored
    agents = sorted({e.actor for e in events})
    got = roles_public.features(wh, SOC, agents, np.zeros((len(agents), 5)))
    assert got.columns == roles_public.COLUMNS
    assert len(got.columns) == 42
    want = _expected(events, agents)
    for j, name in enumerate(got.columns):
        np.testing.assert_allclose(got.matrix[:, j], want[:, j], rtol=1e-9, atol=1e-12, err_msg=name)
    assert np.ptp(got.matrix[:, got.columns.index("avg_sentiment")]) > 0.1  # the texts differ in sentiment


def test_synthetic_text_leaves_the_content_columns_out(stored: tuple[ClientWarehouse, list[Event]]) -> None:
    wh, events = stored
    agents = sorted({e.actor for e in events})
    got = roles_public.features(wh, SOC, agents, np.zeros((len(agents), 5)), with_content=False)
    assert set(got.columns) == set(roles_public.COLUMNS) - set(roles_public.CONTENT)
    assert got.matrix.shape == (len(agents), 38)


def test_reduction_is_the_role_analyzers() -> None:
    rng = np.random.default_rng(2)
    m = rng.normal(size=(60, 42)) * rng.uniform(0.1, 5, 42)
    m[:, 7] = 3.0  # a constant column is dropped
    b = roles_public.Behaviour([f"a{i}" for i in range(60)], m, roles_public.COLUMNS)
    z, kept = roles_public.reduced(b)
    assert len(kept) == 41
    assert roles_public.COLUMNS[7] not in kept
    keep = [j for j in range(42) if j != 7]
    want = PCA(n_components=10, random_state=42).fit_transform(StandardScaler().fit_transform(m[:, keep]))
    np.testing.assert_allclose(np.abs(z), np.abs(want), rtol=1e-7, atol=1e-9)  # a component's sign is free


def test_the_roles_section_shows_the_public_code_variant(stored: tuple[ClientWarehouse, list[Event]]) -> None:
    wh, events = stored
    study = roles.study_population(
        roles.agent_features(roles.interaction_graph(wh, SOC)), roles.active_agents(wh, SOC)
    )
    want = _expected(events, study.agents)
    want[:, 7:12] = study.matrix
    varying = int((want.var(axis=0, ddof=1) > 1e-10).sum())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(roles, "KMEANS_N_INIT", 5)
        items = {i.key: i for i in roles.items(wh, SOC) if isinstance(i, Scalar)}
    k = items["roles.variant_public_code.k"]
    assert k.value is not None
    assert roles.K_RANGE[0] <= int(k.value) < roles.K_RANGE[-1] + 1
    assert k.label.startswith("variant: the public code's full feature set")
    assert 0 < float(items["roles.variant_public_code.peripheral_share"].value or 0) <= 1
    assert items["roles.variant_public_code.columns"].value == varying  # hours nobody wrote in are constant
    assert varying < 42


def test_above_the_fit_sample_the_variant_reads_the_first_agents_by_hash(
    stored: tuple[ClientWarehouse, list[Event]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With FIT_SAMPLE = 3 the variant's population is the 3 active agents first by cityHash64 of the id,
    and their columns read through the hash cut equal their rows of the whole population's columns."""
    wh, events = stored
    agents = sorted({e.actor for e in events})
    monkeypatch.setattr(roles, "FIT_SAMPLE", 3)
    study = roles.AgentFeatures(agents, np.arange(len(agents) * 5, dtype=np.float64).reshape(-1, 5), 0)
    population, cut = roles._public_population(wh, SOC, study)
    hashes = {a: int(wh.query(f"SELECT cityHash64('{a}')").rows[0][0]) for a in agents}  # the test's names
    want = sorted(agents, key=lambda a: (hashes[a], a))[:3]
    assert population.agents == sorted(want)
    assert cut == max(hashes[a] for a in want)
    rows = [agents.index(a) for a in population.agents]
    np.testing.assert_array_equal(population.matrix, study.matrix[rows])
    got = roles_public.features(wh, SOC, population.agents, population.matrix, hash_cut=cut)
    whole = roles_public.features(wh, SOC, agents, study.matrix)
    np.testing.assert_allclose(got.matrix, whole.matrix[rows], rtol=1e-12)
    small = roles.AgentFeatures(agents[:3], study.matrix[:3], 0)
    same, no_cut = roles._public_population(wh, SOC, small)
    assert same is small
    assert no_cut is None
