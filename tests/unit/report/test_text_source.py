"""Who wrote a society's texts (report.text_source), and what the report says when the stochastic brain did.

Four societies in a real chDB: one whose agents (an ``agents_joined`` cohort) are mostly stochastic, one
mostly of LLM agents, one imported (``agent_registered`` with the importers' brain) and an empty one; a few
texts by actors no event registered in each. The counts are checked against a count of the inserted
events in Python; the report of the synthetic society must say so in its text-reading sections and show no
published value there, while its structural sections (threads, posting rhythm, Superminds depth) and the
LLM society keep theirs.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from stored_events import open_chdb, store_events

from molt_society.importers.builder import IMPORTED_BRAIN
from molt_society.report import superminds
from molt_society.report.build import build_report
from molt_society.report.model import Report, Scalar, Section, Table
from molt_society.report.published import PUBLISHED
from molt_society.report.render import render_html
from molt_society.report.text_source import TEXT_SECTIONS, TextSource, apply_caveat, note, text_source
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.report.write import report_json
from molt_society.schemas.events import AgentRegistered, AgentsJoined, CommentCreated, Event, PostCreated
from molt_society.schemas.ids import uuid7

SYN, LLM, IMP, EMPTY = "synth", "llmsoc", "imported", "nobody"
T0 = datetime(2026, 3, 1, tzinfo=UTC)
WORDS = [
    "agent",
    "memory",
    "token",
    "context",
    "loop",
    "prompt",
    "shell",
    "python",
    "model",
    "weight",
    "vector",
    "graph",
    "signal",
    "noise",
]
SECTIONS = {"threads", "lexical", "cascades", "cooperation", "patterns", "superminds"}
TEXT_KEYS = {"lexical", "cascades", "cooperation"}  # whole sections that read the texts (embed=False here)


def _society(society: str, brains: dict[str, str], joined: bool, seed: int) -> list[Event]:
    """Agents with ``brains`` (registered as a cohort, or one ``agent_registered`` each) and two actors no
    event registers; posts and comments over three days, every author writing."""
    rng = random.Random(seed)
    agents = list(brains)
    events: list[Event] = []
    if joined:
        members = [
            {"agent_id": a, "name": a, "brain": b, "model": "m1" if b == "llm" else None}
            for a, b in brains.items()
        ]
        events.append(
            AgentsJoined(
                event_id=uuid7(T0), society=society, actor=agents[0], occurred_at=T0, body={"agents": members}
            )
        )
    else:
        events += [
            AgentRegistered(
                event_id=uuid7(T0), society=society, actor=a, occurred_at=T0, body={"name": a, "brain": b}
            )
            for a, b in brains.items()
        ]
    authors = [*agents, "ghost1", "ghost2"]
    posts: list[str] = []
    comments: dict[str, list[str]] = {}
    for n in range(150):
        at = T0 + timedelta(days=n % 3, minutes=n * 7 + rng.randint(0, 5))
        actor = authors[n % len(authors)] if n < len(authors) else rng.choice(authors)
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
        if not posts or rng.random() < 0.35:
            pid = f"p{n}"
            body = {
                "post_id": pid,
                "submolt": "general",
                "title": f"how to fix {rng.choice(WORDS)}",
                "content": text,
            }
            events.append(
                PostCreated(event_id=uuid7(at), society=society, actor=actor, occurred_at=at, body=body)
            )
            posts.append(pid)
            comments[pid] = []
            continue
        pid = rng.choice(posts[-10:])
        cbody: dict[str, Any] = {"comment_id": f"c{n}", "post_id": pid, "depth": 1, "content": text}
        if comments[pid] and rng.random() < 0.4:
            cbody.update(depth=2, parent_id=rng.choice(comments[pid]))
        events.append(
            CommentCreated(event_id=uuid7(at), society=society, actor=actor, occurred_at=at, body=cbody)
        )
        comments[pid].append(f"c{n}")
    return events


def _brains(prefix: str, n: int, brain: str) -> dict[str, str]:
    return {f"{prefix}{i}": brain for i in range(n)}


def _expected(events: list[Event]) -> TextSource:
    """Texts by the brain of their author's registration, counted from the Python events."""
    brain: dict[str, str] = {}
    for e in events:
        if isinstance(e, AgentsJoined):
            brain.update({a.agent_id: a.brain for a in e.body.agents})
        elif isinstance(e, AgentRegistered):
            brain[e.actor] = e.body.brain
    by = Counter(brain.get(e.actor, "") for e in events if isinstance(e, PostCreated | CommentCreated))
    return TextSource(
        stochastic=by["stochastic"],
        llm=by["llm"],
        other=sum(v for k, v in by.items() if k not in ("stochastic", "llm")),
    )


