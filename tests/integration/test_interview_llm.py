"""``society interview`` on a real society: the real broker, chDB behind the running sink and the real local
model server (SmolLM2-135M via llama-cpp-python) that the stack started for its LLM agents.

A small society with two LLM agents runs a few ticks; then the ``society interview`` command, run as its
own process, asks one of them a short question at a tick in the middle. The answer is not empty, the side
log holds one valid ``model_called`` line of that agent, the prompt shows exactly the agent's posts before
that tick (checked against ClickHouse independently), and the society's stored events are unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest
from stack_helpers import make_settings, run_ticks, running_stack, sql

from molt_society.agents.personas import persona
from molt_society.schemas.control import to_us
from molt_society.schemas.events import ModelCalled
from molt_society.schemas.wire import decode_event

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TICKS = 6
AT_TICK = 4
LLM_AGENTS = ("agent-000000", "agent-000001")
QUESTION = "In one sentence: what do you like to talk about here?"


def test_interview_an_llm_agent(broker: str, tmp_path: Path, society_name: str) -> None:
    s = make_settings(
        broker, tmp_path, agents=200, llm_agents=2, llm_rate=1.0, llm_max_tokens=64, llm_concurrency=1
    )
    q = f"society = '{society_name}'"
    stored = f"SELECT count(), max(_inserted_at), countIf(type = 'model_called') FROM events WHERE {q}"
    cut = datetime.fromisoformat(s.sim_start) + timedelta(seconds=AT_TICK * s.tick_seconds)
    with running_stack(s, society_name) as stack:
        run_ticks(stack, TICKS)
        before = sql(stack, stored)[0]
        written = sql(
            stack,
            "SELECT actor, if(type = 'post_created', title, content), "
            f"toUnixTimestamp64Micro(occurred_at) < {to_us(cut)} FROM events FINAL "
            f"WHERE {q} AND type IN ('post_created', 'comment_created') AND actor IN {LLM_AGENTS}",
        )
        # the LLM agent that wrote the most (a small model may only vote or pass for a few ticks)
        agent = max(LLM_AGENTS, key=lambda a: (sum(r[0] == a for r in written), a))
        env = {
            **os.environ,
            "CLICKHOUSE_URL": s.clickhouse_url,
            "SOCIETY_STATE_DIR": str(s.state_dir),
            "KAFKA_BOOTSTRAP": broker,
        }
        env.pop("SOCIETY_LLM_BASE_URL", None)  # the running stack's model server answers
        argv = [sys.executable, "-m", "molt_society.society.cli", "interview", society_name]
        argv += ["--agent", agent, "--at", str(AT_TICK), "--max-tokens", "40", "--json", QUESTION]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        time.sleep(2.0)  # anything the interview had sent to the society would reach the sink by now
        after = sql(stack, stored)[0]

    assert int(before[2]) == (TICKS - 1) * 2  # rate 1: both LLM agents called their model every tick
    assert after == before  # not one event more (the interview's call included), none rewritten
    lines = (s.state_dir / society_name / "interviews.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record == json.loads(done.stdout)
    assert record["answer"].strip()
    assert record["question"] == QUESTION
    assert datetime.fromisoformat(record["at"]) == cut  # tick 4 starts 4 ticks after the origin
    event = decode_event(json.dumps(record["event"]).encode(), max_bytes=s.max_event_bytes)
    assert isinstance(event, ModelCalled)
    assert (event.society, event.actor) == (society_name, agent)
    assert (event.body.outcome, event.body.decision) == ("ok", "nothing")
    assert 0 < event.body.completion_tokens <= 40
    assert event.body.latency_ms > 0
    index = LLM_AGENTS.index(agent)
    assert record["model"] == event.body.model == s.model_names[index % len(s.model_names)]
    prompt = record["prompt"]
    assert record["persona_from"] == "events"
    assert orjson.dumps(persona(index)).decode() in prompt  # from the stored agents_joined event
    mine = [(str(text), bool(is_before)) for actor, text, is_before in written if actor == agent]
    assert mine, "neither LLM agent posted or commented in five ticks: nothing to check the history by"
    earlier = {text for text, is_before in mine if is_before}
    for text in earlier:  # every post and comment before the time is in the prompt (at most 4 < 12)
        assert _quoted(text) in prompt
    for text in {text for text, is_before in mine if not is_before} - earlier:  # none at or after it
        assert _quoted(text) not in prompt


def _quoted(text: str) -> str:
    """How the prompt quotes ``text``: a JSON string, cut (an open quotation then) past 100 characters."""
    return orjson.dumps(text).decode() if len(text) <= 100 else orjson.dumps(text[:100]).decode()[:-1]
