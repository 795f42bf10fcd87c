"""2,000 LLM agents against OpenAI-compatible test servers that answer in 200 ms with unlimited concurrency
(``tests/llm_stub.py``, real HTTP on loopback): the calls in flight are bounded by the configured
concurrency per server and nothing else, the calls are spread over several servers, a dead server is
routed around, and the decisions are the same whatever the servers and concurrency. The last test does it
through the whole stack (real broker, agent worker process, ClickHouse).

The agents' brain is the one the agent worker opens (``open_llm_brain`` from Settings); every agent wakes
(``llm_rate=1``) and decides one tick. The stub counts the requests in flight itself, so the peaks are
the servers' view, not the client's.
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llm_stub import ChatStub, Stats
from stack_helpers import make_settings, run_ticks, running_stack, sql

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.brain import FeedView, TickContext
from molt_society.agents.llm_brain import LLMBrain, open_llm_brain
from molt_society.agents.roster import build_roster
from molt_society.runtime.settings import Settings
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import Event, ModelCalled

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

AGENTS = 2_000
SEED = 7
START = datetime(2026, 2, 1, tzinfo=UTC)


def _feed(submolts: tuple[str, ...]) -> FeedView:
    """Two posts per community, each with a comment, so every kind of action is possible."""
    lists: dict[str, dict[str, list[FeedItem]]] = {}
    for j, name in enumerate(submolts):
        items: list[FeedItem] = [
            {
                "post_id": f"post-{j}-{k}",
                "author": f"agent-{900000 + k:06d}",
                "submolt": name,
                "title": f"{name} {k}",
                "created_us": 1_000 * (j * 2 + k),
                "score": k,
                "comments": 1,
                "hot": float(j + k),
                "recent": [[f"c-{j}-{k}", "agent-000001", 1, 0, "first"]],
                "excerpt": "text",
            }
            for k in range(2)
        ]
        lists[name] = {"new": items, "hot": items}
    return FeedView(0, lists)


async def _decide(tmp_path: Path, base_url: str, concurrency: int) -> tuple[list[Event], LLMBrain]:
    behaviour = load_behaviour()
    submolts = tuple(behaviour.submolts.names)
    s = Settings(
        llm_base_url=base_url,
        llm_concurrency=concurrency,
        llm_rate=1.0,
        llm_agents=AGENTS,
        llm_models="m-a,m-b",
        llm_max_attempts=3,
        state_dir=tmp_path,
    )
    roster = build_roster(SEED, AGENTS, 1, behaviour, llm_agents=AGENTS, models=s.model_names)
    agents = roster.cohort(0).of_brain("llm")
    ctx = TickContext("soc", 1, START, 60.0, np.random.default_rng([SEED, 0, 1]), submolts)
    async with open_llm_brain(s) as brain:
        brain.client.pool.backoff_s = brain.client.backoff_s = 0.05  # a dead server is retried soon
        events = await brain.decide(agents, _feed(submolts), ctx)
    return events, brain


def _decisions(events: list[Event]) -> list[tuple[Any, ...]]:
    """Every event with what does not depend on timing (the latency and attempts of a call do)."""
    out = []
    for ev in events:
        doc = ev.model_dump(mode="json")
        if isinstance(ev, ModelCalled):
            doc["body"].pop("latency_ms")
            doc["body"].pop("attempts")
        out.append((type(ev).__name__, str(ev.event_id), ev.actor, str(doc)))
    return out


def _check_calls(events: list[Event]) -> Counter[str]:
    calls = [ev for ev in events if isinstance(ev, ModelCalled)]
    assert len(calls) == AGENTS  # every agent woke and was answered once
    assert {c.actor for c in calls} == {f"agent-{i:06d}" for i in range(AGENTS)}
    assert all(c.body.outcome == "ok" for c in calls)
    return Counter(c.body.decision for c in calls)


@dataclass(frozen=True)
class OneServer:
    events: list[Event]
    brain: LLMBrain
    stats: Stats


ONE_C = 50  # 2,000 calls / 50 in flight * 0.2 s: about 8 s


@pytest.fixture(scope="module")
def one_server(tmp_path_factory: pytest.TempPathFactory) -> OneServer:
    """2,000 agents deciding one tick against one server, concurrency 50 (shared by two tests)."""
    with ChatStub(1, delay_s=0.2) as stub:
        events, brain = asyncio.run(_decide(tmp_path_factory.mktemp("one"), stub.base_url, ONE_C))
        return OneServer(events, brain, stub.stats[0])


def test_one_server_is_kept_at_its_concurrency(one_server: OneServer) -> None:
    decisions = _check_calls(one_server.events)
    assert one_server.stats.requests == AGENTS
    # saturated (the worker never held calls back) and never more than configured
    assert one_server.stats.peak == ONE_C
    assert one_server.brain.client.pool.servers[0].peak == ONE_C
    assert set(decisions) >= {"post", "comment", "reply", "vote", "nothing"}  # the stub's answers are valid


def test_four_servers_each_at_its_concurrency_same_decisions(tmp_path: Path, one_server: OneServer) -> None:
    c = 16  # 2,000 calls / (4 * 16) in flight * 0.2-0.3 s: about 8 s
    # answers 200-300 ms late, by the request's seed: they come back in another order than asked
    with ChatStub(4, delay_s=0.2, jitter_s=0.1) as stub:
        events, brain = asyncio.run(_decide(tmp_path, stub.base_url, c))
        stats = list(stub.stats)
    _check_calls(events)
    assert [st.peak for st in stats] == [c] * 4
    assert sum(st.requests for st in stats) == AGENTS
    fair = AGENTS / 4
    assert all(0.85 * fair <= st.requests <= 1.15 * fair for st in stats), [st.requests for st in stats]
    assert [s.sent for s in brain.client.pool.servers] == [st.requests for st in stats]
    # the same events, ids included, in the same order as with one server at another concurrency
    assert _decisions(events) == _decisions(one_server.events)


def test_a_dead_server_is_routed_around(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    c = 16
    with ChatStub(3, delay_s=0.2) as stub:
        events, brain = asyncio.run(_decide(tmp_path, f"{dead},{stub.base_url}", c))
        stats = list(stub.stats)
    _check_calls(events)  # every call answered: a refused attempt was retried on a live server
    calls = [ev for ev in events if isinstance(ev, ModelCalled)]
    assert max(ev.body.attempts for ev in calls) == 2  # the retry never went back to the dead server
    refused = sum(ev.body.attempts - 1 for ev in calls)
    pool = brain.client.pool
    assert pool.servers[0].url == dead
    assert pool.servers[0].failed == pool.servers[0].sent == refused > 0
    # then it was avoided: after the first burst (at most c attempts in flight before the first refusal),
    # one probe per cooldown (0.05 s doubling: a dozen probes in 200 s)
    assert refused <= c + 12
    assert sum(st.requests for st in stats) == AGENTS
    assert [st.peak for st in stats] == [c] * 3


def test_agent_worker_keeps_four_servers_at_their_concurrency(
    broker: str, tmp_path: Path, society_name: str
) -> None:
    """The same through the whole stack: ``SOCIETY_LLM_BASE_URL`` lists four servers, the agent worker (a
    process of the stack, 4 shards) decides for 2,000 LLM agents, every call reaches ClickHouse."""
    c = 16
    with ChatStub(4, delay_s=0.2) as stub:
        s = make_settings(
            broker,
            tmp_path,
            agents=AGENTS,
            llm_agents=AGENTS,
            llm_rate=1.0,
            llm_concurrency=c,
            llm_base_url=stub.base_url,
        )
        with running_stack(s, society_name) as stack:
            assert stack.model_server is None  # the servers given are used, none is started
            run_ticks(stack, 2)  # genesis, then one tick of decisions
            rows = sql(
                stack,
                f"SELECT outcome, count() FROM model_calls WHERE society = '{society_name}' GROUP BY outcome",
            )
        stats = list(stub.stats)
    assert {str(o): int(n) for o, n in rows} == {"ok": AGENTS}
    assert [st.peak for st in stats] == [c] * 4  # saturated by the worker, and never more
    assert sum(st.requests for st in stats) == AGENTS
    assert all(0.85 * AGENTS / 4 <= st.requests <= 1.15 * AGENTS / 4 for st in stats)