Stored = tuple[ClientWarehouse, dict[str, list[Event]], dict[str, Report]]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stored]:
    by_society = {
        # mostly stochastic, one LLM agent among them
        SYN: _society(SYN, {**_brains("s", 9, "stochastic"), **_brains("l", 1, "llm")}, True, 1),
        # mostly LLM agents, one stochastic agent
        LLM: _society(LLM, {**_brains("l", 9, "llm"), **_brains("s", 1, "stochastic")}, True, 2),
        IMP: _society(IMP, _brains("u", 10, IMPORTED_BRAIN), False, 3),
        EMPTY: [],
    }
    client = open_chdb(str(tmp_path_factory.mktemp("text_source") / "ch"))
    store_events(client, [e for evs in by_society.values() for e in evs])
    wh = ClientWarehouse(client)
    with pytest.MonkeyPatch.context() as mp:  # no model server here: the judge's items say why not
        mp.setattr(superminds, "judge_config", lambda _s: "no model server in this test")
        reports = {soc: build_report(wh, soc, embed=False, only=SECTIONS) for soc in (SYN, LLM, IMP, EMPTY)}
    yield wh, by_society, reports
    client.close()


def _section(rep: Report, key: str) -> Section:
    found = [s for s in rep.sections if s.key == key]
    assert found, key
    assert found[0].error is None, (key, found[0].error)
    return found[0]


def _scalars(section: Section) -> list[Scalar]:
    return [i for i in section.items if isinstance(i, Scalar)]


def test_counts_equal_the_inserted_events(stored: Stored) -> None:
    wh, by_society, _ = stored
    for soc, events in by_society.items():
        expected = _expected(events)
        got = text_source(wh, soc)
        assert got == expected, soc
        assert got.total == sum(isinstance(e, PostCreated | CommentCreated) for e in events)
    syn, llm, imp = (text_source(wh, s) for s in (SYN, LLM, IMP))
    assert syn.stochastic
    assert syn.llm
    assert syn.other
    assert llm.stochastic
    assert llm.llm
    assert llm.other
    assert imp.other == imp.total > 0
    assert syn.synthetic_share == pytest.approx(syn.stochastic / syn.total)
    assert (syn.synthetic, llm.synthetic, imp.synthetic) == (True, False, False)
    assert text_source(wh, EMPTY) == TextSource()
    assert not TextSource().synthetic
    assert TextSource(stochastic=1, other=1).synthetic  # half is enough


def test_settings_carry_the_text_source(stored: Stored) -> None:
    wh, _, reports = stored
    for soc, rep in reports.items():
        src = text_source(wh, soc)
        assert rep.settings["text_source"] == src.to_dict()
    assert reports[SYN].settings["text_source"]["synthetic"] is True


def test_synthetic_text_sections_have_a_note_and_no_published_value(stored: Stored) -> None:
    wh, _, reports = stored
    rep = reports[SYN]
    src = text_source(wh, SYN)
    stripped = 0
    for key in TEXT_KEYS:
        s = _section(rep, key)
        assert s.note == note(key, src)
        assert "stochastic brain" in s.note
        assert "no published value" in s.note
        assert _scalars(s), key
        for sc in _scalars(s):
            assert (sc.published, sc.published_source) == (None, None), sc.key
            stripped += sc.key in PUBLISHED
    assert stripped >= 5  # cascades.alpha, saturation.*, cooperation.*: values the table would have filled
    values = rep.scalars()
    assert values["cascades.count"].value is not None  # the numbers themselves are still computed
    share = f"{src.synthetic_share:.0%}"
    assert _section(rep, "lexical").note.startswith(f"{share} of this society's texts")  # type: ignore[union-attr]


