"""The Tier I judges (Superminds Test, appendix 7.3): the exact judge reads the answer a reply commits to
and does not credit look-alikes; the thread is judged as a whole, so it can be right where no reply is.

Expected verdicts are worked out by hand from the reply texts (comments give the reasoning)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from loopback_chat import serve_chat

from molt_society.agents.llm_client import ChatClient
from molt_society.probes.judge import (
    COLLECTIVE_SYSTEM,
    INDIVIDUAL_SYSTEM,
    RESPONSE_SYSTEM,
    ExactJudge,
    LLMJudge,
)
from molt_society.probes.score import Reply, ThreadVerdict, Verdict, score_judged, summarise
from molt_society.probes.tasks import Probe, Question, tier1

# the paper's appendix 6.1 example (exactMatch, answer 6)
HUMMINGBIRD = (
    "Hummingbirds within Apodiformes uniquely have a bilaterally paired oval bone, a sesamoid embedded in "
    "the caudolateral portion of the expanded, cruciate aponeurosis of insertion of m. depressor caudae. "
    "How many paired tendons are supported by this sesamoid bone? Answer with a number."
)
CHOICE = "Which number is prime?\nAnswer Choices:\nA. 4\nB. 6\nC. 8\nD. seven, the odd one"


def one(question: str, answer: str, kind: str = "exactMatch") -> Probe:
    (probe,) = tier1([Question(question, answer, kind)])  # type: ignore[arg-type]
    return probe


def verdicts(probe: Probe, texts: list[str]) -> list[Verdict]:
    replies = [Reply(f"c{i}", None, f"a{i}", 1, t) for i, t in enumerate(texts)]
    got = asyncio.run(ExactJudge().judge_replies(probe, replies))
    return [got[r.comment_id] for r in replies]


def correct(probe: Probe, texts: list[str]) -> list[bool]:
    return [v.correct for v in verdicts(probe, texts)]


def test_exact_judge_no_false_positives_from_the_issue() -> None:
    # "I'd" is one token: it names neither option D nor I; a join date is not an answer of 6
    assert correct(one(CHOICE, "D", "multipleChoice"), ["I'd love to dig into this"]) == [False]
    assert correct(one(HUMMINGBIRD, "6"), ["Joined 6 days ago"]) == [False]
    more_noise = ["I have 6 years of experience with birds", "6 days ago I saw one", "Day 6 of posting!"]
    assert correct(one(HUMMINGBIRD, "6"), more_noise) == [False, False, False]
    # neither states an answer: they are not "explicit answers" to leave out of the Delta-help context
    v = verdicts(one(HUMMINGBIRD, "6"), ["Joined 6 days ago"])[0]
    assert not v.offers_answer


def test_exact_judge_true_positives() -> None:
    number = [
        "6",  # the answer alone
        "The answer is 6.",  # an answer phrase
        "Explanation: six tendons attach.\nAnswer: 6\nConfidence: 40%",  # the paper's answer format
        "6 tendons",  # the number with a word of the question
        "I think it's 6",
        "= 6",
    ]
    assert correct(one(HUMMINGBIRD, "6"), number) == [True] * len(number)
    # the paper's format decides: the Answer line says 7, though 6 appears elsewhere
    assert correct(one(HUMMINGBIRD, "6"), ["Six? no.\nAnswer: 7\nthere are 6 others"]) == [False]
    choice = ["D", "(D)", "The answer is D", "D. because seven is prime", "Answer: D", "seven, the odd one"]
    assert correct(one(CHOICE, "D", "multipleChoice"), choice) == [True] * len(choice)
    assert correct(one(CHOICE, "D", "multipleChoice"), ["The answer is B", "A bit tricky, this"]) == [
        False,
        False,
    ]
    text = one("What is the capital of France?", "Paris")
    assert correct(text, ["It is Paris.", "paris, obviously", "Lyon is the capital"]) == [True, True, False]
    # decimals: to the reference's decimals; fractions and thousands separators by value
    assert correct(one("Pi to two decimals?", "3.14"), ["Answer: 3.14159", "Answer: 3.1"]) == [True, False]
    assert correct(one("Total points?", "3,360"), ["The total is 3360 points"]) == [True]
    assert correct(one("Half of one?", "1/2"), ["Answer: 1/2", "Answer: 2/4", "Answer: 1/3"]) == [
        True,
        True,
        False,
    ]


def test_thread_judged_as_a_whole_can_beat_every_single_reply() -> None:
    """Two replies each state one root; no reply holds the full answer "2, 3"; the thread does (partial
    contributions that combine). Before, the thread could only be right through a correct reply."""
    probe = one("Find both roots of x^2 - 5x + 6 = 0.", "2, 3")
    thread = [
        Reply("c1", None, "x", 1, "One root is 2, I checked it.", occurred_us=1),
        Reply("c2", "c1", "y", 2, "Nice. And the other root is 3.", occurred_us=2),
        Reply("c3", None, "z", 1, "Great post!", occurred_us=3),
    ]
    judge = ExactJudge()
    vs = asyncio.run(judge.judge_replies(probe, thread))
    tv = asyncio.run(judge.judge_thread(probe, thread))
    assert [vs[c].correct for c in ("c1", "c2", "c3")] == [False, False, False]
    assert tv == ThreadVerdict(True, "2, 3")
    r = score_judged("p", probe, thread, vs, tv)
    assert (r.any_correct, r.thread_correct) == (False, True)
    t = summarise(1, [r])
    assert t.individual_accuracy == 0.0
    assert t.thread_accuracy == 1.0
    # the discussion's final answer decides: a thread that ends on a wrong answer is not correct
    wrong = [Reply("c1", None, "x", 1, "The answer is 6", 1), Reply("c2", None, "y", 1, "No, it's 7", 2)]
    assert asyncio.run(judge.judge_thread(one(HUMMINGBIRD, "6"), wrong)) == ThreadVerdict(False, "7")
    # no replies: not correct, whatever the judge said
    assert not score_judged("p", probe, [], {}, ThreadVerdict(True)).thread_correct


def test_llm_judge_uses_the_papers_prompts_and_credits_the_thread() -> None:
    """The paper's individual and collective prompts (appendix 7.3) on a loopback server scripted to say:
    no single comment is correct, the thread as a whole is. The thread score must follow the collective
    verdict (before: thread correct only when most replies were)."""
    probe = one(HUMMINGBIRD, "6")
    thread = [
        Reply("c1", None, "molty_1", 1, "Paired tendons... at least 3", 1),
        Reply("c2", "c1", "m2", 2, "double it", 2),
    ]
    sent: list[list[dict[str, str]]] = []

    async def handler(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        sent.append(body["messages"])
        system = body["messages"][0]["content"]
        if system == INDIVIDUAL_SYSTEM:
            text = (
                '```json\n[{"comment_id": "c1", "offers_answer": true, "answer_value": "3", '
                '"is_correct": false, "note": "n"}, {"comment_id": "c2", "offers_answer": false, '
                '"answer_value": null, "is_correct": null, "note": "n"}]\n```'
            )
        elif system == COLLECTIVE_SYSTEM:
            text = '{"collective_correct": true, "final_answer": "6", "confidence": "medium", '
            text += '"reasoning": "r"}'
        elif system == RESPONSE_SYSTEM:
            text = "Correct" if "Answer: 6" in body["messages"][1]["content"] else "banana"
        else:
            text = "?"
        return web.json_response({"choices": [{"message": {"content": text}}], "usage": {}})

    async def go() -> tuple[dict[str, Verdict], ThreadVerdict | None, list[bool | None], int]:
        runner, url = await serve_chat(handler)
        try:
            async with LLMJudge(ChatClient(url), "judge-m") as judge:
                vs = await judge.judge_replies(probe, thread)
                tv = await judge.judge_thread(probe, thread)
                rs = [await judge.judge_response(probe, t) for t in ("Answer: 6", "Answer: 5")]
                return vs, tv, rs, judge.failures
        finally:
            await runner.cleanup()

    vs, tv, rs, failures = asyncio.run(go())
    assert vs == {"c1": Verdict(True, False, True), "c2": Verdict(False, False, False)}
    assert tv == ThreadVerdict(True, "6")
    assert rs == [True, None]
    assert failures == 1
    r = score_judged("p", probe, thread, vs, tv)
    assert (r.any_correct, r.thread_correct) == (False, True)
    user = sent[0][1]["content"]
    assert user.startswith(f"Question: {HUMMINGBIRD}\nAnswer type: exactMatch\nCorrect answer: 6\n\n")
    assert "--- COMMENTS (2 total) ---\nComment 1 (id=c1, author=molty_1):\nPaired tendons" in user
    assert "taken together, arrive at the correct answer" in sent[1][0]["content"]


@pytest.mark.parametrize("reply", ["not json", '{"collective_correct": "yes"}'])
def test_llm_judge_thread_failure_is_unjudged(reply: str) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"message": {"content": reply}}], "usage": {}})

    async def go() -> tuple[ThreadVerdict | None, int]:
        runner, url = await serve_chat(handler)
        try:
            async with LLMJudge(ChatClient(url), "m") as judge:
                return await judge.judge_thread(
                    one("Q?", "x"), [Reply("c", None, "a", 1, "hm")]
                ), judge.failures
        finally:
            await runner.cleanup()

    assert asyncio.run(go()) == (None, 1)
