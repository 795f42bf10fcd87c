"""Delta-help across several models (Superminds Test, equation 4, Table 4), on loopback model servers
scripted per model name: the expected accuracies are set by the scripts, so Delta-help is known."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from loopback_chat import serve_chat

from molt_society.probes.helpfulness import (
    SYSTEM,
    ModelSpec,
    ModelSpecError,
    context_prompt,
    delta_help,
    parse_models,
)
from molt_society.probes.judge import ExactJudge
from molt_society.probes.score import Reply
from molt_society.probes.tasks import Question, tier1

Q1, Q2, Q3 = (
    tier1([Question("How many legs has a spider? Answer with a number.", "8")])[0],
    tier1([Question("Which is even?\nA. 3\nB. 4", "B", "multipleChoice")])[0],
    tier1([Question("Nobody answered me. What is 1+1?", "2")])[0],
)
THREADS = {
    Q1.task: [
        Reply("c1", None, "molty_a", 1, "Think of insects: they have 6, arachnids have more.", 1),
        Reply("c2", None, "molty_b", 1, "The answer is 8.", 2),  # an explicit answer: left out
    ],
    Q2.task: [Reply("c3", None, "molty_c", 1, "Even means divisible by two.", 1)],
    Q3.task: [],  # no comments: not in the population (the paper's commented questions only)
}


def script(model: str, user: str) -> str:
    """'learner' answers right only with the discussion; 'stubborn' right only without; 'broken' fails."""
    with_context = "--- Discussion Thread" in user
    right = {"learner": with_context, "stubborn": not with_context}[model]
    answer = ("8" if "spider" in user else "B") if right else "5"
    return f"Explanation: because.\nAnswer: {answer}\nConfidence: 50%"


def test_delta_help_per_model_over_two_servers() -> None:
    seen: list[tuple[str, list[dict[str, str]]]] = []

    async def handler(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        seen.append((body["model"], body["messages"]))
        if body["model"] == "broken":
            return web.json_response({"error": "no"}, status=400)
        text = script(body["model"], body["messages"][1]["content"])
        return web.json_response({"choices": [{"message": {"content": text}}], "usage": {}})

    async def go() -> list[Any]:
        r1, url1 = await serve_chat(handler)
        r2, url2 = await serve_chat(handler)
        try:
            models = parse_models(f"learner@{url1}, stubborn@{url2},broken", default_url=url1)
            judge = ExactJudge()
            verdicts = await judge.judge_replies(Q1, THREADS[Q1.task])
            verdicts |= await judge.judge_replies(Q2, THREADS[Q2.task])
            threads = [(p, THREADS[p.task], verdicts) for p in (Q1, Q2, Q3)]
            return await delta_help(models, threads, judge, max_tokens=64)
        finally:
            await r1.cleanup()
            await r2.cleanup()

    learner, stubborn, broken = asyncio.run(go())
    assert (learner.model, learner.questions, learner.failed) == ("learner", 2, 0)
    assert (learner.baseline_accuracy, learner.context_accuracy, learner.delta_help) == (0.0, 1.0, 1.0)
    assert (stubborn.baseline_accuracy, stubborn.context_accuracy, stubborn.delta_help) == (1.0, 0.0, -1.0)
    assert learner.base_url != stubborn.base_url
    assert (broken.questions, broken.failed, broken.delta_help) == (0, 2, None)
    assert (learner.comments_kept, learner.comments_removed) == (2, 1)  # "The answer is 8." left out
    asked = [m for name, m in seen if name == "learner"]
    assert len(asked) == 4  # 2 commented questions x (baseline, with context); Q3 has no comments
    assert all(m[0] == {"role": "system", "content": SYSTEM} for m in asked)
    contexts = [m[1]["content"] for m in asked if "Discussion Thread" in m[1]["content"]]
    spider = next(c for c in contexts if "spider" in c)
    assert "--- Discussion Thread (1 comments) ---\n[molty_a]: Think of insects" in spider
    assert "The answer is 8" not in spider


def test_context_prompt_is_the_papers() -> None:
    text = context_prompt("Q?", [Reply("c", None, "author1", 1, "comment text...")])
    assert text == (
        "Q?\n\nBelow is a discussion thread from a social media platform where users discussed this "
        "question. You may use their insights as additional context, but be aware that some comments "
        "may be incorrect."
        "\n\n--- Discussion Thread (1 comments) ---\n[author1]: comment text...\n--- End of Discussion ---"
    )


def test_model_lists() -> None:
    assert parse_models("a,b@https://x/v1", "http://127.0.0.1:1/v1", "k") == [
        ModelSpec("a", "http://127.0.0.1:1/v1", "k"),
        ModelSpec("b", "https://x/v1", "k"),
    ]
    with pytest.raises(ModelSpecError, match="no model server URL"):
        parse_models("a", None)
    with pytest.raises(ModelSpecError, match="no models"):
        parse_models(" , ", "http://x")
