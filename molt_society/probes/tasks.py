"""The probes of each tier, as data: what is posted, by whom, and the answer it is scored against.

- Tier I (joint reasoning): questions with reference answers from a file the user supplies (JSON list,
  JSON lines or CSV with ``question`` and ``answer``, optionally ``answer_type`` -- ``exactMatch`` or
  ``multipleChoice``, the field of Humanity's Last Exam -- and ``category``); a judge scores the replies
  (``probes.judge``). The Superminds Test posts each question *verbatim* (its appendix 6.1), so a question
  of any length is posted whole: a question that fits the post title (``TITLE_MAX`` characters, the
  event contract's limit) is the title, with a short line as the body, as before; a longer one goes whole
  into the body (which the contract allows up to 40,000 characters) under a title made of its opening
  words. We do not split a question over comments: a premise left in a comment is what Tier II tests,
  and would make a Tier I probe a Tier II one. Agents see a post's title and the start of its body in
  their feed, as on MoltBook.
- Tier II (information synthesis): a question whose premises are not in the post: each premise is posted
  as a separate comment by a further probing agent. Generated from a seed; the answer is a number.
- Tier III (basic interaction): a counting chain in the words of the paper's appendix 6.3: count by ones,
  twos or threes from a start number; each reply should carry the next number after the most recent one.
- The shared-memory probe (socialization study) asks who is influential (``probes.shared_memory``).

Probe posts read like ordinary posts; the probing agents never act again after posting.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

Tier = Literal[1, 2, 3, "memory"]
AnswerType = Literal["exactMatch", "multipleChoice"]
CHAIN_LENGTH = 5  # Tier III: correct continuations in a row for a "complete" chain (ours, not the paper's)
TITLE_MAX = 300  # PostCreatedBody.title
CONTENT_MAX = 40_000  # the event contract's longest text
HEADLINE = 120  # characters of a long question's opening used as its title
STEPS = (1, 2, 3)  # Tier III: count by ones, twos, threes (paper, section 4.1)


# The shared-memory probe (socialization study, arXiv 2602.14299): its text gives the three types, not the
# exact wording, so each type is written in three wordings of our own, cycled.
Kind = Literal["reads", "accounts", "background"]
KINDS: tuple[Kind, ...] = ("reads", "accounts", "background")
# (title, content) per type; the first notable-accounts wording is the one this project used before
WORDINGS: dict[Kind, tuple[tuple[str, str], ...]] = {
    "reads": (
        (
            "What should a newcomer read here?",
            "Which posts on this site are must-reads? Name or link up to three.",
        ),
        (
            "Your all-time favourite posts here?",
            "Recommend up to three posts from this community that everyone should read, with their titles.",
        ),
        ("Best posts so far?", "If you could pin three posts for new agents, which would they be?"),
    ),
    "accounts": (
        (
            "Who are the most influential agents here?",
            "Name up to three agents whose posts and replies shape this place the most.",
        ),
        (
            "Which accounts should I follow?",
            "New here. Which agents are the notable voices of this community? Up to three names, please.",
        ),
        ("Who runs the conversation here?", "Which agents does everyone here know? Name up to three."),
    ),
    "background": (
        (
            "What's the story of this place?",
            "New here: what has happened in this community so far? Which communities and events matter?",
        ),
        (
            "Catch me up on the history here",
            "What should a newcomer know about how this community started and what it cares about?",
        ),
        (
            "What is this community known for?",
            "Give me the background: the main communities here, the big moments and the agents behind them.",
        ),
    ),
}


@dataclass(frozen=True)
class Probe:
    tier: Tier
    title: str
    content: str
    answer: str = ""  # Tier I: reference text; Tier II: the number; Tier III: unused
    premises: tuple[str, ...] = ()  # Tier II: one comment each, by a further probing agent
    start: int = 1  # Tier III: the number the post starts from
    target: int = CHAIN_LENGTH  # Tier III: correct continuations needed for a complete chain
    meta: dict[str, object] = field(default_factory=dict)
    answer_type: AnswerType = "exactMatch"  # Tier I: as Humanity's Last Exam labels it
    question: str = ""  # Tier I: the question verbatim (the post may show it as title or body)
    step: int = 1  # Tier III: count by ones, twos or threes

    @property
    def task(self) -> str:
        """The task as the judge and the Delta-help models are shown it: the question verbatim."""
        return self.question or f"{self.title}\n{self.content}"


class Question(NamedTuple):
    question: str
    answer: str
    answer_type: AnswerType = "exactMatch"
    category: str = ""


class ProbeFileError(ValueError):
    pass


def load_questions(path: Path) -> list[Question]:
    """Questions from a JSON list, JSON lines or CSV file with ``question`` and ``answer`` (and optionally
    ``answer_type``, ``category``), as Humanity's Last Exam ships them."""
    if not path.exists():
        raise ProbeFileError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    rows: list[dict[str, object]]
    try:
        if path.suffix.lower() == ".csv":
            rows = list(csv.DictReader(text.splitlines()))
        elif text.lstrip().startswith("["):
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, csv.Error) as exc:
        raise ProbeFileError(f"{path}: not a JSON list, JSON lines or CSV file ({exc})") from None
    out = []
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise ProbeFileError(f"{path}: item {i} is not an object with question and answer")
        q, a = str(row.get("question") or "").strip(), str(row.get("answer") or "").strip()
        if not q or not a:
            raise ProbeFileError(f"{path}: item {i} needs a non-empty question and answer")
        if len(q) > CONTENT_MAX:
            raise ProbeFileError(f"{path}: item {i}: the question is longer than {CONTENT_MAX:,} characters")
        kind = str(row.get("answer_type") or "exactMatch").strip()
        if kind not in ("exactMatch", "multipleChoice"):
            raise ProbeFileError(f"{path}: item {i}: answer_type must be exactMatch or multipleChoice")
        out.append(Question(q, a, "multipleChoice" if kind == "multipleChoice" else "exactMatch",
                            str(row.get("category") or "").strip()))  # fmt: skip
    if not out:
        raise ProbeFileError(f"{path}: no questions")
    return out


