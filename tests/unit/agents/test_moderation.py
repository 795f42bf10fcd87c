"""Moderation rules on crafted texts, each expected value worked out by hand or by brute force."""

from __future__ import annotations

import random

import pytest

from molt_society.agents.moderation import (
    Moderator,
    jaccard,
    matched_terms,
    near_duplicate,
    promo_hits,
    repetition,
    shingles,
    spam_score,
    tokens,
)
from molt_society.schemas.experiment import BanTopPagerank, NearDuplicates, SpamScore, Terms


def test_ordinary_prose_scores_zero() -> None:
    assert spam_score("The agent wrote a long reply about memory and context today.") == 0.0
    assert spam_score("") == 0.0


def test_all_four_promotion_patterns_score_one() -> None:
    text = "Free airdrop!!! Click www.example.com"
    assert promo_hits(text) == 4  # link, vocabulary, call to action, shouting
    assert spam_score(text) == 1.0


def test_repetition_alone() -> None:
    # 8 tokens, 1 distinct: repeat share 7/8, R = (7/8 - 1/2) / (1/2) = 3/4; no promotion pattern
    assert spam_score("buy buy buy buy buy buy buy buy") == pytest.approx(0.75)


def test_repetition_and_promotion_combine() -> None:
    # 5 tokens, 2 distinct: repeat share 3/5, R = 0.2; one pattern ("free"): P = 1/3
    expected = 1 - (1 - 0.2) * (1 - 1 / 3)
    assert spam_score("free stuff stuff stuff stuff") == pytest.approx(expected)


def test_short_texts_have_no_repetition_and_capitals_count_as_shouting() -> None:
    assert repetition(["a", "a", "a"]) == 0.0
    assert promo_hits("THIS IS REALLY LOUD TEXT") == 1
    assert promo_hits("This is NOT loud text") == 0  # 1 of 5 words in capitals


def test_shingles_and_jaccard() -> None:
    a, b = shingles("a b c d"), shingles("A b, c E")
    assert a == {("a", "b", "c"), ("b", "c", "d")}
    assert jaccard(a, b) == pytest.approx(1 / 3)
    assert shingles("hi there") == {("hi", "there")}
    assert shingles("...") == frozenset()
    assert near_duplicate("a b c d", ["x y z", "a b c e"], 0.3) == pytest.approx(1 / 3)
    assert near_duplicate("a b c d", ["x y z", "a b c e"], 0.5) is None


def test_matched_terms_are_words_case_insensitive_in_given_order() -> None:
    text = "What a SCAM! Please DM   me about scampi."
    assert matched_terms(text, ["dm me", "scam", "scampi", "scamp", "crab"]) == ["dm me", "scam", "scampi"]
    assert matched_terms("scampi only", ["scam"]) == []
    assert matched_terms("c++ rocks", ["c++"]) == ["c++"]


def test_moderator_reports_the_first_rule_broken_and_remembers() -> None:
    rules: list[BanTopPagerank | Terms | NearDuplicates | SpamScore] = [
        BanTopPagerank(kind="moderation", rule="ban_top_pagerank", k=3),  # no content rule: skipped
        Terms(kind="moderation", rule="terms", terms=["crypto"]),
        NearDuplicates(kind="moderation", rule="near_duplicates", threshold=0.8),
        SpamScore(kind="moderation", rule="spam_score", threshold=0.7),
    ]
    mod = Moderator(rules)
    assert len(mod.rules) == 3
    first = "the quick brown fox jumps over the lazy dog"
    assert mod.check(first) is None
    assert len(mod) == 1
    dup = mod.check(first + " again")  # 7 of 8 shingles shared: 7/8 >= 0.8
    assert dup is not None
    assert dup[0] == "near_duplicates"
    assert "0.88" in dup[1]
    hit = mod.check("I love Crypto and the quick brown fox jumps over the lazy dog")
    assert hit == ("terms", "contains 'crypto'")  # the first rule in order wins
    spam = mod.check("Free airdrop!!! Click www.example.com")
    assert spam == ("spam_score", "spam score 1.00 >= 0.7")
    assert len(mod) == 4  # every checked text is remembered


def test_remember_without_the_near_duplicate_rule_keeps_nothing() -> None:
    mod = Moderator([Terms(kind="moderation", rule="terms", terms=["x"])])
    mod.remember("a b c d")
    assert len(mod) == 0


def test_similarity_through_the_index_equals_brute_force() -> None:
    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(60)]
    mod = Moderator([NearDuplicates(kind="moderation", rule="near_duplicates", threshold=1.0)])
    for i in range(1, len(texts)):
        mod.remember(texts[i - 1])
        text = texts[i]
        brute = max(jaccard(shingles(text), shingles(o)) for o in texts[:i])
        assert mod.similarity(text) == pytest.approx(brute)


def test_tokens_lowercase_words() -> None:
    assert tokens("Héllo, WORLD_1 x-y") == ["héllo", "world_1", "x", "y"]
