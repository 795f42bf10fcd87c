"""Probe scoring on fixed threads, against expectations worked out by hand (in the comments)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from molt_society.probes.judge import ExactJudge
from molt_society.probes.score import (
    Reply,
    Verdict,
    comparators,
    last_number,
    score_judged,
    score_tier2,
    summarise,
)
from molt_society.probes.shared_memory import score_memory
from molt_society.probes.tasks import ProbeFileError, Question, load_questions, tier1, tier2


def R(cid: str, parent: str | None, text: str, depth: int = 1, actor: str = "a") -> Reply:
    return Reply(cid, parent, actor, depth, text)


def test_tier2_generated_answers_follow_from_the_premises() -> None:
    for p in tier2(20, seed=3):
        x, y, k = (int(last_number(s.split(" times")[0]) or 0) for s in p.premises)
        assert int(p.answer) == (x + y) * k
        assert all(s not in p.title + p.content for s in p.premises)  # premises only in comments


def test_tier2_scoring_by_hand() -> None:
    (probe,) = tier2(1, seed=1)
    ans = int(probe.answer)
    thread = [
        R("c1", None, f"I think it is {ans}."),  # follows, correct
        R("c2", None, f"{ans - 1}"),  # follows, wrong
        R("c3", "c1", f"Agreed: {ans}", depth=2),  # follows, correct
        R("c4", None, "no idea"),  # does not follow
    ]
    r = score_tier2("p", probe, thread)
    # 4 replies, 3 state a number, 2 correct; most common answer = ans (2 of 3) -> thread correct
    assert (r.replies, r.following, r.correct, r.any_correct, r.thread_correct, r.max_depth) == (
        4,
        3,
        2,
        True,
        True,
        2,
    )
    tie = score_tier2("p", probe, [R("c1", None, str(ans)), R("c2", None, "7")])
    assert (tie.correct, tie.thread_correct) == (1, False)  # 1-1 tie: the thread did not settle on it


def test_tier1_exact_judge_replies_and_thread() -> None:
    (probe,) = tier1([("What is the capital of France?", "Paris")])
    judge = ExactJudge()
    texts = {
        "c1": "It is Paris.",
        "c2": "paris, obviously",
        "c3": "Lyon is the capital",
        "c4": "I like crabs",
    }
    replies = [R(k, None, v) for k, v in texts.items()]
    verdicts = asyncio.run(judge.judge_replies(probe, replies))
    assert verdicts == {
        "c1": Verdict(True, True, True),
        "c2": Verdict(True, True, True),
        "c3": Verdict(True, False, False),  # on the task ("capital"), wrong, states no answer phrase
        "c4": Verdict(False, False, False),
    }
    thread = asyncio.run(judge.judge_thread(probe, replies))
    # the last reply that commits to an answer is c2 ("paris, obviously"): the thread ends on Paris
    assert thread is not None
    assert thread.correct
    r = score_judged("p", probe, replies, verdicts, thread)
    assert (r.replies, r.following, r.correct, r.any_correct, r.thread_correct) == (4, 3, 2, True, True)


def test_tier_summary_by_hand() -> None:
    (p2,) = tier2(1, seed=1)
    a = score_tier2("p1", p2, [R("c1", None, p2.answer), R("c2", None, "x")])
    b = score_tier2("p2", p2, [])
    c = score_tier2("p3", p2, [R("c3", None, "1"), R("c4", "c3", "2", 2), R("c5", None, "3")])
    t = summarise(2, [a, b, c])
    assert t.probes == 3
    assert t.no_reply_share == pytest.approx(1 / 3)
    assert t.replies_per_probe == pytest.approx(5 / 3)
    assert t.follow_share == pytest.approx(4 / 5)  # "x" states no number
    assert t.individual_accuracy == pytest.approx(1 / 3)
    assert t.reply_accuracy == pytest.approx(1 / 5)
    assert t.thread_accuracy == pytest.approx(1 / 3)
    assert t.mean_depth == pytest.approx((1 + 0 + 2) / 3)
    empty = summarise(3, [])
    assert (empty.probes, empty.no_reply_share, empty.follow_share) == (0, None, None)


def test_shared_memory_by_hand() -> None:
    aliases = {
        "agent-000001": "agent-000001",
        "molty_1": "agent-000001",
        "molty_2": "agent-000002",
        "molty_3": "agent-000003",
    }
    replies = [
        R("a", None, "molty_1 and Molty_2 for sure"),  # {1, 2}
        R("b", None, "agent-000001!"),  # {1}
        R("c", None, "nobody"),  # {}
        R("d", None, "molty_3, molty_2"),  # {2, 3}
    ]
    m = score_memory(replies, aliases, leaders=["agent-000001", "agent-000009"])
    # Jaccard: {1,2}-{1}=1/2, {1,2}-{2,3}=1/3, {1}-{2,3}=0 -> mean 5/18
    assert (m.replies, m.naming) == (4, 3)
    assert m.agreement == pytest.approx(5 / 18)
    assert m.named == {"agent-000001": 2, "agent-000002": 2, "agent-000003": 1}
    assert m.precision == pytest.approx(1 / 3)  # of 3 named agents, 1 leads
    assert m.recall == pytest.approx(1 / 2)  # of 2 leaders, 1 named


def test_question_files(tmp_path: Path) -> None:
    good = tmp_path / "q.jsonl"
    good.write_text('{"question": "2+2?", "answer": "4"}\n{"question": "Sky colour?", "answer": "blue"}\n')
    assert load_questions(good) == [Question("2+2?", "4"), Question("Sky colour?", "blue")]
    csv = tmp_path / "q.csv"
    csv.write_text("question,answer\nWho wrote Hamlet?,Shakespeare\n")
    assert load_questions(csv) == [Question("Who wrote Hamlet?", "Shakespeare")]
    bad = tmp_path / "bad.json"
    bad.write_text('[{"question": "no answer"}]')
    with pytest.raises(ProbeFileError, match="item 1 needs"):
        load_questions(bad)
    with pytest.raises(ProbeFileError, match="no such file"):
        load_questions(tmp_path / "missing.json")


def test_published_comparators_beside_ours() -> None:
    """The paper's Tier I-III values (Superminds Test section 4.2, Figures 3-4, Table 2) beside ours, each
    with its source; Tier I accuracies only beside an LLM judge's (they are the paper's LLM judge's)."""
    tiers: dict[str, dict[str, float | None]] = {
        "1": {"no_reply_share": 0.5, "individual_accuracy": 0.25, "thread_accuracy": 0.5},
        "2": {"no_reply_share": 0.8, "replies_per_probe": 0.2, "reply_accuracy": 1.0},
        "3": {"no_reply_share": 0.6, "replies_per_probe": 1.5, "reply_accuracy": None},
    }
    exact = {(c.tier, c.metric): c for c in comparators(tiers, "exact")}
    assert exact[("1", "no_reply_share")].published == pytest.approx(0.984)  # 98.4% of 2,158 HLE posts
    assert exact[("2", "no_reply_share")].published == pytest.approx(0.903, abs=5e-4)  # 93 of 103
    assert exact[("3", "no_reply_share")].published == pytest.approx(0.70)  # 35 of 50
    assert exact[("2", "reply_accuracy")].published == pytest.approx(11 / 17)
    assert exact[("3", "reply_accuracy")].published == pytest.approx(6 / 17)
    assert exact[("3", "reply_accuracy")].ours is None
    assert exact[("2", "no_reply_share")].ours == 0.8
    assert ("1", "individual_accuracy") not in exact
    assert ("1", "thread_accuracy") not in exact
    assert all("arXiv 2604.22452" in c.source for c in exact.values())
    llm = {(c.tier, c.metric): c for c in comparators(tiers, "llm")}
    assert llm[("1", "individual_accuracy")].published == pytest.approx(0.0019)
    assert llm[("1", "thread_accuracy")].published == pytest.approx(0.0014)
    assert comparators({}, "exact") == []