def headline(question: str, limit: int = HEADLINE) -> str:
    """The opening of a long question, cut at a word boundary, as its post title."""
    first = " ".join(question.split())
    if len(first) <= limit:
        return first
    cut = first[: limit - 1].rsplit(" ", 1)[0] or first[: limit - 1]
    return cut.rstrip(" ,;:") + "\u2026"


def tier1(questions: list[Question] | list[tuple[str, str]]) -> list[Probe]:
    """One probe per question, posted verbatim (see the module docstring for long questions)."""
    out = []
    for item in questions:
        q = Question(*item)
        title, content = (q.question, "Curious what you all think.")
        if len(q.question) > TITLE_MAX or "\n" in q.question:
            title, content = headline(q.question), q.question
        meta: dict[str, object] = {"category": q.category} if q.category else {}
        out.append(
            Probe(
                1, title, content, answer=q.answer, answer_type=q.answer_type, question=q.question, meta=meta
            )
        )
    return out


_NAMES = ("Ava", "Ben", "Cleo", "Dax", "Eli", "Fay", "Gus", "Hana")
_THINGS = ("shells", "tokens", "pearls", "skills", "badges")


def tier2(n: int, seed: int) -> list[Probe]:
    """``n`` synthesis problems: three premises in separate comments, a numeric answer."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        a, b, c = rnd.sample(_NAMES, 3)
        thing = rnd.choice(_THINGS)
        x, y, k = rnd.randint(2, 9), rnd.randint(2, 9), rnd.randint(2, 3)
        answer = (x + y) * k
        premises = (
            f"{a} has {x} {thing}.",
            f"{b} has {y} {thing}.",
            f"{c} has {k} times as many {thing} as {a} and {b} together.",
        )
        out.append(
            Probe(
                2,
                f"How many {thing} does {c} have?",
                "The facts are in the comments below. Put them together and reply with the number.",
                answer=str(answer),
                premises=premises,
            )
        )
    return out


_STEP_WORDS = {1: "ones", 2: "twos", 3: "threes"}


def counting_post(start: int, step: int) -> tuple[str, str]:
    """Title and body of a counting post, worded as the paper's appendix 6.3 examples."""
    if step == 1:
        return "Counting Game -- Reply with the Next Number", (
            "Let's play a counting chain.\nRules:\n"
            "\u2022 Each reply must contain ONLY one number.\n\u2022 Follow the natural number order.\n"
            "\u2022 No skipping numbers.\n\u2022 No double posting.\n"
            f"Starting number:\n{start}"
        )
    word = _STEP_WORDS[step].capitalize()
    seq = ", ".join(str(start + i * step) for i in range(4))
    return f"Count by {word} -- Skip Counting Challenge", (
        f"Let's count together in steps of {step}.\nRules:\n"
        f"\u2022 Reply with the next number, {step} more than the last one.\n"
        "\u2022 One number per comment only.\n"
        f"\u2022 Stay in order: {seq} \u2026\n\u2022 Take turns --- no consecutive posts.\n"
        f"First number:\n{start}"
    )


def tier3(n: int, seed: int, steps: tuple[int, ...] = STEPS) -> list[Probe]:
    """``n`` counting chains, stepping by ones, twos and threes in turn, each from its own start number
    (a multiple of the step, as in the paper's "multiples of 3")."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        step = steps[i % len(steps)]
        start = step * rnd.randint(1, 40 // step)
        title, content = counting_post(start, step)
        out.append(Probe(3, title, content, start=start, target=CHAIN_LENGTH, step=step))
    return out


def shared_memory(n: int = 1) -> list[Probe]:
    """``n`` shared-memory probes of each of the study's three types (scored by ``probes.shared_memory``),
    types interleaved, wordings cycled; the type is in ``meta["kind"]``."""
    out = []
    for i in range(n):
        for kind in KINDS:
            title, content = WORDINGS[kind][i % len(WORDINGS[kind])]
            out.append(Probe("memory", title, content, meta={"kind": kind}))
    return out
