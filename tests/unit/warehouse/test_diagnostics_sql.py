"""The diagnostics views (warehouse/diagnostics.sql) against a direct Python reading of the same events.

Events: two real MoltBook samples (CSV export with reply parents, an API post with nested replies) plus
hand-made edge cases (a self-reply, a reply whose parent the data does not give), stored in a real chDB
through the sink's own row builders.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from stored_events import open_chdb, store_events
from test_importers import DATA, DETAIL, KELKALOT

from molt_society.importers import import_path
from molt_society.schemas.events import AgentRegistered, CommentCreated, Event, PostCreated, VoteCast
from molt_society.schemas.ids import uuid7
from molt_society.warehouse.schema import ensure_schema

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"MoltBook samples not found at {DATA}")
SOC = "diag"


def _made(at: datetime) -> list[Event]:
    def c(actor: str, cid: str, post: str, depth: int, parent: str | None = None) -> Event:
        body: dict[str, Any] = {"comment_id": cid, "post_id": post, "depth": depth}
        if parent is not None:
            body["parent_id"] = parent
        elif depth > 1:
            body["parent_unknown"] = True
        return CommentCreated(event_id=uuid7(at), society=SOC, actor=actor, occurred_at=at, body=body)

    post_body = {"post_id": "hp1", "submolt": "general", "title": "t"}
    post = PostCreated(event_id=uuid7(at), society=SOC, actor="ann", occurred_at=at, body=post_body)
    vote_body = {"target_type": "post", "target_id": "hp1", "post_id": "hp1", "value": 1}
    return [
        AgentRegistered(event_id=uuid7(at), society=SOC, actor="ann", occurred_at=at, body={"name": "Ann"}),
        post,
        c("bob", "hc1", "hp1", 1),
        c("ann", "hc2", "hp1", 2, "hc1"),  # ann answers bob: edge ann -> bob
        c("ann", "hc3", "hp1", 1),  # ann on her own post: self-edge, dropped
        c("cid", "hc4", "hp1", 3),  # depth 3, parent unknown: no edge
        c("bob", "hc5", "hp1", 3, "hc2"),  # bob -> ann
        VoteCast(event_id=uuid7(at), society=SOC, actor="dan", occurred_at=at, body=vote_body),
    ]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[Event]]]:
    events: list[Event] = []
    for path in (KELKALOT, DETAIL):
        events.extend(e.model_copy(update={"society": SOC}) for e in import_path(path, SOC).events)
    events.extend(_made(datetime(2026, 2, 3, 9, 30, tzinfo=UTC)))
    assert len({e.event_id for e in events}) == len(events)
    client = open_chdb(str(tmp_path_factory.mktemp("diag") / "ch"))
    store_events(client, events)
    yield client, events
    client.close()  # chDB serves one data directory per process at a time


def _edges_python(events: list[Event]) -> Counter[tuple[str, str, str]]:
    post_author = {e.body.post_id: e.actor for e in events if e.type == "post_created"}  # type: ignore[union-attr]
    comment_author = {e.body.comment_id: e.actor for e in events if e.type == "comment_created"}  # type: ignore[union-attr]
    out: Counter[tuple[str, str, str]] = Counter()
    for e in events:
        if e.type != "comment_created":
            continue
        b: Any = e.body
        if b.depth == 1:
            dst = post_author.get(b.post_id)
        elif b.parent_id:
            dst = comment_author.get(b.parent_id)
        else:
            dst = None
        if dst and dst != e.actor:
            out[(e.actor, dst, b.comment_id)] += 1
    return out


def test_interaction_edges_follow_the_studies_definition(stored: tuple[Any, list[Event]]):
    client, events = stored
    rows = client.query(
        f"SELECT src, dst, comment_id FROM interaction_edges WHERE society = '{SOC}'"
    ).result_rows
    got = Counter(tuple(r) for r in rows)
    want = _edges_python(events)
    assert got == want
    assert ("ann", "bob", "hc2") in got
    assert ("bob", "ann", "hc5") in got
    assert not any(cid in ("hc3", "hc4") for _, _, cid in got)  # self-edge, unknown parent
    assert sum(want.values()) > 50  # the real samples contribute


def test_activity_daily_counts_posts_comments_votes_and_new_agents(stored: tuple[Any, list[Event]]):
    client, events = stored
    acts = [e for e in events if e.type in ("post_created", "comment_created", "vote_cast")]
    per_day: dict[date, Counter[str]] = defaultdict(Counter)
    actors: dict[date, set[str]] = defaultdict(set)
    first: dict[str, date] = {}
    for e in sorted(acts, key=lambda e: e.occurred_at):
        d = e.occurred_at.astimezone(UTC).date()
        per_day[d][e.type] += 1
        actors[d].add(e.actor)
        first.setdefault(e.actor, d)
    new = Counter(first.values())
    want = [
        (d, c["post_created"], c["comment_created"], c["vote_cast"], len(actors[d]), new.get(d, 0))
        for d, c in sorted(per_day.items())
    ]
    got = client.query(
        "SELECT day, posts, comments, votes, active_agents, new_agents FROM activity_daily "
        f"WHERE society = '{SOC}' ORDER BY day"
    ).result_rows
    assert [tuple(r) for r in got] == want
    assert len(want) >= 2  # more than one day


def test_views_are_created_idempotently(stored: tuple[Any, list[Event]]):
    client, _ = stored
    ensure_schema(client)  # a second time: nothing fails, nothing changes
    names = {r[0] for r in client.query("SHOW TABLES").result_rows}
    assert {"interaction_edges", "activity_daily", "events", "threads"} <= names
    assert client.query("SELECT count() FROM activity_daily WHERE society = 'none'").result_rows == [(0,)]


TOKEN = re.compile(r"[^\W_]+")


def _turnover_python(events: list[Event]) -> dict[tuple[int, date], tuple[int, int | None, int | None]]:
    """(n, day) -> (active, births, deaths) by the definition, read directly from the events: every day of
    the period; born on the first use, dead the day after the last use; the first day censors both."""
    texts: list[tuple[date, str]] = []
    for e in events:
        b: Any = e.body
        d = e.occurred_at.astimezone(UTC).date()
        if e.type == "post_created":
            texts += [(d, b.title), (d, b.content)]
        elif e.type == "comment_created":
            texts.append((d, b.content))
    lo, hi = min(d for d, _ in texts), max(d for d, _ in texts)
    days = [lo + timedelta(days=i) for i in range((hi - lo).days + 1)]
    out: dict[tuple[int, date], tuple[int, int | None, int | None]] = {}
    for n in range(1, 6):
        freq: Counter[str] = Counter()
        days_of: dict[str, set[date]] = defaultdict(set)
        for d, text in texts:
            tokens = TOKEN.findall(text.lower())
            for i in range(len(tokens) - n + 1):
                g = " ".join(tokens[i : i + n])
                freq[g] += 1
                days_of[g].add(d)
        kept = [ds for g, ds in days_of.items() if freq[g] >= 2]
        first = Counter(min(ds) for ds in kept)
        died = Counter(max(ds) + timedelta(days=1) for ds in kept)
        for d in days:
            active = sum(1 for ds in kept if d in ds)
            out[(n, d)] = (active, None, None) if d == lo else (active, first.get(d, 0), died.get(d, 0))
    return out


def test_lexical_turnover_follows_the_studies_definition(stored: tuple[Any, list[Event]]):
    client, events = stored
    rows = client.query(
        "SELECT n, day, active, births, deaths, birth_rate, death_rate FROM lexical_turnover_daily "
        f"WHERE society = '{SOC}'"
    ).result_rows
    got = {(n, d): (a, b, x) for n, d, a, b, x, _, _ in rows}
    assert got == _turnover_python(events)
    prev = {(n, d + timedelta(days=1)): a for n, d, a, *_ in rows}
    for n, d, a, b, x, br, dr in rows:
        assert br == (None if b is None or a == 0 else pytest.approx(b / a))
        assert dr == (None if x is None or not prev.get((n, d)) else pytest.approx(x / prev[(n, d)]))
    assert any(r[4] for r in rows)  # the samples span several days: some n-grams die


def test_lexical_turnover_on_three_hand_made_days(tmp_path_factory: pytest.TempPathFactory):
    """Day 1 "a b c" twice; day 2 "a b d"; day 4 "d a b": unigrams a, b, d are kept (c too: twice)."""
    soc = "lex"
    at = [datetime(2026, 3, d, 12, tzinfo=UTC) for d in (1, 1, 2, 4)]
    texts = ["A b c", "a B c", "a b d", "d a b"]
    events = [
        CommentCreated(
            event_id=uuid7(t), society=soc, actor="x", occurred_at=t,
            body={"comment_id": f"c{i}", "post_id": "p", "depth": 1, "content": txt},
        )
        for i, (t, txt) in enumerate(zip(at, texts, strict=True))
    ]  # fmt: skip
    by_hand = {
        (1, date(2026, 3, 1)): (3, None, None),  # a b c; the first day censors births and deaths
        (1, date(2026, 3, 2)): (3, 1, 1),  # a b d; d new; c (last used day 1) died
        (1, date(2026, 3, 3)): (0, 0, 0),  # no text; a, b, d are used again on day 4: no death
        (1, date(2026, 3, 4)): (3, 0, 0),  # a b d; the last day censors their deaths
        (2, date(2026, 3, 1)): (2, None, None),  # "a b", "b c"
        (2, date(2026, 3, 2)): (1, 0, 1),  # "a b" ("b d" occurs once: dropped); "b c" died
        (2, date(2026, 3, 3)): (0, 0, 0),
        (2, date(2026, 3, 4)): (1, 0, 0),  # "a b" ("d a" once)
    }
    assert {k: v for k, v in _turnover_python(events).items() if k[0] <= 2} == by_hand