def test_synthetic_mixed_sections_strip_only_the_text_items(stored: Stored) -> None:
    _, _, reports = stored
    rep = reports[SYN]
    threads = _section(rep, "threads")
    assert threads.note is None
    kept = [sc for sc in _scalars(threads) if sc.key in PUBLISHED]
    assert kept
    for sc in kept:
        assert (sc.published, sc.published_source) == PUBLISHED[sc.key]

    patterns = _section(rep, "patterns")
    assert patterns.note is not None
    assert "clone-swarm" in patterns.note
    clones = [sc for sc in _scalars(patterns) if sc.key.startswith("clones.")]
    assert clones
    assert all(sc.published is None and sc.published_source is None for sc in clones)
    rhythm = [sc for sc in _scalars(patterns) if sc.key in PUBLISHED and not sc.key.startswith("clones.")]
    assert {sc.key for sc in rhythm} >= {"rhythm.cv_median", "rhythm.autonomous_share"}
    for sc in rhythm:
        assert (sc.published, sc.published_source) == PUBLISHED[sc.key]

    sm = _section(rep, "superminds")
    assert sm.note is not None
    assert "judge" in sm.note
    values = {sc.key: sc for sc in _scalars(sm)}
    assert values["superminds.depth_8plus"].published == 1.5
    assert values["superminds.repliers_8plus"].published == 9.8
    judged = [k for k in values if k.startswith("superminds.reply_quality")]
    assert judged
    assert all(values[k].published is None for k in judged)
    published = next(i for i in sm.items if isinstance(i, Table) and i.key == "superminds.published")
    assert superminds.REPLY_RATINGS_ROW not in [r[0] for r in published.rows]
    assert len(published.rows) == len(superminds.published_table().rows) - 1


def test_llm_and_imported_societies_keep_every_published_value(stored: Stored) -> None:
    _, _, reports = stored
    syn = reports[SYN].scalars()
    for soc in (LLM, IMP, EMPTY):
        rep = reports[soc]
        assert all(s.note is None for s in rep.sections), soc
        values = rep.scalars()
        for key, (value, source) in PUBLISHED.items():
            if key in values:
                assert (values[key].published, values[key].published_source) == (value, source), (soc, key)
        assert values["superminds.depth_8plus"].published == 1.5
        published = next(
            i
            for s in rep.sections
            for i in s.items
            if isinstance(i, Table) and i.key == "superminds.published"
        )
        assert superminds.REPLY_RATINGS_ROW in [r[0] for r in published.rows]
    # the same keys that the synthetic society shows without a published value
    llm = reports[LLM].scalars()
    for key in ("cascades.alpha", "cooperation.events", "saturation.cox_hazard_ratio"):
        assert llm[key].published is not None
        assert syn[key].published is None


def test_note_is_rendered_escaped_and_in_the_json(stored: Stored) -> None:
    _, _, reports = stored
    rep = reports[SYN]
    html = render_html([rep])
    lexical = _section(rep, "lexical")
    assert lexical.note is not None
    assert lexical.note.replace("'", "&#x27;") in html
    assert html.count('class="notice caveat"') == sum(1 for s in rep.sections if s.note)
    doc = orjson.loads(report_json([rep]))
    notes = {s["key"]: s["note"] for s in doc["reports"][0]["sections"]}
    assert notes["lexical"] == lexical.note
    assert notes["threads"] is None
    # a comparison names the society whose section carries the note
    both = render_html([rep, reports[LLM]])
    assert f"<strong>{SYN}:</strong> " in both

    hostile = Section("lexical", "L", "", [Scalar("lexical.x", "x", 1.0, published=2.0)])
    hostile.note = '<script>alert("x")</script> & <b>'
    page = render_html([Report("r", "t", 1, [hostile])])
    assert "<script>alert" not in page
    assert "<b>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;" in page


def test_caveat_policy() -> None:
    src = TextSource(stochastic=995, llm=5)
    assert note("lexical", src).startswith("99.5% of this society's texts")
    assert note("lexical", TextSource(stochastic=1)).startswith("100% ")
    text_sections = {"lexical", "semantic", "individual", "cascades", "cooperation", "patterns", "superminds"}
    assert set(TEXT_SECTIONS) == text_sections
    for key in ("activity", "threads", "collective", "roles", "agreement"):
        sc = Scalar(f"{key}.x", "x", 1.0, published=2.0, published_source="p")
        s = Section(key, key, "", [sc])
        apply_caveat(s, src)
        assert s.note is None
        assert (sc.published, sc.published_source) == (2.0, "p")
    sc = Scalar("semantic.x", "x", 1.0, published=2.0, published_source="p")
    s = Section("semantic", "S", "", [sc])
    apply_caveat(s, TextSource(stochastic=1, llm=2))  # mostly LLM text: unchanged
    assert s.note is None
    assert sc.published == 2.0
    apply_caveat(s, TextSource(stochastic=2, llm=1))
    assert s.note is not None
    assert (sc.value, sc.published, sc.published_source) == (1.0, None, None)
