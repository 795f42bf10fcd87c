"""``society experiment`` end to end on the real stack (broker, stream workers, sink, agents, chDB): a base of
100 agents x 12 ticks, forked at tick 8 into 2 arms x 2 seeds x 4 ticks. The run is interrupted after its
first pair; the rerun must not run that pair again (its row and its events untouched) and finish the rest.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from rich.console import Console
from stack_helpers import make_settings, run_ticks, running_stack

from molt_society.schemas.arm_plan import load_plan
from molt_society.schemas.control import to_us
from molt_society.society.experiments.runner import run_experiment
from molt_society.society.experiments.tables import Store

pytestmark = pytest.mark.integration

SPEC = """name = "{name}"
base = {{ society = "{base}", at = 8 }}
ticks = 4
seeds = 2

[[arms]]
name = "control"
control = true

[[arms]]
name = "banned"
[[arms.interventions]]
kind = "moderation"
rule = "ban_top_pagerank"
k = 2
"""


class Interrupted(Exception):
    pass


def _query(settings: Any, sql: str, **params: Any) -> list[Any]:
    with Store(settings.clickhouse_url, schema=False) as store:
        return list(store.client.query(sql, parameters=params).result_rows)


@pytest.mark.timeout(300)
def test_experiment_runs_verifies_and_resumes(broker: str, tmp_path: Path, society_name: str) -> None:
    settings = make_settings(broker, tmp_path, agents=100, window_seconds=600.0)
    base, name = society_name, "x" + society_name
    with running_stack(settings, base) as stack:
        run_ticks(stack, 12)
    fork_us = to_us(datetime.fromisoformat(settings.sim_start)) + 8 * 60 * 1_000_000
    spec = tmp_path / "exp.toml"
    spec.write_text(SPEC.format(name=name, base=base))
    societies = [f"{name}.{arm}.s{seed}" for arm in ("control", "banned") for seed in (0, 1)]

    def stop_after_first(society: str) -> None:
        raise Interrupted(society)

    console = Console(record=True, width=160)
    with pytest.raises(Interrupted):
        run_experiment(settings, spec, console=console, after_pair=stop_after_first)
    rows_sql = (
        "SELECT society, status, started_at, history_events, history_verified, fork_tick, run_seed "
        "FROM experiments FINAL WHERE experiment = {e:String} ORDER BY society"
    )
    first_rows = {r[0]: r for r in _query(settings, rows_sql, e=name)}
    assert set(first_rows) == {societies[0]}
    assert first_rows[societies[0]][1] == "done"
    inserted_sql = "SELECT count(), max(_inserted_at) FROM events WHERE society = {s:String}"
    first_events = _query(settings, inserted_sql, s=societies[0])[0]
    base_history = _query(
        settings,
        "SELECT count() FROM events FINAL WHERE society = {s:String} "
        "AND toUnixTimestamp64Micro(occurred_at) < {t:Int64}",
        s=base,
        t=fork_us,
    )[0][0]
    assert base_history > 0

    outcome = run_experiment(settings, spec, console=console)
    assert outcome.resumed == [societies[0]]
    assert outcome.ran == societies[1:]
    rows = {r[0]: r for r in _query(settings, rows_sql, e=name)}
    assert sorted(rows) == sorted(societies)
    for society, (_, status, _, history, verified, fork_tick, run_seed) in rows.items():
        assert (status, history, verified, fork_tick) == ("done", base_history, 1, 8), society
        assert run_seed == int(society[-1])  # common seeds: the run seed is the seed
    assert rows[societies[0]][2] == first_rows[societies[0]][2]  # not rerun: same start
    assert _query(settings, inserted_sql, s=societies[0])[0] == first_events  # nor its events
    live = _query(
        settings,
        "SELECT society, count() FROM events WHERE society IN {s:Array(String)} "
        "AND toUnixTimestamp64Micro(occurred_at) >= {t:Int64} GROUP BY society",
        s=societies,
        t=fork_us,
    )
    assert {r[0] for r in live if r[1] > 0} == set(societies)  # every pair went on after the fork
    plan = load_plan(settings.state_dir / societies[2] / "arm-plan.json")
    assert plan.fork_tick == 8
    # the bans: the top 2 by networkx PageRank of the base's interaction_edges view before the fork
    edges = _query(
        settings,
        "SELECT src, dst, count() FROM interaction_edges WHERE society = {s:String} "
        "AND toUnixTimestamp64Micro(occurred_at) < {t:Int64} GROUP BY src, dst",
        s=base,
        t=fork_us,
    )
    graph = nx.DiGraph()
    graph.add_weighted_edges_from((a, b, float(w)) for a, b, w in edges)
    ranks = nx.pagerank(graph, weight="weight")
    assert [b.agent_id for b in plan.bans] == sorted(ranks, key=lambda v: (-ranks[v], v))[:2]
    # the pairs' processes got the plan (Settings.arm_plan through the environment): the banned arms
    # record the bans, the control arms none
    banned = _query(
        settings,
        "SELECT society, groupArray(JSONExtractString(body, 'agent_id')) FROM events FINAL "
        "WHERE society IN {s:Array(String)} AND type = 'agent_banned' GROUP BY society",
        s=societies,
    )
    expected = {b.agent_id for b in plan.bans}
    assert {r[0]: set(r[1]) for r in banned} == {societies[2]: expected, societies[3]: expected}
