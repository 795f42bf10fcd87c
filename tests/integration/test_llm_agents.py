"""A society with LLM agents on the real local model server (SmolLM2-135M via llama-cpp-python), the real
broker and real ClickHouse: valid actions come out, every model call is an event in ClickHouse, and a
model server killed mid-run makes the LLM agents back off while the pipeline flows, then resume.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from stack_helpers import make_settings, running_stack, sql

from molt_society.society.drive import drive_clock, last_window_start, wait_drained
from molt_society.society.fork import save_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

TICKS = 8  # a tick of the LLM agents: 25-35 s on this machine alone, twice that beside make test's other lane
LLM = 4  # two agents per model (a call is about 9 s of the model server's time here: ~600 prompt tokens)
KILL_AT, RESTART_AT = 3, 5  # killed as tick 3 is published, back at tick 5: calls of ticks 4-5 find it down


def test_llm_society_survives_a_dead_model_server(broker: str, tmp_path: Path, society_name: str) -> None:
    s = make_settings(
        broker,
        tmp_path,
        agents=400,
        llm_agents=LLM,
        llm_models="smollm2-135m,smollm2-135m-b",
        llm_rate=1.0,
        llm_concurrency=3,
        llm_max_attempts=3,
        llm_temperature=1.0,
    )
    events_at_tick: dict[int, int] = {}
    with running_stack(s, society_name) as stack:
        server = stack.model_server
        assert server is not None  # started by the stack: LLM agents and no base URL
        llm_ids = {f"agent-{i:06d}" for i in range(LLM)}

        def on_tick(t: int) -> None:
            events_at_tick[t] = int(
                sql(stack, f"SELECT count() FROM events WHERE society = '{society_name}'")[0][0]
            )
            if t == KILL_AT:
                server.kill()
            elif t == RESTART_AT:
                server.start()

        async def go() -> None:
            _, end_us = await drive_clock(
                s, stack.bootstrap, society_name, ticks=TICKS, duration=None, on_tick=on_tick
            )
            save_config(s, society_name, end_us=end_us)
            await wait_drained(society_name, last_window_start(s, end_us), stack)

        asyncio.run(go())
        q = f"society = '{society_name}'"
        origin_us = _origin_us(s.sim_start)
        calls = sql(
            stack,
            f"SELECT actor, intDiv(toUnixTimestamp64Micro(occurred_at) - {origin_us}, 60000000), model, "
            f"outcome, decision, action_event_id, prompt_tokens, completion_tokens "
            f"FROM model_calls WHERE {q}",
        )
        actions = {
            str(eid): (str(t), str(actor), int(depth))
            for eid, t, actor, depth in sql(
                stack,
                f"SELECT event_id, type, actor, depth FROM events FINAL WHERE {q} AND type IN "
                "('post_created', 'comment_created', 'vote_cast')",
            )
        }
        dead = int(sql(stack, f"SELECT count() FROM dead_letters WHERE {q}")[0][0])
        per_tick_all = Counter(
            int(t)
            for (t,) in sql(
                stack,
                f"SELECT intDiv(toUnixTimestamp64Micro(occurred_at) - {_origin_us(s.sim_start)}, 60000000) "
                f"FROM events FINAL WHERE {q} AND type IN ('post_created', 'comment_created', 'vote_cast')",
            )
        )
        usage = sql(
            stack,
            "SELECT model, count(), sum(prompt_tokens), sum(completion_tokens) FROM model_calls "
            f"WHERE {q} GROUP BY model",
        )

    assert dead == 0  # nothing the LLM agents emitted was invalid
    by_tick: dict[int, Counter[str]] = {}
    for actor, at, model, outcome, decision, action_id, _p, _c in calls:
        assert actor in llm_ids
        assert model == ("smollm2-135m" if int(actor[-6:]) % 2 == 0 else "smollm2-135m-b")
        tick = int(at)
        by_tick.setdefault(tick, Counter())[outcome] += 1
        if decision in ("post", "comment", "reply", "vote"):
            etype, action_actor, depth = actions[action_id]  # the action is stored, by the same agent
            assert action_actor == actor
            expected = {"post": "post_created", "vote": "vote_cast"}.get(decision, "comment_created")
            assert etype == expected
            if decision == "reply":
                assert depth >= 2
        else:
            assert action_id == ""
    # every LLM agent woke every tick (rate 1): one call each per tick after genesis
    assert sorted(by_tick) == list(range(1, TICKS))
    assert all(sum(c.values()) == LLM for c in by_tick.values())
    # before the kill the model answered; while it was down calls failed; after the restart it answered again
    seen = {t: dict(c) for t, c in sorted(by_tick.items())}
    assert all(by_tick[t]["ok"] == LLM for t in range(1, KILL_AT - 1)), seen
    assert any(by_tick[t]["unavailable"] for t in range(KILL_AT, RESTART_AT)), seen
    # after the restart it answers again, from the first tick whose calls come after the client's cooldown
    # (up to 8 s in wall time, which a loaded machine may or may not have spent by tick RESTART_AT + 1) on
    back = min((t for t in range(RESTART_AT, TICKS) if by_tick[t]["ok"] == LLM), default=TICKS)
    assert back <= RESTART_AT + 2, seen
    assert all(by_tick[t]["ok"] == LLM for t in range(back, TICKS)), seen
    # the pipeline kept flowing while the server was down: the stochastic agents' actions were stored
    assert all(per_tick_all[t] > 0 for t in range(KILL_AT, RESTART_AT))
    assert events_at_tick[RESTART_AT] > events_at_tick[KILL_AT]
    # LLM agents produced valid actions of several kinds; the whole society every action type
    llm_decisions = Counter(decision for _, _, _, _, decision, _, _, _ in calls)
    assert llm_decisions["post"] > 0
    assert llm_decisions["comment"] + llm_decisions["reply"] > 0
    kinds = Counter(t for t, _, _ in actions.values())
    assert set(kinds) == {"post_created", "comment_created", "vote_cast"}
    assert any(d >= 2 for t, _, d in actions.values() if t == "comment_created")
    # cost as data: per model, calls and tokens add up to the per-call rows
    for model, n, prompt, completion in usage:
        mine = [c for c in calls if c[2] == model]
        assert int(n) == len(mine)
        assert int(prompt) == sum(int(c[6]) for c in mine) > 0
        assert int(completion) == sum(int(c[7]) for c in mine) > 0
    print(
        "LLM decisions:",
        dict(llm_decisions),
        "outcomes per tick:",
        {t: dict(c) for t, c in sorted(by_tick.items())},
    )


def _origin_us(sim_start: str) -> int:
    return int(datetime.fromisoformat(sim_start).timestamp() * 1_000_000)
