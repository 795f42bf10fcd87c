"""Same spec, same seeds: byte-identical events and results.

The same base (300 agents x 12 ticks, seed 7) is run in two separate roots (each its own chDB and state
directory), and the same experiment spec — with every kind of intervention: a feed policy for a share of
the agents, a term rule and a PageRank ban, an injected post by a new agent, a behaviour override — is run
on each. Every society's stored events (id, type, actor, time, causation, body) and the result's JSON must
be the same bytes in both roots; the interventions must have left their events (so the comparison covers
them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console
from stack_helpers import make_settings, run_ticks, running_stack

from molt_society.society.experiments.runner import run_experiment
from molt_society.society.experiments.tables import Store

pytestmark = pytest.mark.integration

SPEC = """name = "same"
base = { society = "base", at = 8 }
ticks = 6
seeds = 2

[[arms]]
name = "control"
control = true

[[arms]]
name = "treated"
[[arms.interventions]]
kind = "feed_policy"
policy = "following"
share = 0.5
[[arms.interventions]]
kind = "moderation"
rule = "terms"
terms = ["shell"]
[[arms.interventions]]
kind = "moderation"
rule = "ban_top_pagerank"
k = 3
[[arms.interventions]]
kind = "inject"
at = 1
item = "post"
submolt = "general"
title = "The moon is made of cheese"
content = "A new study shows the moon is mostly cheddar."
new_author = true
[[arms.interventions]]
kind = "behaviour"
share = 0.3
rate_scale = 3.0
comment_weight = 2.0
"""

EVENTS_SQL = (
    "SELECT society, toString(event_id), type, actor, toString(occurred_at), causation_id, body "
    "FROM events FINAL WHERE society LIKE 'same.%' ORDER BY society, event_id"
)


def _root(tmp: Path) -> tuple[bytes, bytes, dict[str, int]]:
    """Base and experiment in the root ``tmp``: (events as bytes, result JSON bytes, events per type).

    No shared broker: every stack starts its own embedded one, as `society experiment` does by default, so
    the two roots' topics (same society names) never meet."""
    settings = make_settings(None, tmp, agents=300, window_seconds=600.0)
    with running_stack(settings, "base") as stack:
        run_ticks(stack, 12)
    spec = tmp / "same.toml"
    spec.write_text(SPEC)
    outcome = run_experiment(settings, spec, console=Console(width=160))
    assert outcome.json is not None
    with Store(settings.clickhouse_url, schema=False) as store:
        rows: list[Any] = list(store.client.query(EVENTS_SQL).result_rows)
        types = dict(
            store.client.query(
                "SELECT type, count() FROM events FINAL WHERE society LIKE 'same.treated.%' GROUP BY type"
            ).result_rows
        )
    return orjson.dumps(rows), outcome.json.read_bytes(), {str(k): int(v) for k, v in types.items()}


@pytest.mark.timeout(600)
def test_same_spec_same_seeds_same_bytes(tmp_path: Path) -> None:
    first_events, first_result, types = _root(tmp_path / "one")
    second_events, second_result, _ = _root(tmp_path / "two")
    assert types.get("intervention_applied", 0) == 2 * 5  # 5 interventions recorded, in each seed
    assert types.get("agent_banned", 0) == 2 * 3
    assert types.get("content_removed", 0) > 0  # the term rule removed something
    assert types.get("agents_joined", 0) > 0  # the injected post's new author (besides the genesis)
    assert len(first_events) > 10_000
    assert first_events == second_events
    assert first_result == second_result
