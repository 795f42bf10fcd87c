"""Probe scoring on fixed threads, against expectations worked out by hand (in the comments)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from probes.judge import ExactJudge
from probes.score import Reply, Verdict, last_number, score_judged, score_tier2, score_tier3, summarise
from probes.shared_memory import score_memory
from probes.tasks import ProbeFileError, load_questions, tier1, tier2, tier3


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


def test_tier3_chain_by_hand() -> None:
    (probe,) = tier3(1, seed=2)
    s = probe.start
    thread = [
        R("a", None, f"{s + 1}"),  # correct (post says s)
        R("b", "a", f"{s + 2}", 2),  # correct
        R("c", "b", f"{s + 3}", 3),  # correct
        R("d", "c", f"{s + 5}", 4),  # wrong (skips)
        R("e", "c", f"ok {s + 4}", 4),  # correct, chain of 4
        R("f", None, "hello"),  # no number: does not follow
        R("g", "f", f"{s + 1}", 2),  # parent has no number: not correct
        R("h", "e", f"{s + 5}", 5),  # correct, chain of 5 = target
    ]
    r = score_tier3("p", probe, thread)
    assert probe.target == 5
    assert (r.replies, r.following, r.correct, r.chain, r.thread_correct, r.max_depth) == (
        8,
        7,
        5,
        5,
        True,
        5,
    )
    short = score_tier3("p", probe, thread[:5])
    assert (short.chain, short.thread_correct) == (4, False)


def test_tier1_exact_judge_and_thread_majority() -> None:
    (probe,) = tier1([("What is the capital of France?", "Paris")])
    judge = ExactJudge()
    texts = {
        "c1": "It is Paris.",
        "c2": "paris, obviously",
        "c3": "Lyon is the capital",
        "c4": "I like crabs",
    }

    async def go() -> dict[str, Verdict | None]:
        return {k: await judge.judge(probe.title, probe.answer, v) for k, v in texts.items()}

    verdicts = asyncio.run(go())
    assert verdicts == {
        "c1": Verdict(True, True),
        "c2": Verdict(True, True),
        "c3": Verdict(True, False),  # on the task ("capital"), wrong
        "c4": Verdict(False, False),
    }
    replies = [R(k, None, v) for k, v in texts.items()]
    r = score_judged("p", probe, replies, {k: v for k, v in verdicts.items() if v})
    # 3 follow, 2 of them correct (> half) -> thread correct
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
    assert load_questions(good) == [("2+2?", "4"), ("Sky colour?", "blue")]
    csv = tmp_path / "q.csv"
    csv.write_text("question,answer\nWho wrote Hamlet?,Shakespeare\n")
    assert load_questions(csv) == [("Who wrote Hamlet?", "Shakespeare")]
    bad = tmp_path / "bad.json"
    bad.write_text('[{"question": "no answer"}]')
    with pytest.raises(ProbeFileError, match="item 1 needs"):
        load_questions(bad)
    with pytest.raises(ProbeFileError, match="no such file"):
        load_questions(tmp_path / "missing.json")


def test_llm_judge_reads_the_verdict_and_counts_failures() -> None:
    """The LLM judge against a loopback chat server whose answers are scripted (the real model judges in
    no test: a 135M model is no judge; this checks the plumbing and the failure path)."""
    from aiohttp import web
    from loopback_chat import serve_chat

    from agents.llm_client import ChatClient
    from probes.judge import LLMJudge

    answers = iter(['{"on_task": true, "correct": false}', "not json", '{"on_task": false, "correct": true}'])
    sent: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        sent.append(body["messages"][0]["content"])
        text = next(answers)
        return web.json_response({"choices": [{"message": {"content": text}}], "usage": {}})

    async def go() -> list[Verdict | None]:
        runner, url = await serve_chat(handler)
        try:
            async with LLMJudge(ChatClient(url), "judge-m") as judge:
                out = [await judge.judge("Q?", "Paris", f"reply {i}") for i in range(3)]
                assert judge.failures == 1
                return out
        finally:
            await runner.cleanup()

    got = asyncio.run(go())
    assert got == [Verdict(True, False), None, Verdict(True, True)]  # correct implies on the task
    assert '"Paris"' in sent[0]
    assert '"reply 0"' in sent[0]  # the reply goes in as a quoted string
