"""An experiment arm's plan applied by the agent workers, end to end on the real broker, stream worker and
ClickHouse sink: the stored events hold the intervention records at the fork tick, no action of a banned
agent after it, a removal right after every new text the terms rule matches, and the injected post.

Expected values come from independent computations: the same society run in one process without the plan
(``agents.offline``, the control), which must equal the arm's history before the fork and tells which agents
would have acted after it, and a regular expression for the terms rule.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from stack_helpers import make_settings, run_ticks, running_stack, sql

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.offline import simulate
from molt_society.schemas.arm_plan import ArmPlan, write_plan
from molt_society.schemas.events import CommentCreated, PostCreated, VoteCast

pytestmark = pytest.mark.integration
TICKS = 20
FORK = 8
AGENTS = 100
BEHAVIOUR = Path(__file__).resolve().parents[2] / "molt_society" / "agents" / "behaviour.toml"
TERM = re.compile(r"(?<!\w)shell(?!\w)", re.IGNORECASE)


def _active_behaviour(tmp: Path) -> Path:
    """The default behaviour with ten times the activity: a small society with enough events to test."""
    text = BEHAVIOUR.read_text().replace("base_rate = 0.02", "base_rate = 0.2")
    assert "base_rate = 0.2\n" in text
    path = tmp / "behaviour.toml"
    path.write_text(text)
    return path


def test_arm_plan_records_bans_moderates_and_injects(broker: str, tmp_path: Path, society_name: str) -> None:
    behaviour_file = _active_behaviour(tmp_path)
    settings = make_settings(broker, tmp_path, agents=AGENTS, behaviour_file=behaviour_file)
    origin = datetime.fromisoformat(settings.sim_start)
    fork_us = int((origin + timedelta(seconds=FORK * settings.tick_seconds)).timestamp() * 1e6)
    control = simulate(
        seed=settings.seed,
        agents=AGENTS,
        ticks=TICKS,
        behaviour=load_behaviour(behaviour_file),
        shards=settings.shards,
        partitions=settings.partitions,
        tick_seconds=settings.tick_seconds,
        start=origin,
        society=society_name,
        feed_size=settings.feed_size,
    )

    def us(at: datetime) -> int:
        return int(at.timestamp() * 1e6)

    acts = (PostCreated, CommentCreated, VoteCast)
    after = Counter(e.actor for e in control.events if isinstance(e, acts) and us(e.occurred_at) >= fork_us)
    banned = [a for a, _ in after.most_common(2)]
    plan = ArmPlan.model_validate(
        {
            "experiment": "exp",
            "arm": "treat",
            "seed": settings.seed,
            "fork_tick": FORK,
            "fork_at_us": fork_us,
            "interventions": [
                {"kind": "feed_policy", "policy": "random", "share": 0.5},
                {"kind": "moderation", "rule": "terms", "terms": ["shell"]},
                {"kind": "inject", "at": 1, "item": "post", "submolt": "general", "title": "Hello",
                 "content": "An injected post", "new_author": True},
                {"kind": "behaviour", "share": 0.3, "rate_scale": 2.0},
            ],
            "bans": [{"agent_id": a, "rule": "ban_top_pagerank", "reason": "test"} for a in banned],
        }
    )  # fmt: skip
    settings = settings.model_copy(update={"arm_plan": write_plan(plan, tmp_path / "arm-plan.json")})

    with running_stack(settings, society_name) as stack:
        run_ticks(stack, TICKS)
        rows = sql(
            stack,
            "SELECT type, toString(event_id), actor, toUnixTimestamp64Micro(occurred_at), post_id, "
            "comment_id, target_type, target_id, title, content, body "
            f"FROM events FINAL WHERE society = '{society_name}'",
        )
        dead = sql(stack, f"SELECT count() FROM dead_letters WHERE society = '{society_name}'")[0][0]

    assert dead == 0
    tick_us = int(settings.tick_seconds * 1e6)
    # before the fork the arm is the control, event for event
    before = {r[1] for r in rows if int(r[3]) < fork_us}
    assert before == {str(e.event_id) for e in control.events if us(e.occurred_at) < fork_us}

    # the records, in the fork tick
    applied = [r for r in rows if r[0] == "intervention_applied"]
    assert len(applied) == 4
    assert all(r[2] == "experiment" and fork_us <= int(r[3]) < fork_us + tick_us for r in applied)
    kinds = sorted(json.loads(str(r[10]))["kind"] for r in applied)
    assert kinds == ["behaviour", "feed_policy", "inject", "moderation"]
    bans = [r for r in rows if r[0] == "agent_banned"]
    assert sorted(str(r[7]) for r in bans) == sorted(banned)
    assert all(r[2] == "moderator" and fork_us <= int(r[3]) < fork_us + tick_us for r in bans)

    # the banned agents acted in the control after the fork, and not at all in the arm
    assert all(after[a] > 0 for a in banned)
    assert not [r for r in rows if r[2] in banned and int(r[3]) >= fork_us]

    # the injected post and its new author, one tick after the fork
    injected = [r for r in rows if r[2] == "injected-2"]
    assert sorted(str(r[0]) for r in injected) == ["agents_joined", "post_created"]
    assert all(fork_us + tick_us <= int(r[3]) < fork_us + 2 * tick_us for r in injected)

    # every new text of an agent matching the term is removed right after it, nothing else is removed
    texts = {
        str(r[5] or r[4]): (f"{r[8]}\n{r[9]}" if r[0] == "post_created" else str(r[9]), int(r[3]))
        for r in rows
        if r[0] in ("post_created", "comment_created")
        and str(r[2]).startswith("agent-")
        and int(r[3]) >= fork_us
    }
    removed = {str(r[7]): int(r[3]) for r in rows if r[0] == "content_removed"}
    expected = {cid for cid, (text, _) in texts.items() if TERM.search(text)}
    assert expected  # the term is common enough for the test to mean something
    assert set(removed) == expected
    assert all(removed[cid] >= texts[cid][1] for cid in expected)
