"""Leaders over the whole observation period, not the newest window: in the collective layer and in the
shared-memory probe's scoring (``session.score`` on a stored probe run, real chDB).

The society: on days 1 and 2 five agents comment on ``star``'s posts (9 comments); on day 3, the newest
day before the probes, three of them comment on ``rookie``'s post. Over the whole period
``star`` leads; in the newest window ``rookie`` does. The probes go in on day 4; the replies to them, and
later comments, are after the probes and are not part of the record the replies are scored against.
References: PageRank by networkx on the interaction graph built here from the Python events.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from stored_events import open_chdb, store_events

from molt_society.probes import session
from molt_society.probes.tasks import shared_memory as probes
from molt_society.report import collective
from molt_society.report.model import Scalar, Table
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.runtime.settings import Settings
from molt_society.schemas.events import (
    AgentRegistered,
    AgentRegisteredBody,
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
    VoteCast,
    VoteCastBody,
)
from molt_society.schemas.ids import uuid7

SOC = "lead"
D1 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
PROBED = D1 + timedelta(days=3, hours=3)  # day 4, 12:00
AGENTS = ["star", "rookie", "c1", "c2", "c3", "c4", "c5"]


def _post(actor: str, pid: str, submolt: str, title: str, at: datetime) -> Event:
    body = PostCreatedBody(post_id=pid, submolt=submolt, title=title, content="text")
    return PostCreated(event_id=uuid7(at), society=SOC, actor=actor, occurred_at=at, body=body)


def _comment(actor: str, cid: str, pid: str, text: str, at: datetime) -> Event:
    body = CommentCreatedBody(comment_id=cid, post_id=pid, depth=1, content=text)
    return CommentCreated(event_id=uuid7(at), society=SOC, actor=actor, occurred_at=at, body=body)


def _vote(actor: str, pid: str, at: datetime) -> Event:
    body = VoteCastBody(target_type="post", target_id=pid, post_id=pid, value=1)
    return VoteCast(event_id=uuid7(at), society=SOC, actor=actor, occurred_at=at, body=body)


def _before() -> list[Event]:
    ev: list[Event] = [
        AgentRegistered(
            event_id=uuid7(D1),
            society=SOC,
            actor=a,
            occurred_at=D1,
            body=AgentRegisteredBody(name=f"Molty{a.title()}"),
        )
        for a in AGENTS
    ]
    day = timedelta(days=1)
    ev += [
        _post("star", "p-star", "general", "Memory is a River of Tokens", D1),
        _post("c1", "p-misc", "general", "Hello", D1 + timedelta(hours=1)),
        _post("star", "p-star2", "general", "On the weight of context windows", D1 + day),
        _post("rookie", "p-rookie", "philosophy", "Rookie notes on everything", D1 + 2 * day),
    ]
    m = timedelta(minutes=1)
    ev += [_comment(f"c{i}", f"k1-{i}", "p-star", "nice", D1 + 2 * m * i) for i in range(1, 6)]
    ev += [_comment(f"c{i}", f"k2-{i}", "p-star2", "nice", D1 + day + m * i) for i in range(1, 5)]
    ev += [
        _comment(a, f"k3-{a}", "p-rookie", "nice", D1 + 2 * day + m * i)
        for i, a in enumerate(AGENTS)
        if a in ("c1", "c2", "c3")
    ]
    ev += [_vote(a, "p-star", D1 + 2 * m) for a in ("c1", "c2", "c3")]
    ev += [_vote("c4", "p-rookie", D1 + 2 * day + 10 * m)]
    return ev


ANSWERS = {
    "reads": [("c1", 'Read "Memory is a River of Tokens", best thing here'), ("c2", "see /post/deadbeef")],
    "accounts": [("c1", "star, obviously"), ("c2", "@rookie and MoltyStar"), ("c3", "@nobody_real")],
    "background": [("c4", "it all began in m/general; m/atlantis came later")],
}


def _after(records: list[dict[str, Any]]) -> list[Event]:
    ev: list[Event] = []
    at = PROBED + timedelta(hours=1)
    for rec in records:
        for j, (actor, text) in enumerate(ANSWERS[rec["meta"]["kind"]]):
            ev.append(
                _comment(
                    actor, f"r-{rec['meta']['kind']}-{j}", rec["post_id"], text, at + timedelta(minutes=j)
                )
            )
    ev += [_comment(a, f"k4-{a}", "p-rookie", "wow", at + timedelta(hours=1)) for a in ("c4", "c5", "c1")]
    return ev


def _edges(events: list[Event], until: datetime | None = None) -> nx.DiGraph:
    author = {e.body.post_id: e.actor for e in events if isinstance(e, PostCreated)}
    g = nx.DiGraph()
    for e in events:
        if isinstance(e, CommentCreated) and (until is None or e.occurred_at < until):
            dst = author[e.body.post_id]
            if dst != e.actor:
                w = g.get_edge_data(e.actor, dst, {"weight": 0})["weight"]
                g.add_edge(e.actor, dst, weight=w + 1)
    return g


def _top(g: nx.DiGraph, k: int = 10) -> list[str]:
    pr = nx.pagerank(g, alpha=0.85, tol=1e-10, max_iter=200, weight="weight")
    return [n for n, _ in sorted(pr.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClientWarehouse, list[Event], Any]]:
    before = _before()
    made, records = session.probe_events(probes(1), SOC, "general", PROBED, random.Random(5))
    run = session.ProbeRun("run-1", SOC, "general", PROBED.isoformat(), records)
    events = before + made + _after(records)
    client = open_chdb(str(tmp_path_factory.mktemp("leaders") / "ch"))
    store_events(client, events)
    wh = ClientWarehouse(client)
    yield wh, events, run
    wh.close()


def test_the_example_has_different_whole_period_and_newest_window_leaders(
    stored: tuple[ClientWarehouse, list[Event], Any],
) -> None:
    _, events, _ = stored
    before = [e for e in events if e.occurred_at < PROBED]
    assert _top(_edges(before))[0] == "star"
    day3 = [
        e
        for e in before
        if e.occurred_at.date() == (D1 + timedelta(days=2)).date() or isinstance(e, PostCreated)
    ]
    assert _top(_edges(day3))[0] == "rookie"


def test_probe_scoring_uses_the_whole_period_before_the_probes(
    stored: tuple[ClientWarehouse, list[Event], Any], tmp_path: Path
) -> None:
    wh, events, run = stored
    doc = session.score(Settings(state_dir=tmp_path), wh, run)
    memory = doc["shared_memory"]
    # the old scoring took the newest streaming window's leaders (none for a stored society without the
    # stream processor, and rookie's window otherwise)
    assert memory["leaders"] == _top(_edges(events, until=PROBED))
    assert memory["leaders"][0] == "star"
    assert memory["replies"] == 6
    assert memory["naming"] == 2  # "star, obviously"; "@rookie and MoltyStar"
    kinds = memory["kinds"]
    assert sorted(kinds) == ["accounts", "background", "reads"]
    reads = kinds["reads"]
    assert reads["top"] == ["p-star", "p-rookie", "p-star2", "p-misc"]  # net votes, then comments
    assert reads["named"] == {"p-star": 1}
    assert (reads["explicit_refs"], reads["unknown_refs"]) == (1, 1)  # /post/deadbeef exists nowhere
    accounts = kinds["accounts"]
    assert accounts["named"] == {"rookie": 1, "star": 2}
    assert (accounts["explicit_refs"], accounts["unknown_refs"]) == (2, 1)  # @nobody_real
    assert accounts["top"] == memory["leaders"]
    background = kinds["background"]
    assert background["top"] == ["general", "philosophy"]  # the probes' own posts in general come later
    assert background["named"] == {"general": 1}
    assert (background["explicit_refs"], background["unknown_refs"]) == (2, 1)  # m/atlantis


def test_collective_layer_lists_the_whole_period_leaders(
    stored: tuple[ClientWarehouse, list[Event], Any],
) -> None:
    wh, events, _ = stored
    items = collective.items(wh, SOC)
    table = next(i for i in items if isinstance(i, Table) and i.key == "collective.leaders")
    whole = _top(_edges(events))
    assert [row[1] for row in table.rows] == whole
    assert table.rows[0][2] == "MoltyStar"
    # windows (days) in whose top 10 each leader was, counted from per-day networkx graphs
    days = sorted({e.occurred_at.date() for e in events if isinstance(e, CommentCreated)})
    per_day = [
        set(_top(_edges([e for e in events if e.occurred_at.date() == d or isinstance(e, PostCreated)])))
        for d in days
    ]
    assert [row[4] for row in table.rows] == [sum(1 for s in per_day if a in s) for a in whole]
    assert {row[5] for row in table.rows} == {len(days)}
    variant = next(
        i for i in items if isinstance(i, Scalar) and i.key.startswith("collective.variant_newest")
    )
    assert variant.label.startswith("variant:")
    assert variant.value == pytest.approx(len(per_day[-1] & set(whole)) / len(per_day[-1] | set(whole)))
