"""Probes of every tier posted into a running simulated society (real broker, real ClickHouse), then
scored: the probe events are stored as ordinary posts and comments, the probing agents never act after
posting, and the tier results agree with an independent recount of the probe threads from ClickHouse.
Delta-help and the paper's LLM judge run against the real local model server (SmolLM2-135M through
llama-cpp-python). The scoring rules themselves are checked on fixed threads in
``tests/unit/probes/``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from stack_helpers import make_settings, running_stack, sql

from molt_society.agents.llm_client import ChatClient
from molt_society.probes import session, tasks
from molt_society.probes.helpfulness import HelpResult, delta_help, parse_models
from molt_society.probes.judge import ExactJudge, LLMJudge
from molt_society.probes.score import Reply, ThreadVerdict, Verdict
from molt_society.report.warehouse_source import SinkWarehouse
from molt_society.runtime.broker import free_port
from molt_society.society.drive import drive_clock, last_window_start, wait_drained
from molt_society.society.fork import save_config
from molt_society.society.model_server import LocalModelServer, default_model_path
from molt_society.society.stack import settings_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_probes_of_every_tier_in_a_live_society(broker: str, tmp_path: Path, society_name: str) -> None:
    s = make_settings(broker, tmp_path, agents=400, seed=11)
    qfile = tmp_path / "questions.jsonl"
    qfile.write_text('{"question": "What is the capital of France?", "answer": "Paris"}\n')
    long_q = "Consider the following carefully. " * 12 + "What is the capital of France?"  # > 280 chars
    qfile.write_text(qfile.read_text() + json.dumps({"question": long_q, "answer": "Paris"}) + "\n")
    made = [*tasks.tier1(tasks.load_questions(qfile)), *tasks.tier2(3, seed=1), *tasks.tier3(3, seed=2)]
    made += tasks.shared_memory(1)
    reached, posted = threading.Event(), threading.Event()
    with running_stack(s, society_name) as stack:
        wh = SinkWarehouse(stack.sink_url())

        def on_tick(t: int) -> None:
            if t == 6:  # hold the clock while the probes go in
                reached.set()
                assert posted.wait(120)

        result: list[int] = []

        def clock() -> None:
            async def go() -> None:
                _, end_us = await drive_clock(
                    s, stack.bootstrap, society_name, ticks=60, duration=None, on_tick=on_tick
                )
                save_config(s, society_name, end_us=end_us)
                await wait_drained(society_name, last_window_start(s, end_us), stack)
                result.append(end_us)

            asyncio.run(go())

        th = threading.Thread(target=clock, daemon=True)  # a failed test must not hang on it
        th.start()
        assert reached.wait(300)
        try:
            run = session.inject(s, wh, stack.bootstrap, society_name, made, submolt="general", seed=5)
        finally:
            posted.set()
        th.join(500)
        assert result, "the clock did not finish"
        doc = session.score(s, wh, run)
        q = f"society = '{society_name}'"
        ids = ", ".join(f"'{p['post_id']}'" for p in run.probes)
        rows = sql(
            stack,
            "SELECT type, actor, post_id, comment_id, depth, content FROM events FINAL "
            f"WHERE {q} AND (post_id IN ({ids}) OR actor IN ({', '.join(repr(a) for a in run.agents)}))",
        )
        dead = int(sql(stack, f"SELECT count() FROM dead_letters WHERE {q}")[0][0])

    assert dead == 0
    probe_agents = run.agents
    # what the probing agents did: register, subscribe, post the probe, and (Tier II) one premise each
    by_agent: dict[str, list[str]] = {}
    for etype, actor, *_ in rows:
        if actor in probe_agents:
            by_agent.setdefault(str(actor), []).append(str(etype))
    n_premises = sum(len(p["premises"]) for p in run.probes)
    assert len(probe_agents) == len(made) + n_premises
    assert sum(v.count("post_created") for v in by_agent.values()) == len(made)
    assert sum(v.count("comment_created") for v in by_agent.values()) == n_premises
    assert all(
        sorted(v)
        in (
            ["agent_registered", "agent_subscribed", "post_created"],
            ["agent_registered", "agent_subscribed", "comment_created"],
        )
        for v in by_agent.values()
    )
    for p in run.probes:
        premises = [
            r for r in rows if r[0] == "comment_created" and r[2] == p["post_id"] and r[1] in probe_agents
        ]
        assert sorted(str(r[5]) for r in premises) == sorted(p["premises"])
        assert len({r[1] for r in premises}) == len(p["premises"])  # each premise by its own agent
    # the results against an independent recount of the external replies per probe
    external = {p["post_id"]: 0 for p in run.probes}
    for etype, actor, post_id, *_ in rows:
        if etype == "comment_created" and actor not in probe_agents:
            external[str(post_id)] += 1
    scored = {r["post_id"]: r for r in doc["probes"]}
    for p in run.probes:
        if p["tier"] != "memory":
            assert scored[p["post_id"]]["replies"] == external[p["post_id"]]
    long_post = next(r for r in rows if r[0] == "post_created" and r[2] == run.probes[1]["post_id"])
    assert str(long_post[5]) == long_q  # posted whole, verbatim
    assert {(c["tier"], c["metric"]) for c in doc["published"]} >= {
        ("1", "no_reply_share"),
        ("3", "no_reply_share"),
    }
    for tier, want in (("1", 2), ("2", 3), ("3", 3)):
        t = doc["tiers"][tier]
        posts = [p["post_id"] for p in run.probes if str(p["tier"]) == tier]
        assert t["probes"] == want
        assert t["no_reply_share"] == pytest.approx(sum(1 for x in posts if external[x] == 0) / want)
        assert t["replies_per_probe"] == pytest.approx(sum(external[x] for x in posts) / want)
    memory = doc["shared_memory"]
    assert memory["replies"] == sum(external[p["post_id"]] for p in run.probes if p["tier"] == "memory")
    assert memory["leaders"]  # the measured PageRank leaders of the newest window
    assert (tmp_path / "state" / society_name / "probes" / f"{run.run_id}.results.json").exists()

    # the CLI re-scores the stored run (stack stopped: it reads ClickHouse directly) and prints the tiers
    run_file = tmp_path / "state" / society_name / "probes" / f"{run.run_id}.json"
    env = settings_env(s)
    env.pop("KAFKA_BOOTSTRAP", None)
    out = subprocess.run(
        [sys.executable, "-m", "molt_society.society.cli", "probe", "--society", society_name,
         "--score", str(run_file)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "tier 2" in out.stdout
    again = json.loads(
        (tmp_path / "state" / society_name / "probes" / f"{run.run_id}.results.json").read_text()
    )
    assert again["tiers"] == doc["tiers"]


def test_delta_help_and_the_papers_judge_on_the_local_model(tmp_path: Path) -> None:
    """Delta-help of two model names (the local server answers both with its one model) on two commented
    questions, the paper's prompts end to end; and the paper's LLM judge on a real model. A 135M model is
    no judge and no HLE solver: this checks that every call is made, answered and accounted for, not the
    accuracies (those are checked on scripted servers in ``tests/unit/probes/test_helpfulness.py``)."""
    spider, even = tasks.tier1(
        [
            tasks.Question("How many legs does a spider have? Answer with a number.", "8"),
            tasks.Question("Which is even?\nA. 3\nB. 4", "B", "multipleChoice"),
        ]
    )
    spider_thread = [
        Reply("c1", None, "molty_a", 1, "Spiders are arachnids, not insects.", 1),
        Reply("c2", None, "molty_b", 1, "The answer is 8.", 2),  # states the answer: left out of C*
    ]
    even_thread = [Reply("c3", None, "molty_c", 1, "Even numbers divide by two.", 1)]
    server = LocalModelServer(default_model_path(), free_port(), tmp_path / "model.log", 2, "smollm2-135m")
    server.start()

    async def go() -> tuple[list[HelpResult], dict[str, Verdict], ThreadVerdict | None, int]:
        judge = ExactJudge()
        verdicts = await judge.judge_replies(spider, spider_thread)
        verdicts |= await judge.judge_replies(even, even_thread)
        models = parse_models("smollm2-135m,smollm2-135m-b", server.base_url)
        threads = [(spider, spider_thread, verdicts), (even, even_thread, verdicts)]
        helped = await delta_help(models, threads, judge, max_tokens=48)
        async with LLMJudge(ChatClient(server.base_url, timeout_s=120), "smollm2-135m", max_tokens=96) as llm:
            per_reply = await llm.judge_replies(spider, spider_thread)
            whole = await llm.judge_thread(spider, spider_thread)
            return helped, per_reply, whole, llm.failures

    try:
        helped, per_reply, whole, failures = asyncio.run(go())
    finally:
        server.stop()
    assert [h.model for h in helped] == ["smollm2-135m", "smollm2-135m-b"]
    for h in helped:
        assert (h.questions, h.failed) == (2, 0)  # both calls of both questions answered and judged
        assert (h.comments_kept, h.comments_removed) == (2, 1)
        assert h.baseline_accuracy is not None
        assert h.context_accuracy is not None
        assert h.delta_help == pytest.approx(h.context_accuracy - h.baseline_accuracy)
    # what the small model wrote as a judge is either a verdict or a counted failure, never a guess
    assert set(per_reply) <= {"c1", "c2"}
    assert failures == (len(per_reply) < 2) + (whole is None)
