"""Tier I questions of any length are posted (the Superminds Test posts each question verbatim): the
question reaches the stored post whole, and the post passes the event contract."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import orjson

from molt_society.probes.session import probe_events
from molt_society.probes.tasks import TITLE_MAX, Question, load_questions, tier1
from molt_society.schemas.events import PostCreated

LONG = (
    "Consider a closed, orientable surface S of genus g embedded in R^3, together with a smooth tangent "
    "vector field V on S whose zeros are all isolated and non-degenerate. Suppose that V has exactly "
    "k sources, m sinks and the remaining zeros are saddles. Using the Poincare-Hopf theorem and the "
    "relation between the Euler characteristic and the genus, determine the number of saddle points of "
    "V as a function of g, k and m. Answer with a formula."
)


def test_a_question_longer_than_280_characters_is_posted_whole(tmp_path: Path) -> None:
    assert len(LONG) > 400
    f = tmp_path / "q.jsonl"
    f.write_text(orjson.dumps({"question": LONG, "answer": "k + m + 2g - 2", "category": "Math"}).decode())
    (q,) = load_questions(f)  # before: "the question is longer than 280 characters"
    assert q == Question(LONG, "k + m + 2g - 2", "exactMatch", "Math")
    (probe,) = tier1([q])
    assert probe.content == LONG
    assert probe.task == LONG
    assert len(probe.title) <= TITLE_MAX
    assert probe.title.endswith("\u2026")
    assert LONG.startswith(probe.title[:-1])  # the title is the question's opening, cut at a word
    events, records = probe_events(
        [probe], "s", "general", datetime(2026, 2, 1, tzinfo=UTC), random.Random(1)
    )
    (post,) = [e for e in events if isinstance(e, PostCreated)]  # validated by the event contract
    assert post.body.content == LONG
    assert records[0]["question"] == LONG
    assert records[0]["answer_type"] == "exactMatch"


def test_short_and_multiline_questions() -> None:
    short, choice = tier1(
        [Question("What is 2+2?", "4"), Question("Pick one:\nA. x\nB. y", "B", "multipleChoice")]
    )
    assert (short.title, short.task) == ("What is 2+2?", "What is 2+2?")  # a short one is the title
    assert choice.content == "Pick one:\nA. x\nB. y"
    assert "\n" not in choice.title
    assert choice.answer_type == "multipleChoice"


def test_answer_type_is_checked(tmp_path: Path) -> None:
    import pytest

    from molt_society.probes.tasks import ProbeFileError

    f = tmp_path / "q.json"
    f.write_text('[{"question": "Q?", "answer": "A", "answer_type": "essay"}]')
    with pytest.raises(ProbeFileError, match="answer_type"):
        load_questions(f)
