"""Lexical turnover (view ``lexical_turnover_daily`` and the report's ``social.lexical_turnover``) on
hand-made corpora whose births and deaths per day are counted by hand.

The definition (socialization study): among n-grams used at least twice, an n-gram is born on the day of
its first use and dies on the day after its last use; the first day of the observation period censors
births and its last day censors deaths. A gap between two uses is no death.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from stored_events import open_chdb, store_events

from molt_society.report import social
from molt_society.report.model import Scalar
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.schemas.events import CommentCreated, CommentCreatedBody, Event
from molt_society.schemas.ids import uuid7

D0 = date(2026, 3, 1)
# day offset -> texts. Unigram occurrences: alpha 3 (days 0, 2), beta 2 (0, 1), gamma 1 (never counted),
# delta 2 (1, 2), epsilon 2 (2, 4), zeta 2 (4). Day 3 has no text.
HAND = {
    0: ["alpha beta", "Alpha gamma"],
    1: ["beta delta"],
    2: ["alpha delta", "epsilon"],
    4: ["epsilon zeta zeta"],
}
WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen", "ibis", "jay"]


def _events(society: str, corpus: dict[int, list[str]]) -> list[Event]:
    out: list[Event] = []
    for offset, texts in sorted(corpus.items()):
        for i, text in enumerate(texts):
            at = datetime(D0.year, D0.month, D0.day, 12, i, tzinfo=UTC) + timedelta(days=offset)
            body = CommentCreatedBody(
                comment_id=f"{society}-{offset}-{i}", post_id="p", depth=1, content=text
            )
            out.append(
                CommentCreated(event_id=uuid7(at), society=society, actor="x", occurred_at=at, body=body)
            )
    return out


def _random_corpus(seed: int) -> dict[int, list[str]]:
    rng = random.Random(seed)
    return {
        d: [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
        for d in range(8)
        if d not in (3, 6)  # two days without text
    }


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientWarehouse]:
    corpus = _random_corpus(3)
    events = _events("hand", HAND) + _events("fwd", corpus)
    events += _events("rev", {7 - d: texts for d, texts in corpus.items()})  # the same corpus, days reversed
    client = open_chdb(str(tmp_path_factory.mktemp("lex") / "ch"))
    store_events(client, events)
    w = ClientWarehouse(client)
    yield w
    w.close()


def _rows(wh: ClientWarehouse, society: str, n: int) -> list[tuple[Any, ...]]:
    return [
        tuple(r)
        for r in wh.query(
            "SELECT day, active, births, deaths, birth_rate, death_rate FROM lexical_turnover_daily "
            f"WHERE society = '{society}' AND n = {n} ORDER BY day"
        ).rows
    ]


def test_unigram_births_and_deaths_counted_by_hand(wh: ClientWarehouse) -> None:
    # active: day0 {alpha, beta}; day1 {beta, delta}; day2 {alpha, delta, epsilon}; day3 {}; day4 {epsilon,
    # zeta}. First uses after day 0: delta (1), epsilon (2), zeta (4). Last uses: beta 1 -> dies day 2;
    # alpha, delta 2 -> die day 3; epsilon, zeta 4 = the last day -> censored. alpha is absent on day 1 but
    # used again on day 2: not a death (the old definition counted it on day 1).
    want = [
        (D0, 2, None, None, None, None),
        (D0 + timedelta(1), 2, 1, 0, 1 / 2, 0 / 2),
        (D0 + timedelta(2), 3, 1, 1, 1 / 3, 1 / 2),
        (D0 + timedelta(3), 0, 0, 2, None, 2 / 3),
        (D0 + timedelta(4), 2, 1, 0, 1 / 2, None),  # the day before had nothing active: no death rate
    ]
    got = _rows(wh, "hand", 1)
    assert [r[:4] for r in got] == [w[:4] for w in want]
    for g, w in zip(got, want, strict=True):
        assert g[4:] == pytest.approx(w[4:])


def test_bigrams_used_once_never_count(wh: ClientWarehouse) -> None:
    # every bigram of HAND occurs once ("zeta zeta" too): nothing is eligible, every day has 0 active
    assert [r[1:4] for r in _rows(wh, "hand", 2)] == [(0, None, None)] + [(0, 0, 0)] * 4


def test_reversing_time_swaps_births_and_deaths(wh: ClientWarehouse) -> None:
    """Symmetry: with the days in reverse order, a first use becomes a last use, so the births of day t
    are the deaths of the mirrored day + 1, at both ends of the period and for every n."""
    births = deaths = 0
    for n in (1, 2, 3):
        fwd = {r[0]: r for r in _rows(wh, "fwd", n)}
        rev = {r[0]: r for r in _rows(wh, "rev", n)}
        assert sorted(fwd) == sorted(rev) == [D0 + timedelta(d) for d in range(8)]
        for t in range(1, 8):
            mirror = D0 + timedelta(7 - t + 1)
            assert fwd[D0 + timedelta(t)][2] == rev[mirror][3], (n, t)
            assert rev[D0 + timedelta(t)][2] == fwd[mirror][3], (n, t)
        births += sum(r[2] or 0 for r in fwd.values())
        deaths += sum(r[3] or 0 for r in fwd.values())
    assert births > 0  # the corpus has births and deaths to swap
    assert deaths > 0


def test_report_means_over_the_days_that_have_a_rate(wh: ClientWarehouse) -> None:
    items = {i.key: i for i in social.lexical_turnover(wh, "hand") if isinstance(i, Scalar)}
    assert items["lexical.birth_rate_n1"].value == pytest.approx((1 / 2 + 1 / 3 + 1 / 2) / 3)
    assert items["lexical.death_rate_n1"].value == pytest.approx((0 + 1 / 2 + 2 / 3) / 3)
    assert items["lexical.birth_rate_n2"].value is None
    assert items["lexical.birth_rate_n2"].reason
