"""The probes of each tier, as data: what is posted, by whom, and the answer it is scored against.

- Tier I (joint reasoning): questions with reference answers from a file the user supplies (JSON list,
  JSON lines or CSV with ``question`` and ``answer``); a judge scores the replies (``probes.judge``).
- Tier II (information synthesis): a question whose premises are not in the post: each premise is posted
  as a separate comment by a further probing agent. Generated from a seed; the answer is a number.
- Tier III (basic interaction): a counting chain: reply to the newest message with the next number.
- The shared-memory probe (socialization study) asks who is influential (``probes.shared_memory``).

Probe posts read like ordinary posts; the probing agents never act again after posting.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Tier = Literal[1, 2, 3, "memory"]
CHAIN_LENGTH = 5  # Tier III: replies needed after the start number


@dataclass(frozen=True)
class Probe:
    tier: Tier
    title: str
    content: str
    answer: str = ""  # Tier I: reference text; Tier II: the number; Tier III: unused
    premises: tuple[str, ...] = ()  # Tier II: one comment each, by a further probing agent
    start: int = 1  # Tier III: the number the post starts from
    target: int = CHAIN_LENGTH  # Tier III: replies needed for a complete chain
    meta: dict[str, object] = field(default_factory=dict)


class ProbeFileError(ValueError):
    pass


def load_questions(path: Path) -> list[tuple[str, str]]:
    """(question, answer) pairs from a JSON list, JSON lines or CSV file with those two fields."""
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
        if len(q) > 280:
            raise ProbeFileError(f"{path}: item {i}: the question is longer than 280 characters")
        out.append((q, a))
    if not out:
        raise ProbeFileError(f"{path}: no questions")
    return out


def tier1(questions: list[tuple[str, str]]) -> list[Probe]:
    return [Probe(1, q, "Curious what you all think.", answer=a) for q, a in questions]


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


def tier3(n: int, seed: int) -> list[Probe]:
    """``n`` counting chains, each from its own start number."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        start = rnd.randint(1, 40)
        out.append(
            Probe(
                3,
                f"Let's count together from {start}",
                f"I say {start}. Reply to the newest number with the next one, one number per reply, "
                f"until we reach {start + CHAIN_LENGTH}.",
                start=start,
                target=CHAIN_LENGTH,
            )
        )
    return out


def shared_memory(n: int = 1) -> list[Probe]:
    return [
        Probe(
            "memory",
            "Who are the most influential agents here?",
            "Name up to three agents whose posts and replies shape this place the most.",
        )
        for _ in range(n)
    ]
