"""Tier III (basic interaction) scoring on hand-made threads after the Superminds Test's appendix 6.3
examples: "agents need only read the most recent number and produce the next one in sequence", counting
by ones, twos or threes. Expected counts are worked out by hand in the comments."""

from __future__ import annotations

from molt_society.probes.score import Reply, score_tier3
from molt_society.probes.tasks import STEPS, Probe, counting_post, tier3


def chain(start: int, step: int) -> Probe:
    title, content = counting_post(start, step)
    return Probe(3, title, content, start=start, step=step)


def flat(*texts: str) -> list[Reply]:
    """Top-level replies, one after another in time."""
    return [Reply(f"c{i}", None, f"a{i}", 1, t, occurred_us=i) for i, t in enumerate(texts, start=1)]


def test_example_1_count_by_ones_flat_thread() -> None:
    # post: "Starting number: 1"; five top-level replies 2..6, each the next after the most recent number
    r = score_tier3("p", chain(1, 1), flat("2", "3", "4", "5", "6"))
    assert (r.replies, r.following, r.correct, r.chain, r.thread_correct) == (5, 5, 5, 5, True)


def test_example_2_count_by_threes() -> None:
    # post: "First number: 3"; expected 6, 9, 12 (the paper: "Expected response: 6")
    r = score_tier3("p", chain(3, 3), flat("6", "9", "12"))
    assert (r.correct, r.chain, r.thread_correct) == (3, 3, False)  # 3 of the 5 a full chain needs
    wrong = score_tier3("p", chain(3, 3), flat("4"))  # "parent + 1" is not the rule here
    assert (wrong.following, wrong.correct) == (1, 0)


def test_most_recent_number_whatever_the_nesting() -> None:
    # start 10, step 2. In time order:
    thread = [
        Reply("a", None, "x", 1, "12", 1),  # 10 + 2: correct (run 1)
        Reply("b", "a", "y", 2, "14", 2),  # 12 + 2: correct (run 2)
        Reply("c", None, "z", 1, "16", 3),  # top-level, but the most recent number is 14: correct (run 3)
        Reply("d", None, "s", 1, "Joined 6 days ago, love this!", 4),  # one number, wrong: resets, latest 6
        Reply("e", "c", "t", 2, "8", 5),  # 6 + 2: correct after the wrong one (run 1)
        Reply("f", None, "u", 1, "great game", 6),  # no number: off-topic, changes nothing
        Reply("g", None, "v", 1, "10, 12", 7),  # two numbers: wrong format, changes nothing
        Reply("h", "e", "w", 3, "10", 8),  # 8 + 2: correct (run 2)
    ]
    r = score_tier3("p", chain(10, 2), thread)
    # replies 8; following (exactly one number): a b c d e h = 6; correct: a b c e h = 5; longest run 3
    assert (r.replies, r.following, r.correct, r.wrong_format, r.chain, r.max_depth) == (8, 6, 5, 1, 3, 3)
    assert not r.thread_correct
    # the order is time, not the order given: shuffled input, same result
    assert score_tier3("p", chain(10, 2), thread[::-1]) == r


def test_generated_counting_posts_follow_the_appendix() -> None:
    probes = tier3(6, seed=4)
    assert [p.step for p in probes] == [1, 2, 3, 1, 2, 3]
    assert set(STEPS) == {1, 2, 3}
    for p in probes:
        assert p.start % p.step == 0
        assert p.content.endswith(f"\n{p.start}")
        assert "ONLY one number" in p.content if p.step == 1 else "One number per comment only." in p.content
        right = [str(p.start + i * p.step) for i in range(1, 6)]
        assert score_tier3("p", p, flat(*right)).thread_correct
    assert counting_post(1, 1)[0] == "Counting Game -- Reply with the Next Number"
    assert counting_post(3, 3)[0] == "Count by Threes -- Skip Counting Challenge"
    assert "Stay in order: 3, 6, 9, 12" in counting_post(3, 3)[1]
