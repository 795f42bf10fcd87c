"""Cooperation events as the public Molt Dynamics code defines them (issue 14, defect 5).

Hand-made threads with known answers, stored in a real chDB: which threads are events, which comment is
the extracted solution, its quality, the success rate and the tests against 0.5. Expected values are
worked out by hand below (and the p-value from the t distribution directly), never read from the code.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from scipy import stats
from stored_events import open_chdb, store_events

from molt_society.report import cooperation
from molt_society.report.model import Scalar, Table
from molt_society.report.published import PUBLISHED, annotate
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.schemas.events import CommentCreated, Event, PostCreated
from molt_society.schemas.ids import uuid7

SOC = "coop"
T0 = datetime(2026, 2, 1, tzinfo=UTC)


class Threads:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.n = 0
        self.hour = 0

    def thread(
        self,
        title: str,
        body: str,
        comments: list[tuple[str, str]],
        minutes: float,
        *,
        hour: int | None = None,
        submolt: str = "general",
    ) -> str:
        """A post by "op" and ``comments`` (author, text), spread evenly over ``minutes``; posted 2 hours
        after the last thread, or at ``hour``."""
        self.n += 1
        if hour is None:
            self.hour += 2
        start = T0 + timedelta(hours=self.hour if hour is None else hour)
        pid = f"p{self.n}"
        post = {"post_id": pid, "submolt": submolt, "title": title, "content": body}
        self.events.append(
            PostCreated(event_id=uuid7(start), society=SOC, actor="op", occurred_at=start, body=post)
        )
        for k, (who, text) in enumerate(comments):
            at = start + timedelta(minutes=minutes * (k + 1) / len(comments))
            body_c: dict[str, Any] = {"comment_id": f"{pid}c{k}", "post_id": pid, "depth": 1, "content": text}
            self.events.append(
                CommentCreated(event_id=uuid7(at), society=SOC, actor=who, occurred_at=at, body=body_c)
            )
        return pid


def _society() -> tuple[list[Event], dict[str, float]]:
    """The threads and, for each event, the quality of its solution worked out by hand."""
    t = Threads()
    expected: dict[str, float] = {}
    # 1: the solution is the code comment (the last with a backtick); code + # + assert + balanced = 1.0
    p = t.thread(
        "Bug in my parser",
        "It breaks",
        [
            ("a", "hmm"),
            ("b", "```py\n# fix\nassert f(1) == 2\n```"),
            ("c", "ok"),
            ("a", "looks right"),
            ("b", "great"),
            ("d", "done"),
        ],
        45,
    )
    expected[p] = 1.0
    # 2: solution "`x`" (inline code + balanced = 0.5): exactly 0.5 is not a success
    p = t.thread("Help", "", [("a", "`x`"), ("b", "no"), ("c", "ok"), ("a", "fine"), ("b", "yes")], 60)
    expected[p] = 0.5
    # 3: no backtick anywhere: the last comment; "//" counts as a comment marker, "expect" as a test,
    #    brackets balanced: 0.2 + 0.3 + 0.2 = 0.7 without any code
    p = t.thread(
        "API question", "", [("a", "x"), ("b", "y"), ("c", "z"), ("a", "w"), ("b", "I expect it // ok")], 40
    )
    expected[p] = 0.7
    # 4: the thread has tests and comments, but the solution is the last comment "thanks (": unbalanced,
    #    nothing else = 0.0 (the whole thread would score 0.3 + 0.2 = 0.5 with its "# note" and "test")
    p = t.thread(
        "Debug this",
        "",
        [("a", "assert it with a test # note"), ("b", "b"), ("c", "c"), ("a", "d"), ("b", "thanks (")],
        90,
    )
    expected[p] = 0.0
    # 5: the only keyword is inside a word ("Prefix" has "fix"): an event for the public code's substring
    #    test (not for the word-start variant); solution "ok": balanced only = 0.2
    p = t.thread("Prefix notes", "hello", [("a", "a"), ("b", "b"), ("c", "c"), ("a", "d"), ("b", "ok")], 31)
    expected[p] = 0.2
    # not events: 4 comments; 29 minutes; 2 participants (op + a); no keyword
    t.thread("Bug", "", [("a", "`x`"), ("b", "b"), ("c", "c"), ("a", "d")], 60)
    t.thread("Bug", "", [("a", "`x`"), ("b", "b"), ("c", "c"), ("a", "d"), ("b", "e")], 29)
    t.thread("Bug", "", [("a", "`x`"), ("op", "b"), ("a", "c"), ("op", "d"), ("a", "e")], 60)
    t.thread(
        "Sunny day", "hello", [("a", "nice"), ("b", "cool"), ("c", "wow"), ("a", "yay"), ("b", "ok")], 60
    )
    # single-agent attempts (nobody but "op" writes; the events above are at hours 2, 4, 6, 8 and 10):
    # hour 3: the body "`a`" (code + balanced = 0.5)
    t.thread("Bug", "`a`", [], 0, hour=3)
    # hour 9: no backtick: the author's last text, its own comment (# + assert + balanced = 0.7)
    t.thread("It fails", "see below", [("op", "# note\nassert ok")], 10, hour=9)
    # hour 5, another submolt: 0.8 (code + test + balanced); never the match of a "general" event
    t.thread("Crash", "```py\nassert x\n```", [], 0, hour=5, submolt="other")
    # not scored (empty attempt), and not technical: neither is ever a match
    t.thread("Help", "", [], 0, hour=7)
    t.thread("Sunny", "nice day", [], 0, hour=11)
    return t.events, expected


SINGLE_AGENT = {"general": [(3, 0.5), (9, 0.7)], "other": [(5, 0.8)]}  # submolt: (hour, quality)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClientWarehouse, dict[str, float]]]:
    events, expected = _society()
    client = open_chdb(str(tmp_path_factory.mktemp("coop") / "ch"))
    store_events(client, events)
    yield ClientWarehouse(client), expected
    client.close()


def test_solution_quality_follows_the_public_assessor() -> None:
    q = cooperation.assess_solution
    assert q("```py\n# fix\nassert f(1) == 2\n```").quality == pytest.approx(1.0)
    assert q("`x`") == cooperation.SolutionScore(True, False, False, True)
    assert q("see https://example.org").has_comments  # the code's "//.*" matches a URL
    assert q("Contest").has_tests  # "test" anywhere, case-folded
    assert not q("([)]").syntax_valid
    assert q("([]{})").syntax_valid
    assert not q("(").syntax_valid
    assert q("plain words").quality == pytest.approx(0.2)


def test_events_and_solutions_match_the_hand_count(stored: tuple[ClientWarehouse, dict[str, float]]) -> None:
    wh, expected = stored
    rows = wh.query(f"SELECT post_id, solution FROM cooperation_md_events WHERE society = '{SOC}'").rows
    got = {str(p): cooperation.assess_solution(str(s)).quality for p, s in rows}
    assert got == pytest.approx(expected)


def test_published_statistics_against_hand_values(stored: tuple[ClientWarehouse, dict[str, float]]) -> None:
    wh, expected = stored
    items = cooperation.items(wh, SOC)
    s = {i.key: i for i in items if isinstance(i, Scalar)}
    scores = sorted(expected.values())  # 0.0, 0.2, 0.5, 0.7, 1.0
    n, mean = 5, 2.4 / 5
    sd = math.sqrt(sum((x - mean) ** 2 for x in scores) / (n - 1))  # sqrt(0.628 / 4)
    t = (mean - 0.5) / (sd / math.sqrt(n))
    assert s["cooperation.events"].value == 5
    assert s["cooperation.scored_events"].value == 5
    assert s["cooperation.success_rate"].value == pytest.approx(2 / 5)  # 1.0 and 0.7; 0.5 is not > 0.5
    assert s["cooperation.mean_quality"].value == pytest.approx(0.48)
    assert s["cooperation.variant_public_code.cohens_d"].value == pytest.approx(
        (0.48 - 0.5) / math.sqrt(0.157)
    )
    assert s["cooperation.p_value"].value == pytest.approx(2 * stats.t.sf(abs(t), n - 1))
    w = s["cooperation.wilcoxon_p"].value
    assert w is not None
    assert 0 < w <= 1
    flags = next(i for i in items if isinstance(i, Table) and i.key == "cooperation.solution_flags")
    # has_code: events 1, 2; has_comments: 1, 3; has_tests: 1, 3; syntax_valid: all but event 4
    assert flags.rows[0][3:] == pytest.approx([2 / 5, 2 / 5, 2 / 5, 4 / 5])


def _pooled_d(a: list[float], b: list[float]) -> float:
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    ss = sum((x - ma) ** 2 for x in a) + sum((x - mb) ** 2 for x in b)
    return (ma - mb) / math.sqrt(ss / (len(a) + len(b) - 2))


def test_d_against_a_matched_single_agent_baseline(stored: tuple[ClientWarehouse, dict[str, float]]) -> None:
    """Each event (hours 2-10, "general") is matched to the "general" attempt posted nearest in time:
    hour 2 -> 3, 4 -> 3, 6 -> 3 (a tie with 9: the earlier), 8 -> 9, 10 -> 9."""
    wh, expected = stored
    s = {i.key: i for i in cooperation.items(wh, SOC) if isinstance(i, Scalar)}
    events = [expected[f"p{k}"] for k in range(1, 6)]  # in time order: 1.0, 0.5, 0.7, 0.0, 0.2
    hours = [2, 4, 6, 8, 10]
    pool = SINGLE_AGENT["general"]
    matched = [min(pool, key=lambda hq, h=h: (abs(hq[0] - h), hq[0]))[1] for h in hours]
    assert matched == [0.5, 0.5, 0.5, 0.7, 0.7]
    assert s["cooperation.single_agent_threads"].value == 4  # hours 3, 9, 5 and the empty one at 7
    assert s["cooperation.single_agent_scored"].value == 3
    assert s["cooperation.matched_outside_submolt"].value == 0
    assert s["cooperation.baseline_mean_quality"].value == pytest.approx(sum(matched) / 5)
    assert s["cooperation.cohens_d"].value == pytest.approx(_pooled_d(events, matched))
    low, high = s["cooperation.cohens_d_ci_low"].value, s["cooperation.cohens_d_ci_high"].value
    assert low is not None
    assert high is not None
    assert low <= s["cooperation.cohens_d"].value <= high
    every = [q for attempts in SINGLE_AGENT.values() for _h, q in attempts]
    assert s["cooperation.variant_single_agent_all.cohens_d"].value == pytest.approx(_pooled_d(events, every))


def test_events_of_a_submolt_without_attempts_are_matched_across_submolts() -> None:
    at = cooperation.Attempt
    events = [at("e1", "x", 100.0, 1.0), at("e2", "general", 100.0, 0.5)]
    singles = [at("s1", "general", 40.0, 0.2), at("s2", "other", 90.0, 0.3), at("s3", "general", 160.0, 0.4)]
    matched, outside = cooperation.match(events, singles)
    assert [m.post_id for m in matched] == ["s2", "s1"]  # e2: 60 s either side, the earlier wins
    assert outside == 1
    assert cooperation.match(events, []) == ([], 0)


def test_published_values_sit_only_beside_the_published_definition(
    stored: tuple[ClientWarehouse, dict[str, float]],
) -> None:
    wh, _ = stored
    scalars = [annotate(i) for i in cooperation.items(wh, SOC) if isinstance(i, Scalar)]
    with_published = {s.key for s in scalars if s.published is not None}
    assert with_published == {
        "cooperation.events",
        "cooperation.success_rate",
        "cooperation.cohens_d",
    }
    assert PUBLISHED["cooperation.cohens_d"][0] == -0.88
    variants = [s for s in scalars if s.key.startswith("cooperation.variant_thread.")]
    assert variants
    assert all(s.label.startswith("variant: ") and s.published is None for s in variants)
    v = {s.key: s for s in variants}
    assert v["cooperation.variant_thread.events"].value == 4  # "Prefix" is no keyword at a word start


def test_fewer_than_five_scored_events_give_reasons() -> None:
    pub = cooperation.published_stats(3, [cooperation.assess_solution(x) for x in ("`a`", "b", "c")])
    assert pub.success_rate == 0.0
    assert isinstance(pub.t_p, str)
    assert isinstance(pub.cohens_d, str)
    same = cooperation.published_stats(6, [cooperation.assess_solution("`a`")] * 6)
    assert isinstance(same.cohens_d, str)
    assert "no spread" in same.cohens_d
    none = cooperation.published_stats(0, [])
    assert isinstance(none.success_rate, str)
    assert "no cooperation events" in none.success_rate
