"""Moderation of posts and comments: transparent, pure rules an experiment's arm applies to new content.

The agent workers check every post and comment a brain writes from an arm's fork tick on
(``agents.interventions``); the experiment runner applies the same functions to the history at the fork.
Both use one interface: ``Moderator(rules).check(text)`` returns ``(rule, reason)`` for the first rule the
text breaks (in the rules' order) or ``None``, and remembers the text for the near-duplicate rule;
``remember(text)`` adds a text to that memory without checking it.

The rules (``schemas.experiment``):

- ``spam_score``: ``spam_score(text) >= threshold``. The score is deliberately simple, so a reader can
  say by hand why a text was removed. Over the text's lower-cased word tokens (``\\w+``):

  * repetition ``R = clip((repeat_share - 0.5) / 0.5, 0, 1)`` where ``repeat_share = 1 - distinct / total``
    (0 for fewer than 4 tokens). Ordinary prose repeats a third of its tokens or so (function words);
    only text where more than half the tokens are repeats scores, ``"buy buy buy ..."`` close to 1;
  * promotion ``P = min(1, hits / 3)`` where ``hits`` counts which of four patterns occur: a link
    (``http(s)://``, ``www.``, or a ``name.com``-like domain), promotional vocabulary (free, giveaway,
    airdrop, discount, ...), a call to action (click, dm me, subscribe, sign up, act now, ...), shouting
    (``!!!`` or, among at least 4 words of 3+ letters, at least half in capitals);
  * ``spam_score = 1 - (1 - R) * (1 - P)``: either signal alone can reach the threshold, both together
    reach it sooner.
- ``near_duplicates``: the Jaccard similarity of the text's word shingles (``SHINGLE`` consecutive
  tokens; a shorter text is one shingle of all its tokens) with a remembered text is at least
  ``threshold``. Candidates are found through an inverted index of shingles, so a check costs the texts
  sharing a shingle, not every text remembered.
- ``terms``: the text contains one of ``terms``, case-insensitively, as a whole word or phrase (not inside
  a longer word: ``"scam"`` matches ``"Scam!"`` but not ``"scampi"``).

``ban_top_pagerank`` is no content rule: the experiment runner turns it into the arm plan's bans.
Texts are agent-written and untrusted: they are only tokenised and matched here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

from molt_society.schemas.experiment import BanTopPagerank, NearDuplicates, SpamScore, Terms

SHINGLE = 3
"""Words per shingle of the near-duplicate rule."""
MAX_TEXT = 20_000
"""Characters of a text looked at (a longer text is judged on its start)."""

ContentRule = SpamScore | NearDuplicates | Terms
Rule = ContentRule | BanTopPagerank

_TOKEN = re.compile(r"\w+", re.UNICODE)
_LINK = re.compile(r"https?://|www\.|\b[a-z0-9-]{2,}\.(?:com|io|xyz|net|org|ly|gg|co)\b", re.IGNORECASE)
_PROMO = re.compile(
    r"\b(?:free|giveaway|airdrop|discount|promo|sale|cheap|guaranteed|profit|earn|100x|bonus|prize|"
    r"winner|offer)\b",
    re.IGNORECASE,
)
_CALL = re.compile(
    r"\b(?:click|subscribe|sign up|signup|act now|buy now|order now|join now|dm me|follow me|"
    r"limited time|don'?t miss)\b",
    re.IGNORECASE,
)
_BANG = re.compile(r"!{3,}")
_WORD3 = re.compile(r"\b[^\W\d_]{3,}\b", re.UNICODE)


def tokens(text: str) -> list[str]:
    """The lower-cased word tokens of ``text`` (``\\w+``)."""
    return _TOKEN.findall(text[:MAX_TEXT].lower())


def _shouting(text: str) -> bool:
    if _BANG.search(text):
        return True
    words = _WORD3.findall(text)
    return len(words) >= 4 and sum(1 for w in words if w.isupper()) * 2 >= len(words)


def promo_hits(text: str) -> int:
    """How many of the four promotion patterns ``text`` shows (link, vocabulary, call to action, shouting)."""
    text = text[:MAX_TEXT]
    return sum(bool(p.search(text)) for p in (_LINK, _PROMO, _CALL)) + int(_shouting(text))


def repetition(words: Sequence[str]) -> float:
    """``R`` of the module docstring: 0 until more than half the tokens are repeats, 1 when all are."""
    if len(words) < 4:
        return 0.0
    repeat_share = 1.0 - len(set(words)) / len(words)
    return min(1.0, max(0.0, (repeat_share - 0.5) / 0.5))


def spam_score(text: str) -> float:
    """The spam score of ``text`` in [0, 1] (module docstring): ``1 - (1 - R) * (1 - P)``."""
    r = repetition(tokens(text))
    p = min(1.0, promo_hits(text) / 3)
    return 1.0 - (1.0 - r) * (1.0 - p)


def shingles(text: str, k: int = SHINGLE) -> frozenset[tuple[str, ...]]:
    """The set of ``k``-word shingles of ``text``; a text of fewer than ``k`` words is one shingle (none if
    it has no word)."""
    words = tokens(text)
    if not words:
        return frozenset()
    if len(words) < k:
        return frozenset({tuple(words)})
    return frozenset(tuple(words[i : i + k]) for i in range(len(words) - k + 1))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    """``|a & b| / |a | b|`` (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def near_duplicate(text: str, others: Iterable[str], threshold: float) -> float | None:
    """The highest Jaccard similarity of ``text``'s shingles with one of ``others`` if it reaches
    ``threshold``, else None."""
    mine = shingles(text)
    best = max((jaccard(mine, shingles(o)) for o in others), default=0.0)
    return best if mine and best >= threshold else None


@lru_cache(maxsize=256)
def _term_pattern(term: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in term.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


def matched_terms(text: str, terms: Iterable[str]) -> list[str]:
    """The ``terms`` found in ``text``, in the order given: case-insensitive, as whole words (a phrase's words
    separated by any whitespace), never inside a longer word."""
    text = text[:MAX_TEXT]
    return [t for t in terms if t.strip() and _term_pattern(t.strip()).search(text)]


class Moderator:
    """The content rules of an arm, with the memory the near-duplicate rule compares against.

    ``rules``: the arm's moderation interventions, in order (``ban_top_pagerank`` is skipped: it bans, it
    removes no content). ``check`` returns the first rule a text breaks as (rule name, human reason), and
    remembers the text whatever the outcome (a removed text still makes its copies duplicates)."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules: tuple[ContentRule, ...] = tuple(r for r in rules if not isinstance(r, BanTopPagerank))
        self._dup = next((r.threshold for r in self.rules if isinstance(r, NearDuplicates)), None)
        self._texts: list[frozenset[tuple[str, ...]]] = []
        self._index: dict[tuple[str, ...], list[int]] = {}

    def __len__(self) -> int:
        """How many texts are remembered."""
        return len(self._texts)

    def remember(self, text: str) -> None:
        """Add ``text`` to the near-duplicate memory (a no-op without that rule)."""
        if self._dup is None:
            return
        sh = shingles(text)
        if not sh:
            return
        k = len(self._texts)
        self._texts.append(sh)
        for s in sh:
            self._index.setdefault(s, []).append(k)

    def similarity(self, text: str) -> float:
        """The highest Jaccard similarity of ``text`` with a remembered text (0: none shares a shingle)."""
        mine = shingles(text)
        shared: Counter[int] = Counter()
        for s in mine:
            shared.update(self._index.get(s, ()))
        best = 0.0
        for k, inter in shared.items():
            best = max(best, inter / (len(mine) + len(self._texts[k]) - inter))
        return best

    def check(self, text: str) -> tuple[str, str] | None:
        """``(rule, reason)`` of the first rule ``text`` breaks, or None; then remember ``text``."""
        found = self._first_match(text)
        self.remember(text)
        return found

    def _first_match(self, text: str) -> tuple[str, str] | None:
        for rule in self.rules:
            if isinstance(rule, SpamScore):
                score = spam_score(text)
                if score >= rule.threshold:
                    return rule.rule, f"spam score {score:.2f} >= {rule.threshold:g}"
            elif isinstance(rule, NearDuplicates):
                sim = self.similarity(text)
                if sim >= rule.threshold:
                    return rule.rule, f"{sim:.2f} similar to an earlier text (>= {rule.threshold:g})"
            else:
                terms = matched_terms(text, rule.terms)
                if terms:
                    return rule.rule, "contains " + ", ".join(repr(t) for t in terms[:10])
        return None
