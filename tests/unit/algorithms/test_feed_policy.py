"""Feed policies: each against a direct ranking of the same posts written here, plus the random policy's laws.

Expected orders come from plain ``sorted`` calls with their own keys or brute-force loops, never from the
policy code; ``personalised`` runs the real all-MiniLM-L6-v2 model on a handful of short texts.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from molt_society.algorithms.feed_policy import (
    POLICIES,
    FeedPolicy,
    PersonalisedPolicy,
    Viewer,
    embed_posts,
    embed_texts,
    policy,
    profile_vector,
)
from molt_society.algorithms.feeds import hot_score, rank_hot, rank_new
from molt_society.schemas.control import FeedItem

T0 = 1_769_558_400_000_000  # 2026-01-28 in Unix microseconds
HOUR = 3_600_000_000
NAMES = ["hot", "new", "top", "random", "following", "personalised"]


def item(pid: str, author: str = "a0", score: int = 0, created_us: int = T0, title: str = "") -> FeedItem:
    return {
        "post_id": pid,
        "author": author,
        "submolt": "general",
        "title": title or f"post {pid}",
        "created_us": created_us,
        "score": score,
        "comments": 0,
        "hot": hot_score(score, created_us),
        "recent": [],
    }


def random_posts(seed: int, count: int, ties: bool = True) -> list[FeedItem]:
    """Posts with random authors, scores and times; ``ties`` draws from small ranges so keys collide."""
    rng = random.Random(seed)
    posts = []
    for k in range(count):
        created = T0 + (rng.randrange(5) * HOUR if ties else rng.randrange(72 * HOUR))
        score = rng.choice([-3, 0, 0, 1, 5, 10]) if ties else rng.randint(-50, 5000)
        posts.append(item(f"p{rng.randrange(10**6):06d}-{k}", f"a{rng.randrange(8)}", score, created))
    rng.shuffle(posts)
    return posts


def ids(items: list[FeedItem]) -> list[str]:
    return [i["post_id"] for i in items]


def viewer(agent: str = "a1", tick: int = 7, seed: int = 42, follows: frozenset[str] = frozenset()) -> Viewer:
    return Viewer(agent=agent, tick=tick, seed=seed, follows=follows)


def make(name: str) -> FeedPolicy:
    return policy(name, embeddings={}) if name == "personalised" else policy(name)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [True, False])
def test_hot_and_new_equal_the_feeds_module_and_a_direct_sort(seed: int, ties: bool) -> None:
    posts = random_posts(seed, 120, ties)
    for n in (0, 1, 10, 50, 200):
        hot = policy("hot").rank(posts, n, viewer())
        new = policy("new").rank(posts, n, viewer())
        assert hot == rank_hot(posts, n)
        assert new == rank_new(posts, n)
        # two stable passes (reverse=True keeps equal keys in their order): by id, then by hot descending
        by_hot = sorted(sorted(posts, key=lambda i: i["post_id"]), key=lambda i: i["hot"], reverse=True)
        assert ids(hot) == ids(by_hot[:n])
        newest = sorted(
            sorted(posts, key=lambda i: i["post_id"]), key=lambda i: i["created_us"], reverse=True
        )
        assert ids(new) == ids(newest[:n])


@pytest.mark.parametrize("seed", range(6))
def test_top_by_score_then_newer_then_post_id(seed: int) -> None:
    posts = random_posts(seed, 80, ties=True)
    got = policy("top").rank(posts, 30, viewer())
    # brute force: repeatedly take the best remaining post by the three keys, compared one after another
    remaining = list(posts)
    expected: list[FeedItem] = []
    while remaining and len(expected) < 30:
        best = remaining[0]
        for p in remaining[1:]:
            if p["score"] != best["score"]:
                better = p["score"] > best["score"]
            elif p["created_us"] != best["created_us"]:
                better = p["created_us"] > best["created_us"]
            else:
                better = p["post_id"] < best["post_id"]
            if better:
                best = p
        expected.append(best)
        remaining.remove(best)
    assert ids(got) == ids(expected)
    assert got[0]["score"] == max(p["score"] for p in posts)


def test_random_is_reproducible_and_changes_with_each_input() -> None:
    posts = random_posts(1, 50)
    rnd = policy("random")
    first = rnd.rank(posts, 50, viewer())
    assert ids(first) == ids(policy("random").rank(posts, 50, viewer())), "same inputs, same order"
    assert ids(first) == ids(rnd.rank(list(reversed(posts)), 50, viewer())), "candidate order does not matter"
    assert sorted(ids(first)) == sorted(ids(posts)), "every candidate exactly once"
    assert len(set(ids(first))) == 50
    for other in (viewer(tick=8), viewer(agent="a2"), viewer(seed=43)):
        assert ids(rnd.rank(posts, 50, other)) != ids(first)
    assert ids(rnd.rank(posts, 10, viewer())) == ids(first[:10]), "n truncates the same order"
    assert ids(first) != ids(sorted(posts, key=lambda i: i["post_id"]))


def test_random_first_place_is_uniform() -> None:
    posts = [item(f"p{k:02d}", created_us=T0 + k) for k in range(10)]
    rnd = policy("random")
    draws = 3000
    firsts = Counter(rnd.rank(posts, 1, viewer(seed=s, tick=s % 17))[0]["post_id"] for s in range(draws))
    observed = [firsts[p["post_id"]] for p in posts]
    assert sum(observed) == draws
    result = stats.chisquare(observed)  # against the uniform 300 each
    assert result.pvalue > 1e-3, observed
    # and the whole permutation is not biased towards the post-id order: position of p00 is uniform too
    positions = Counter(ids(rnd.rank(posts, 10, viewer(seed=s))).index("p00") for s in range(draws))
    assert stats.chisquare([positions[k] for k in range(10)]).pvalue > 1e-3


def test_following_keeps_followed_authors_newest_first() -> None:
    posts = random_posts(3, 100, ties=True)
    follows = frozenset({"a1", "a4", "a6"})
    got = policy("following").rank(posts, 20, viewer(follows=follows))
    expected = []
    for p in sorted(posts, key=lambda i: (-i["created_us"], i["post_id"])):
        if p["author"] in follows:
            expected.append(p)
    assert ids(got) == ids(expected[:20])
    assert all(p["author"] in follows for p in got)
    assert len(got) == 20
    assert policy("following").rank(posts, 20, viewer()) == [], "follows no one: empty feed"
    assert policy("following").rank(posts, 20, viewer(follows=frozenset({"nobody"}))) == []


@pytest.mark.parametrize("name", NAMES)
def test_truncation_and_empty_candidates(name: str) -> None:
    posts = random_posts(5, 40)
    follows = frozenset(p["author"] for p in posts)
    who = Viewer("a1", 3, 9, follows, profile_vector(np.ones((1, 4), dtype=np.float32)))
    pol = (
        policy(name, embeddings={p["post_id"]: _unit(k) for k, p in enumerate(posts)})
        if (name == "personalised")
        else make(name)
    )
    assert pol.name == name
    full = pol.rank(posts, 1000, who)
    assert sorted(ids(full)) == sorted(ids(posts)), "everyone followed / embedded: every post, once"
    for n in (0, 1, 7, 40):
        assert ids(pol.rank(posts, n, who)) == ids(full)[:n]
    assert pol.rank([], 10, who) == []
    assert pol.rank(posts, -1, who) == []


def _unit(k: int) -> np.ndarray:
    v = np.array([np.cos(k), np.sin(k), np.cos(2 * k), 0.5], dtype=np.float32)
    return v / np.linalg.norm(v)


def test_unknown_policy_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown feed policy 'viral'") as err:
        policy("viral")
    for name in NAMES:
        assert name in str(err.value)
    assert sorted(POLICIES) == sorted(NAMES)


def test_personalised_fallbacks_with_synthetic_vectors() -> None:
    posts = [item(f"p{k}", created_us=T0 + k * HOUR, score=k * 3 % 7) for k in range(8)]
    vectors = {p["post_id"]: _unit(k) for k, p in enumerate(posts) if k % 3}  # p0, p3, p6 lack one
    profile = _unit(100)
    pol = PersonalisedPolicy(vectors)
    got = ids(pol.rank(posts, 8, Viewer("a", 1, 1, profile=profile)))
    # brute force: embedded posts by descending dot product (all unit vectors), then the rest newest first
    sims = {
        pid: float(np.dot(v.astype(np.float64), profile.astype(np.float64))) for pid, v in vectors.items()
    }
    embedded = sorted(sims, key=lambda pid: (-sims[pid], pid))
    rest = [p["post_id"] for p in sorted(posts, key=lambda i: -i["created_us"]) if p["post_id"] not in sims]
    assert got == embedded + rest
    assert rest == ["p6", "p3", "p0"]
    # no profile yet: today's hot ranking
    assert pol.rank(posts, 5, Viewer("a", 1, 1)) == rank_hot(posts, 5)


COOKING = [
    "Simmer the tomato sauce with garlic and fresh basil",
    "How long should I knead bread dough before baking",
    "Best way to sear a steak in a cast iron pan",
]
OTHER = [
    "The central bank raised interest rates again",
    "Kubernetes pods keep crashing after the upgrade",
    "Our team lost the football match in extra time",
    "Quantum entanglement explained for beginners",
]


@pytest.fixture(scope="module")
def real_posts() -> tuple[list[FeedItem], dict[str, np.ndarray]]:
    """Seven posts, three about cooking, embedded with the shipped all-MiniLM-L6-v2 model."""
    titles = OTHER[:2] + COOKING[:1] + OTHER[2:] + COOKING[1:]
    posts = [item(f"q{k}", f"a{k}", score=k, created_us=T0 + k, title=t) for k, t in enumerate(titles)]
    return posts, embed_posts(posts)


def test_personalised_ranks_by_the_real_model(
    real_posts: tuple[list[FeedItem], dict[str, np.ndarray]],
) -> None:
    posts, vectors = real_posts
    assert all(v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1) < 1e-4 for v in vectors.values())
    own = embed_texts(["I love cooking pasta and roasting vegetables", "My favourite recipe is a slow stew"])
    assert own.shape == (2, 384)
    profile = profile_vector(own)
    assert profile is not None
    got = policy("personalised", embeddings=vectors).rank(posts, 7, Viewer("a9", 1, 1, profile=profile))
    cooking = {p["post_id"] for p in posts if p["title"] in COOKING}
    assert {p["post_id"] for p in got[:3]} == cooking, [p["title"] for p in got]
    # direct computation: mean of the own vectors, normalised, dotted with each post vector, sorted
    mean = own.astype(np.float64).mean(axis=0)
    mean /= np.linalg.norm(mean)
    dots = [(float(np.dot(vectors[p["post_id"]], mean)), p["post_id"]) for p in posts]
    expected = [pid for _, pid in sorted(dots, key=lambda d: (-d[0], d[1]))]
    assert ids(got) == expected
    # another viewer, about finance, puts the bank post first
    finance = profile_vector(embed_texts(["Inflation, bond yields and monetary policy"]))
    first = policy("personalised", embeddings=vectors).rank(posts, 1, Viewer("b", 1, 1, profile=finance))
    assert first[0]["title"] == OTHER[0]
