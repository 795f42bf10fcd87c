"""The experiment runner without a stack: plans (bans by PageRank, removals, probe injections), the purge's
SQL, and resume over a real chDB with a fake pair runner (the stack is the integration test's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from stored_events import store_events

from molt_society.runtime.settings import Settings
from molt_society.schemas.arm_plan import load_plan
from molt_society.schemas.control import to_us
from molt_society.schemas.events import (
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
)
from molt_society.schemas.experiment import Arm, BanTopPagerank, Inject, parse_spec
from molt_society.schemas.ids import uuid7
from molt_society.society.experiments import runner as runner_mod
from molt_society.society.experiments.base import PairJob
from molt_society.society.experiments.plan import BaseHistory, Item, bans, build_plan, expand_probes
from molt_society.society.experiments.runner import ExperimentError, run_experiment
from molt_society.society.experiments.tables import Store
from molt_society.society.fork import save_config
from molt_society.warehouse.client import connect
from molt_society.warehouse.purge import purge_statements

START = datetime(2026, 1, 28, tzinfo=UTC)


def _post(pid: str, actor: str) -> Item:
    return Item("post", pid, pid, actor, "", False, f"title {pid}\nbody")


def _comment(
    cid: str, pid: str, actor: str, parent: str = "", unknown: bool = False, text: str = "hi"
) -> Item:
    return Item("comment", cid, pid, actor, parent, unknown, text)


# a: posts p1; b, c, d comment on it; a replies to b's comment; c replies to a's reply; d replies to itself;
# an imported reply without a parent (no edge), a reply to an unknown comment (no edge), a comment on an
# unknown post (no edge)
HISTORY = BaseHistory(
    [
        _post("p1", "a"),
        _comment("c1", "p1", "b"),
        _comment("c2", "p1", "c"),
        _comment("c3", "p1", "d"),
        _comment("c4", "p1", "a", parent="c1"),
        _comment("c5", "p1", "c", parent="c4"),
        _comment("c6", "p1", "d", parent="c3"),
        _comment("c7", "p1", "b", unknown=True),
        _comment("c8", "p1", "b", parent="nope"),
        _comment("c9", "p-unknown", "b"),
    ]
)
# by hand from the rules above: b->a, c->a, d->a, a->b, c->a (twice in all), d->d dropped
HAND_EDGES = {("a", "b"): 1.0, ("b", "a"): 1.0, ("c", "a"): 2.0, ("d", "a"): 1.0}


def _pagerank_by_hand(edges: dict[tuple[str, str], float], alpha: float = 0.85) -> dict[str, float]:
    """PageRank as the solution of its linear system (dangling nodes spread uniformly), not by iteration."""
    nodes = sorted({n for e in edges for n in e})
    n, ix = len(nodes), {v: i for i, v in enumerate(nodes)}
    out = {v: sum(w for (s, _), w in edges.items() if s == v) for v in nodes}
    m = np.zeros((n, n))
    for (s, d), w in edges.items():
        m[ix[d], ix[s]] = w / out[s]
    for v in nodes:
        if out[v] == 0:
            m[:, ix[v]] = 1.0 / n
    r = np.linalg.solve(np.eye(n) - alpha * m, np.full(n, (1 - alpha) / n))
    return {v: float(r[ix[v]]) for v in nodes}


def test_edges_follow_the_stream_processor_rules() -> None:
    assert {(s, d): w for s, d, w in HISTORY.edges()} == HAND_EDGES


def test_bans_are_the_top_pagerank_agents() -> None:
    hand = _pagerank_by_hand(HAND_EDGES)
    order = sorted(hand, key=lambda v: (-hand[v], v))
    assert order[:2] == ["a", "b"]  # the hand ranking itself: a is answered by everyone, b by a
    got = bans(HISTORY, BanTopPagerank(kind="moderation", rule="ban_top_pagerank", k=3), fork_tick=9)
    assert [b.agent_id for b in got] == order[:3]
    assert got[0].rule == "ban_top_pagerank"
    assert "rank 1 of 4" in got[0].reason


def test_pagerank_ties_are_broken_by_agent_id() -> None:
    # x and y answer each other; z and w answer each other: four nodes of equal rank
    items = [_post("p", "x"), _post("q", "z")]
    items += [_comment("1", "p", "y"), _comment("2", "p", "x", parent="1")]
    items += [_comment("3", "q", "w"), _comment("4", "q", "z", parent="3")]
    got = bans(BaseHistory(items), BanTopPagerank(kind="moderation", rule="ban_top_pagerank", k=3), 1)
    assert [b.agent_id for b in got] == ["w", "x", "y"]


def test_a_ban_with_remove_content_removes_the_banned_agents_history() -> None:
    rule = {"kind": "moderation", "rule": "ban_top_pagerank", "k": 2, "remove_content": True}
    plain = {**rule, "remove_content": False}
    banned = [b.agent_id for b in bans(HISTORY, BanTopPagerank.model_validate(rule), 1)]
    hiding = build_plan(experiment="e", arm=Arm.model_validate({"name": "x", "interventions": [rule]}),
                        seed=0, fork_tick=5, fork_at_us=10, history=HISTORY)  # fmt: skip
    keeping = build_plan(experiment="e", arm=Arm.model_validate({"name": "x", "interventions": [plain]}),
                         seed=0, fork_tick=5, fork_at_us=10, history=HISTORY)  # fmt: skip
    assert [b.agent_id for b in hiding.bans] == banned == [b.agent_id for b in keeping.bans]
    assert keeping.removals == []
    expected = [(("post" if it.kind == "post" else "comment"), it.item_id) for it in HISTORY.items
                if it.actor in banned]  # fmt: skip
    assert [(r.target_type, r.target_id) for r in hiding.removals] == expected
    assert expected  # the banned agents wrote something
    assert all(r.rule == "ban_top_pagerank" for r in hiding.removals)


def test_plan_removes_flagged_history_and_expands_probes() -> None:
    items = [
        _post("p1", "a"),
        _comment("c1", "p1", "b", text="claim your FREE tokens now"),
        _comment("c2", "p1", "c", text="freedom of tokens"),  # not the phrase
        _comment("c3", "p1", "d", text="an airdrop is coming"),
    ]
    arm = Arm.model_validate(
        {
            "name": "mod",
            "interventions": [
                {"kind": "moderation", "rule": "terms", "terms": ["airdrop", "free tokens"]},
                {"kind": "moderation", "rule": "ban_top_pagerank", "k": 1},
                {"kind": "inject", "at": 2, "item": "post", "submolt": "general", "probes": 2, "author": "a"},
            ],
        }
    )
    plan = build_plan(experiment="e", arm=arm, seed=3, fork_tick=5, fork_at_us=10, history=BaseHistory(items))
    assert [(r.target_type, r.target_id, r.post_id, r.rule) for r in plan.removals] == [
        ("comment", "c1", "p1", "terms"),
        ("comment", "c3", "p1", "terms"),
    ]
    assert [b.agent_id for b in plan.bans] == ["a"]
    injects = [iv for iv in plan.interventions if isinstance(iv, Inject)]
    assert len(injects) == 2
    assert all(i.probes is None and i.title and i.content for i in injects)
    assert injects[0].title != injects[1].title or injects[0].content != injects[1].content
    assert all(i.at == 2 and i.author == "a" and i.submolt == "general" for i in injects)
    assert expand_probes(injects) == injects  # given text is kept as it is


class _RecordingClient:
    def __init__(self, tables: list[str]) -> None:
        self.tables = tables
        self.commands: list[tuple[str, dict[str, Any] | None]] = []

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        class R:
            result_rows = [[t] for t in self.tables]

        return R()

    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> None:
        self.commands.append((sql, parameters))


def test_purge_passes_the_society_as_a_parameter() -> None:
    society = "exp.arm.s0"
    client = _RecordingClient(["dead_letters", "embeddings", "events", "experiments", "metrics"])
    purged = Store("", client=client).purge(society)
    assert purged == ["dead_letters", "embeddings", "events", "metrics"]  # experiments rows are versioned
    for sql, params in client.commands:
        assert sql.startswith("ALTER TABLE `")
        assert "DELETE WHERE society = {s:String}" in sql
        assert society not in sql
        assert params == {"s": society}
    with pytest.raises(ValueError, match="not a table name"):
        purge_statements(["events; DROP TABLE x"], society)


# --- resume over a real chDB, with a fake pair runner -------------------------------------------------

SPEC = """name = "tiny"
base = { society = "base", at = 5 }
ticks = 3
seeds = 2
[[arms]]
name = "control"
control = true
[[arms]]
name = "banned"
[[arms.interventions]]
kind = "moderation"
rule = "ban_top_pagerank"
k = 1
"""


def _base_events() -> list[Event]:
    out: list[Event] = []
    for tick in range(8):  # one post and a comment on the previous post per tick
        at = START + timedelta(minutes=tick, seconds=10)
        pid = f"p{tick}"
        body = PostCreatedBody(post_id=pid, submolt="general", title=f"t{tick}", content="x")
        out.append(
            PostCreated(event_id=uuid7(at), society="base", actor=f"a{tick % 3}", occurred_at=at, body=body)
        )
        if tick:
            at2 = at + timedelta(seconds=5)
            cb = CommentCreatedBody(comment_id=f"c{tick}", post_id=f"p{tick - 1}", depth=1, content="y")
            ev = CommentCreated(event_id=uuid7(at2), society="base", actor="a9", occurred_at=at2, body=cb)
            out.append(ev)
    return out


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, Path]:
    settings = Settings(
        clickhouse_url=f"chdb://{tmp_path / 'ch'}", state_dir=tmp_path / "state", tick_seconds=60.0,
        sim_start=START.isoformat(), window_seconds=600.0,
    )  # fmt: skip
    with Store(settings.clickhouse_url) as store:
        store_events(store.client, _base_events())
    save_config(settings, "base", end_us=to_us(START + timedelta(minutes=8)))
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    monkeypatch.setattr(runner_mod, "_write_result", lambda *a: (None, None))
    return settings, spec


class FakeRunner:
    """Copies the base's history into the pair's society (as the fork would) plus one live event."""

    def __init__(self, fail_on: str | None = None, drop_one: bool = False) -> None:
        self.calls: list[PairJob] = []
        self.fail_on, self.drop_one = fail_on, drop_one

    def __call__(self, job: PairJob, on_tick: Any) -> int:
        self.calls.append(job)
        assert job.settings.arm_plan is not None
        assert load_plan(job.settings.arm_plan).seed == job.extra["experiment_seed"]
        client = connect(job.settings.clickhouse_url)
        try:
            result = client.query(
                "SELECT * FROM events FINAL WHERE society = {b:String} "
                "AND toUnixTimestamp64Micro(occurred_at) < {t:Int64} ORDER BY event_id",
                parameters={"b": job.base.society, "t": job.base.point.at_us},
            )
            at = result.column_names.index("society")
            rows = [[job.society if i == at else v for i, v in enumerate(r)] for r in result.result_rows]
            token = f"society.{job.society}.events@g{job.settings.generation}:0:0-{len(rows)}"  # as the sink
            client.insert(
                "events",
                rows[1:] if self.drop_one else rows,
                column_names=result.column_names,
                settings={"insert_deduplication_token": token},
            )
        finally:
            client.close()
        for t in range(job.base.point.tick, job.base.point.tick + job.ticks):
            on_tick(t)
        if job.society == self.fail_on:
            raise RuntimeError("the stack died")
        return 0


def _rows(settings: Settings) -> dict[str, tuple[str, Any, int]]:
    with Store(settings.clickhouse_url, schema=False) as store:
        rows = store.client.query(
            "SELECT society, status, started_at, history_events FROM experiments FINAL "
            "WHERE experiment = 'tiny'"
        ).result_rows
        return {str(s): (str(st), t, int(n)) for s, st, t, n in rows}


def _count(settings: Settings, society: str) -> int:
    with Store(settings.clickhouse_url, schema=False) as store:
        return store.count_events(society)


def test_resume_skips_done_pairs_and_reruns_an_interrupted_one(world: tuple[Settings, Path]) -> None:
    settings, spec = world
    console = Console(record=True, width=200)
    first = FakeRunner(fail_on="tiny.control.s1")
    with pytest.raises(ExperimentError, match=r"arm 1/2 seed 2/2 \(tiny.control.s1\) failed"):
        run_experiment(settings, spec, console=console, runner=first)
    rows = _rows(settings)
    assert rows["tiny.control.s0"][0] == "done"
    assert rows["tiny.control.s1"][0] == "started"
    history = rows["tiny.control.s0"][2]
    assert history == 5 + 4  # posts of ticks 0-4, comments of ticks 1-4: before tick 5
    assert _count(settings, "tiny.control.s1") == history  # left by the failed pair
    plan = load_plan(settings.state_dir / "tiny.control.s0" / "arm-plan.json")
    assert plan.fork_tick == 5
    assert plan.bans == []

    second = FakeRunner()
    outcome = run_experiment(settings, spec, console=console, runner=second)
    assert [j.society for j in second.calls] == ["tiny.control.s1", "tiny.banned.s0", "tiny.banned.s1"]
    assert outcome.resumed == ["tiny.control.s0"]
    after = _rows(settings)
    assert all(st == "done" and n == history for st, _, n in after.values())
    assert len(after) == 4
    assert after["tiny.control.s0"][1] == rows["tiny.control.s0"][1]  # not rerun
    assert _count(settings, "tiny.control.s1") == history  # purged, then copied once
    banned = load_plan(settings.state_dir / "tiny.banned.s1" / "arm-plan.json")
    # before tick 5 a9 answers the posts of ticks 0-3: by a0, a1, a2, a0; a0 gets twice the weight
    assert [b.agent_id for b in banned.bans] == ["a0"]
    assert second.calls[0].settings.seed == 1
    assert second.calls[0].extra["experiment_seed"] == 1

    third = FakeRunner()
    run_experiment(settings, spec, console=console, runner=third)
    assert third.calls == []


def test_a_history_that_differs_stops_the_experiment(world: tuple[Settings, Path]) -> None:
    settings, spec = world
    with pytest.raises(ExperimentError, match=r"history of tiny.control.s0 is not the base's: 8 events .* 9"):
        run_experiment(settings, spec, console=Console(record=True), runner=FakeRunner(drop_one=True))
    assert _rows(settings)["tiny.control.s0"][0] == "started"


def test_a_fork_point_past_the_base_end_is_refused(world: tuple[Settings, Path]) -> None:
    settings, spec = world
    spec.write_text(SPEC.replace("at = 5", "at = 30"))
    with pytest.raises(ExperimentError, match="past the end of base society 'base'"):
        run_experiment(settings, spec, console=Console(record=True), runner=FakeRunner())
    spec.write_text(SPEC.replace('society = "base"', 'society = "nobase"'))
    with pytest.raises(ExperimentError, match="'nobase' has no recorded configuration"):
        run_experiment(settings, spec, console=Console(record=True), runner=FakeRunner())


def test_a_society_the_experiment_did_not_create_is_never_purged(world: tuple[Settings, Path]) -> None:
    """A pair's name taken by another society (the user ran ``society run --society tiny.control.s0``):
    the experiment stops before touching it, and its rows stay."""
    settings, spec = world
    other = [
        ev.model_copy(update={"society": "tiny.control.s0"}) for ev in _base_events()
    ]  # stored under the pair's name, by someone else
    with Store(settings.clickhouse_url) as store:
        store_events(store.client, other)
    before = _count(settings, "tiny.control.s0")
    assert before == len(other)
    taken = r"'tiny.control.s0' exists .* did not create it; nothing was deleted"
    with pytest.raises(ExperimentError, match=taken):
        run_experiment(settings, spec, console=Console(record=True), runner=FakeRunner())
    assert _count(settings, "tiny.control.s0") == before
    assert "tiny.control.s0" not in _rows(settings)
    # a state folder alone (a run that stored nothing yet) is somebody's too
    (settings.state_dir / "tiny.banned.s0").mkdir(parents=True)
    with Store(settings.clickhouse_url, schema=False) as store:
        store.purge("tiny.control.s0")
    with pytest.raises(ExperimentError, match=r"'tiny.banned.s0' exists \(0 events stored, a state folder\)"):
        run_experiment(settings, spec, console=Console(record=True), runner=FakeRunner())
    assert (settings.state_dir / "tiny.banned.s0").is_dir()


def test_spec_hash_ignores_formatting() -> None:
    a = parse_spec({"name": "x", "base": {"society": "b", "at": 1}, "ticks": 1, "seeds": 2,
                    "arms": [{"name": "c", "control": True}, {"name": "t"}]})  # fmt: skip
    b = parse_spec({"arms": [{"name": "c", "control": True}, {"name": "t"}], "seeds": [0, 1], "ticks": 1,
                    "base": {"at": 1, "society": "b"}, "name": "x"})  # fmt: skip
    assert runner_mod.spec_hash(a) == runner_mod.spec_hash(b)


def test_the_pairs_share_one_broker_and_a_dead_one_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``StackPairs``: one local broker for the pairs (started with the first), another when it died, the
    pair's own settings pointed at it; a failure to delete a stored pair's topics does not fail the pair."""
    from molt_society.society.experiments import base as eb

    class FakeBroker:
        def __init__(self, n: int) -> None:
            self.bootstrap, self.pid, self.stopped = f"127.0.0.1:{9000 + n}", 100 + n, False
            self.code: int | None = None

        def exited(self) -> int | None:
            return self.code

        def stop(self) -> None:
            self.stopped = True

    started: list[FakeBroker] = []
    ran: list[str | None] = []

    def start_broker(settings: Settings, run_dir: Path) -> FakeBroker:
        assert run_dir == tmp_path / "state" / ".experiment-brokers" / "exp"
        started.append(FakeBroker(len(started)))
        return started[-1]

    async def drop_topics(bootstrap: str, society: str) -> None:
        raise OSError("broker away")

    monkeypatch.setattr(eb, "start_broker", start_broker)

    def run_pair(job: PairJob, on_tick: Any) -> int:
        ran.append(job.settings.kafka_bootstrap)
        return 7

    monkeypatch.setattr(eb, "run_pair", run_pair)
    monkeypatch.setattr(eb, "drop_topics", drop_topics)
    settings = Settings(state_dir=tmp_path / "state", kafka_bootstrap=None)
    job = PairJob("exp.a.s0", settings, None, 3, {})  # type: ignore[arg-type]
    pairs = eb.StackPairs(settings, "exp")
    assert pairs(job, lambda t: None) == 7
    assert pairs(job, lambda t: None) == 7
    started[0].code = -9  # killed between two pairs
    assert pairs(job, lambda t: None) == 7
    assert ran == [started[0].bootstrap, started[0].bootstrap, started[1].bootstrap]
    assert len(started) == 2
    pairs.close()
    assert started[1].stopped
    configured = settings.model_copy(update={"kafka_bootstrap": "10.0.0.1:9092"})
    assert eb.StackPairs(configured, "exp")(PairJob("x", configured, None, 3, {}), lambda t: None) == 7  # type: ignore[arg-type]
    assert ran[-1] == "10.0.0.1:9092"
    assert len(started) == 2  # a configured broker: none started
