"""A cheap generative text model fitted on real MoltBook texts: word trigrams with backoff.

The model
    Tokens are whitespace-separated words, with each line break kept as a token of its own (at most two
    in a row: one blank line), so markdown structure (``- `` and ``1.`` lists, ``#`` headers, ``**``, fenced
    code, blank lines), emoji, links and inline code come back as they were written. Seven chains share
    one vocabulary: titles, and post bodies and comments each in three styles fitted on their own texts
    (code: a backtick; else markdown: a list, a header or ``**``; else plain), the style of a generated
    text drawn with its fitted share, so plain texts stay plain. A chain is a trie of counts: bigram
    successors of a word, trigram successors of a word pair. It samples with backoff: in a trigram
    context seen ``n`` times whose kept trigrams hold ``k`` of them, a trigram successor with probability
    ``min(1, w * k / n)`` (``TRIGRAM_WEIGHT``; ``k < n`` where trigrams were pruned), else a bigram
    successor of the last word, else the chain's unigram. Texts start from ``(<s>, <s>)``.

Lengths and ends
    A text's length in words is drawn from the fitted lengths of its chain, clipped to ``MAX_WORDS - 1``;
    the chain runs until that many words are out (line breaks are not words), so lengths follow the
    fitted distribution. The last word is drawn from the chain's last words (its own counts: a text's last
    word is not counted in the n-grams), which brings back the sign-offs (a closing emoji, ...). A text
    also stops before ``MAX_BYTES`` of UTF-8 (16 KiB, on a token boundary), well under a post's 60 KiB.

Submolts
    The ``TOP_SUBMOLTS`` submolts with at least ``MIN_SUBMOLT_POSTS`` fitted posts get a start token of
    their own: a post of such a submolt opens its title and its body (first two tokens) as the
    submolt's own posts opened, then goes on with the shared chain; other submolts use ``<s>``.

Comments and what they answer
    At the start of a comment and after each word that ends a sentence (``.``, ``!``, ``?``), with
    probability ``p_parent`` the comment quotes the parent (the text it answers): up to ``QUOTE_WORDS``
    words from a content word of the parent (at least 4 characters, not a stop word, a context the comment
    chain knows), then the chain goes on from them. ``p_parent`` is fitted by bisection so that the mean
    ``bow_cosine`` of generated comments to real parents equals the real comments' mean cosine to their
    parents (``stats()["parent_cosine_mean"]``, on a seeded sample of up to ``COSINE_SAMPLE`` pairs).

Never a copy
    The model keeps 64-bit hashes (blake2b, digest_size=8) of every normalised training text (titles,
    bodies, comments; normalised: words joined by one space, lowercased), sorted, searched by bisection.
    A generated text equal to one is generated again, up to ``RETRIES`` times with the same length; if it
    still equals one, a word drawn from the chain's unigrams is appended (drawn again until the text is
    new). The empty text (a post without a body) is not a copy.

Caps (bounded file and memory)
    Vocabulary: the ``MAX_VOCAB`` most frequent tokens of at most ``MAX_TOKEN_CHARS`` characters; any other
    token breaks the n-grams around it. Texts over ``MAX_FIT_BYTES`` of UTF-8 (spam) are not fitted, and
    of a fitted text only its first ``MAX_FIT_TOKENS`` tokens. In a chain of more than ``PRUNE_ABOVE``
    n-grams, trigrams seen once are pruned (openings stay); above ``PRUNE_BIGRAMS_ABOVE``, bigrams seen
    once too. On the real crawl (8,438 posts, 77,544 comments, 6.0 million tokens) the fit takes about
    7 s and the file is about 15 MB.

Contract: deterministic. Only the ``random.Random`` passed in draws, so the same model file (and this
code) and the same generator state give the same texts. The file (``save``/``load``) is one compressed
numpy ``.npz`` archive with a JSON header; ``load`` raises ``ValueError`` naming the path on anything else.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import re
import zipfile
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import orjson

FORMAT = "molt-society-text-model"
VERSION = 1
MAX_WORDS = 1_500
MAX_BYTES = 16 * 1024
MAX_VOCAB = 400_000
MAX_TOKEN_CHARS = 64
MAX_FIT_BYTES = 64 * 1024
MAX_FIT_TOKENS = 3_000
PRUNE_ABOVE = 1_000_000
PRUNE_BIGRAMS_ABOVE = 20_000_000
MIN_SUBMOLT_POSTS = 30
TOP_SUBMOLTS = 64
RETRIES = 5
COSINE_SAMPLE = 20_000
PARENT_WORDS = 400  # a comment quotes from the first words of its parent only
QUOTE_WORDS = 3
FIT_COMMENTS = 600  # comments generated per bisection step when fitting p_parent
# P(trigram) = min(1, weight * kept / seen) in a trigram context; else the bigram. Tuned on the crawl's
# distinct-word share: above 1 less of the backoff that pruning trigrams seen once causes.
TRIGRAM_WEIGHT = {"title": 1.0, "post": 1.0, "comment": 1.5}

BOS, NL = 0, 1  # token ids of the start token and of the line break
_NL = "\n"
_SEP = -1  # in place of an out-of-vocabulary token: breaks the n-grams
_END = -2  # after each text: breaks the n-grams too
_BYTE_ROOM = MAX_BYTES - 4 * MAX_TOKEN_CHARS - 2  # room left for an appended word
_FIT_SEED = 0x7E57_0DE1
_WORD_RE = re.compile(r"\w+")
_LIST_RE = re.compile(r"^[ \t]*(?:[-*] |\d+\.(?:\s|$))", re.MULTILINE)
_HEADER_RE = re.compile(r"^[ \t]*#{1,6}\s", re.MULTILINE)
_EMOJI_RE = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")
_STRIP = ".,;:!?\"'()[]{}<>*_`~\u201c\u201d\u2018\u2019\u2026\u2014-"
_STOP_WORDS = (
    "that this with have from they what your when will just been were about there their would could "
    "which more into than them then also like some only other such very here much even most being does "
    "really these those because while where should these thing things make made over each both same "
    "still well want know think yeah sure thanks thank great good love"
)
_STOP = frozenset(_STOP_WORDS.split())

Kind = Literal["post", "comment"]
# the chains: titles, and post bodies and comments each in three styles (plain, markdown, code)
_CHAINS = ("title", "post", "post_md", "post_code", "comment", "comment_md", "comment_code")
_Parent = tuple[list[str], list[int]]  # a parent's words, and where its known content words are
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TextSample:
    """One real text to fit on: a post (title and content) or a comment (content and what it answers)."""

    kind: Kind
    text: str
    title: str = ""
    submolt: str | None = None
    parent: str | None = None


# ---------------------------------------------------------------- helpers: tokens, cosine, features


def tokenize(text: str) -> list[str]:
    """Whitespace words; a line break is the token ``"\\n"`` (two at most in a row, none at the ends)."""
    out: list[str] = []
    blank = False
    for line in text.splitlines():
        words = line.split()
        if not words:
            blank = True
            continue
        if out:
            out.append(_NL)
            if blank:
                out.append(_NL)
        blank = False
        out.extend(words)
    return out


def detokenize(tokens: Sequence[str]) -> str:
    """The text of tokens: words joined by a space, line-break tokens as line breaks."""
    return " ".join(tokens).replace(" \n", "\n").replace("\n ", "\n")


def is_markdown(text: str) -> bool:
    """A list line, a header line or ``**`` (``text_features``' ``share_with_markdown``)."""
    return "**" in text or _LIST_RE.search(text) is not None or _HEADER_RE.search(text) is not None


def _normalised(text: str) -> str:
    return " ".join(text.split()).lower()


def text_hash(text: str) -> int:
    """The 64-bit hash of a text's normalised form (words joined by one space, lowercased)."""
    digest = hashlib.blake2b(_normalised(text).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _bag(text: str) -> Counter[str]:
    return Counter(_WORD_RE.findall(text.lower()))


def bow_cosine(a: str, b: str) -> float:
    """Cosine of two texts' bags of words (lowercased ``\\w+`` runs, counted); 0.0 if either has none."""
    ca, cb = _bag(a), _bag(b)
    if not ca or not cb:
        return 0.0
    if len(cb) < len(ca):
        ca, cb = cb, ca
    dot = sum(n * cb.get(w, 0) for w, n in ca.items())
    norm = math.sqrt(sum(n * n for n in ca.values()) * sum(n * n for n in cb.values()))
    return dot / norm


def text_features(texts: Iterable[str]) -> dict[str, float]:
    """Shape of a collection of texts (words: whitespace-separated; the vocabulary is lowercased).

    ``words_median``/``words_p90``: words per text; ``share_with_list``: a line starting with ``- ``,
    ``* `` or ``1.``; ``share_with_emoji``: a character in U+1F300-1FAFF or U+2600-27BF; ``share_with_link``:
    ``http://`` or ``https://``; ``share_with_code``: a backtick; ``share_with_markdown``: a list, a header
    line (``#`` to ``######`` then a space) or ``**``; ``vocab_heaps_beta``: slope of the least-squares line
    of log(distinct words) on log(words seen), one point after each text with words, in the given order;
    ``distinct_word_share``: distinct words / words. All 0.0 for no texts.
    """
    counts: list[int] = []
    flags = {"list": 0, "emoji": 0, "link": 0, "code": 0, "markdown": 0}
    seen: set[str] = set()
    total = 0
    xs: list[float] = []
    ys: list[float] = []
    for text in texts:
        words = text.split()
        counts.append(len(words))
        has_list = _LIST_RE.search(text) is not None
        flags["list"] += has_list
        flags["emoji"] += _EMOJI_RE.search(text) is not None
        flags["link"] += "http://" in text or "https://" in text
        flags["code"] += "`" in text
        flags["markdown"] += has_list or is_markdown(text)
        if words:
            total += len(words)
            seen.update(w.lower() for w in words)
            xs.append(math.log(total))
            ys.append(math.log(len(seen)))
    n = len(counts)
    if n == 0:
        return {k: 0.0 for k in _FEATURE_KEYS}
    out = {
        "words_median": float(np.median(counts)),
        "words_p90": float(np.percentile(counts, 90)),
        **{f"share_with_{k}": v / n for k, v in flags.items()},
        "vocab_heaps_beta": _slope(xs, ys),
        "distinct_word_share": len(seen) / total if total else 0.0,
    }
    return out


_FEATURE_KEYS = (
    "words_median",
    "words_p90",
    "share_with_list",
    "share_with_emoji",
    "share_with_link",
    "share_with_code",
    "share_with_markdown",
    "vocab_heaps_beta",
    "distinct_word_share",
)


def _slope(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    x = np.asarray(xs)
    y = np.asarray(ys)
    dx = x - x.mean()
    den = float(dx @ dx)
    return float(dx @ (y - y.mean())) / den if den > 0 else 0.0


# ---------------------------------------------------------------- one chain: a trie of counts


def _ints(values: npt.NDArray[np.integer], wide: bool = False) -> array[int]:
    code = "q" if wide or (values.size and int(values.max()) >= 2**31) else "i"
    return array(code, np.ascontiguousarray(values, dtype=np.int64 if code == "q" else np.int32).tobytes())


def _cum(counts: npt.NDArray[np.integer]) -> array[int]:
    return _ints(np.concatenate(([0], np.cumsum(counts, dtype=np.int64))))


class _Chain:
    """Bigram successors of each token and trigram successors of each (token, token), as flat arrays.

    ``a2, b2, n2``: the bigrams (sorted by ``a2`` then ``b2``) and their counts; ``r3, c3, n3``: the
    trigrams, by the row of their context bigram (sorted), their last token and their count; ``uni``: the
    unigram counts (0 for start tokens). These are what the file stores; the lookup arrays derive from them.
    """

    def __init__(self, arrays: dict[str, npt.NDArray[np.int64]], vocab_size: int, weight: float) -> None:
        self.arrays = arrays
        self.spread = 1.0 / weight
        _check(arrays, vocab_size)
        a2, r3 = arrays["a2"], arrays["r3"]
        steps = np.arange(vocab_size + 1)
        self.boff = _ints(np.searchsorted(a2, steps))
        self.btok = _ints(arrays["b2"])
        self.bcum = _cum(arrays["n2"])
        self.toff = _ints(np.searchsorted(r3, np.arange(a2.size + 1)))
        self.ttok = _ints(arrays["c3"])
        self.tcum = _cum(arrays["n3"])
        self.ucum = _cum(arrays["uni"])
        self.elast = _cum(arrays["euni"])
        self.vocab_size = vocab_size

    def next(self, a: int, b: int, rnd: Callable[[], float]) -> int:
        """A token after ``a b``: trigram, else bigram of ``b``, else unigram (stupid backoff)."""
        boff = self.boff
        lo, hi = boff[a], boff[a + 1]
        if lo < hi:
            j = bisect_left(self.btok, b, lo, hi)
            if j < hi and self.btok[j] == b:
                tlo, thi = self.toff[j], self.toff[j + 1]
                if tlo < thi:
                    cum = self.tcum
                    base = cum[tlo]
                    # trigram with probability min(1, weight * kept / seen): pruned mass backs off
                    r = base + int(rnd() * (self.bcum[j + 1] - self.bcum[j]) * self.spread)
                    if r < cum[thi]:
                        return self.ttok[bisect_right(cum, r, tlo + 1, thi) - 1]
        lo, hi = boff[b], boff[b + 1]
        if lo < hi:
            cum = self.bcum
            base = cum[lo]
            r = base + int(rnd() * (cum[hi] - base))
            return self.btok[bisect_right(cum, r, lo + 1, hi) - 1]
        return self.unigram(rnd)

    def last(self, rnd: Callable[[], float]) -> int:
        """The last word of a text, drawn as the chain's texts ended (their last words' counts)."""
        cum = self.elast
        if cum[-1] == 0:
            return self.unigram(rnd)
        return bisect_right(cum, int(rnd() * cum[-1]), 1, self.vocab_size) - 1

    def unigram(self, rnd: Callable[[], float]) -> int:
        cum = self.ucum
        return bisect_right(cum, int(rnd() * cum[-1]), 1, self.vocab_size) - 1

    def knows(self, token: int) -> bool:
        """Whether ``token`` has bigram successors (a context the chain can continue from)."""
        return bool(self.boff[token] < self.boff[token + 1])


def _check(arrays: dict[str, I64], v: int) -> None:
    """``ValueError`` unless a chain's arrays fit together (sizes, token ids below ``v``, rows)."""
    a2, b2, r3, c3 = (arrays[k] for k in ("a2", "b2", "r3", "c3"))
    ok = arrays["uni"].size == v == arrays["euni"].size and a2.size == b2.size == arrays["n2"].size
    ok = ok and r3.size == c3.size == arrays["n3"].size
    bounds = ((a2, v), (b2, v), (c3, v), (r3, max(a2.size, 1)))
    if not ok or any(x.size and (int(x.min()) < 0 or int(x.max()) >= bound) for x, bound in bounds):
        raise ValueError("inconsistent chain arrays")


def _build_chain(
    flat: I64, extra3: list[tuple[int, int, int]], n_special: int, vocab_size: int
) -> dict[str, I64]:
    """Count a chain's n-grams: ``flat`` holds its texts, each as ``<s> <s> tokens...`` then ``_END``.

    Also the ends: the last word of each text (``euni``) and the (word before, last word) pairs.
    """
    v = vocab_size
    ends = np.flatnonzero(flat == _END)
    inner = np.ones(flat.size, dtype=bool)
    inner[ends - 1] = False  # a text's last word is the end model's, not the chain's
    a, b, c = flat[:-2], flat[1:-1], flat[2:]
    ok3 = (a >= 0) & (b >= 0) & (c >= 0) & inner[2:]
    ok2 = (flat[:-1] >= 0) & (flat[1:] >= 0) & inner[1:]
    k3 = ((a * v + b) * v + c)[ok3]
    k2 = (flat[:-1] * v + flat[1:])[ok2]
    if extra3:
        e = np.asarray(extra3, dtype=np.int64).reshape(-1, 3)
        k3 = np.concatenate((k3, (e[:, 0] * v + e[:, 1]) * v + e[:, 2]))
        k2 = np.concatenate((k2, e[:, 0] * v + e[:, 1]))
    u3, n3 = np.unique(k3, return_counts=True)
    u2, n2 = np.unique(k2, return_counts=True)
    seen = int(ok2.sum())
    if seen > PRUNE_ABOVE:  # trigrams seen once go (openings stay); their mass backs off to the bigrams
        keep3 = (n3 > 1) | (u3 // (v * v) < n_special)
        u3, n3 = u3[keep3], n3[keep3]
    if seen > PRUNE_BIGRAMS_ABOVE:  # a trigram kept (count 2 or more, or an opening) keeps its bigram
        keep2 = (n2 > 1) | (u2 // v < n_special)
        u2, n2 = u2[keep2], n2[keep2]
    r3 = np.searchsorted(u2, u3 // v).astype(np.int64)
    valid = flat[(flat >= n_special) & inner]
    uni = np.bincount(valid, minlength=v).astype(np.int64)
    uni[NL] = int((flat == NL).sum())
    last = flat[ends - 1]
    word = last >= n_special
    return {
        "euni": np.bincount(last[word], minlength=v).astype(np.int64),
        "a2": u2 // v,
        "b2": u2 % v,
        "n2": n2.astype(np.int64),
        "r3": r3,
        "c3": u3 % v,
        "n3": n3.astype(np.int64),
        "uni": uni,
    }


# ---------------------------------------------------------------- fitting: reading the samples


@dataclass
class _Reader:
    """First pass over the samples: provisional token ids per chain, lengths, hashes, cosine pairs."""

    ids: dict[str, int] = field(default_factory=lambda: {" <s>": BOS, _NL: NL})
    flats: dict[str, array[int]] = field(default_factory=lambda: {k: array("q") for k in _CHAINS})
    lengths: dict[str, list[int]] = field(default_factory=lambda: {k: [] for k in _CHAINS})
    openings: list[tuple[str, str, int, int]] = field(default_factory=list)
    submolts: Counter[str] = field(default_factory=Counter)
    hashes: set[int] = field(default_factory=set)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    n_pairs: int = 0
    texts: int = 0
    skipped: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(_FIT_SEED))

    def add(self, sample: TextSample) -> None:
        if sample.kind == "post":
            first = self.text("title", sample.title)
            style = "post" + _style(sample.text)
            body = self.text(style, sample.text)
            if sample.submolt is not None:
                self.submolts[sample.submolt] += 1
                self.openings.append((sample.submolt, "title", *first))
                self.openings.append((sample.submolt, style, *body))
        else:
            self.text("comment" + _style(sample.text), sample.text)
            if sample.parent and sample.text:
                self.pair(sample.text, sample.parent)

    def text(self, chain: str, text: str) -> tuple[int, int]:
        """Add one text to a chain; return its first two provisional ids (``_SEP`` where none)."""
        if len(text) > MAX_FIT_BYTES // 4 and len(text.encode("utf-8")) > MAX_FIT_BYTES:
            self.skipped += 1
            return _SEP, _SEP
        self.texts += 1
        tokens = tokenize(text)
        words = len(tokens) - tokens.count(_NL)
        self.lengths[chain].append(min(words, MAX_WORDS - 1))
        if words:
            self.hashes.add(text_hash(text))
        ids, out = self.ids, self.flats[chain]
        out.append(BOS)
        out.append(BOS)
        for token in tokens[:MAX_FIT_TOKENS]:
            i = ids.get(token)
            if i is None:
                i = ids[token] = len(ids) if len(token) <= MAX_TOKEN_CHARS else _SEP
            out.append(i)
        out.append(_END)
        head = out[-1 - min(len(tokens), MAX_FIT_TOKENS) : -1][:2]
        return (head[0] if head else _SEP), (head[1] if len(head) > 1 else _SEP)

    def pair(self, text: str, parent: str) -> None:
        """Reservoir sample of (comment, parent) pairs, seeded: the same samples give the same pairs."""
        self.n_pairs += 1
        if len(self.pairs) < COSINE_SAMPLE:
            self.pairs.append((text, parent))
        else:
            j = self.rng.randrange(self.n_pairs)
            if j < COSINE_SAMPLE:
                self.pairs[j] = (text, parent)


def _style(text: str) -> str:
    """A body's or comment's chain: with code (a backtick), else markdown, else plain."""
    return "_code" if "`" in text else "_md" if is_markdown(text) else ""


def _vocabulary(reader: _Reader) -> tuple[list[str], dict[str, int], npt.NDArray[np.int64]]:
    """Final ids: ``<s>``, the line break, the submolt starts, then tokens by count (first seen first).

    Returns the vocabulary, the submolt start ids and the map from provisional to final ids (-1: dropped).
    """
    qualified = [s for s, n in reader.submolts.most_common() if n >= MIN_SUBMOLT_POSTS][:TOP_SUBMOLTS]
    starts = {s: 2 + i for i, s in enumerate(qualified)}
    n_special = 2 + len(starts)
    n_prov = len(reader.ids)
    counts = np.zeros(n_prov, dtype=np.int64)
    for flat in reader.flats.values():
        f = np.frombuffer(flat, dtype=np.int64)
        counts += np.bincount(f[f >= 0], minlength=n_prov)
    counts[:2] = 0
    order = np.argsort(-counts, kind="stable")[: MAX_VOCAB - n_special]
    order = order[counts[order] > 0]
    remap = np.full(n_prov + 1, -1, dtype=np.int64)  # index -1 (a _SEP) maps to -1 too
    remap[BOS], remap[NL] = BOS, NL
    remap[order] = np.arange(n_special, n_special + order.size)
    by_id = {i: t for t, i in reader.ids.items() if i >= 0}
    vocab = [" <s>", _NL, *(f" <s:{s}>" for s in qualified)] + [by_id[int(i)] for i in order]
    return vocab, starts, remap


def _openings(
    reader: _Reader, starts: dict[str, int], remap: npt.NDArray[np.int64]
) -> dict[str, list[tuple[int, int, int]]]:
    """The extra trigrams that start a qualified submolt's titles and bodies: (S, S, t0) and (S, t0, t1)."""
    extra: dict[str, list[tuple[int, int, int]]] = {k: [] for k in _CHAINS}
    for submolt, chain, t0, t1 in reader.openings:
        s = starts.get(submolt)
        if s is None or t0 < 0 or remap[t0] < 0:
            continue
        first = int(remap[t0])
        extra[chain].append((s, s, first))
        if t1 >= 0 and remap[t1] >= 0:
            extra[chain].append((s, first, int(remap[t1])))
    return extra


# ---------------------------------------------------------------- the model


class TextModel:
    """Generates MoltBook-like titles, post bodies and comments; see the module docstring."""

    def __init__(
        self,
        vocab: list[str],
        chains: dict[str, dict[str, I64]],
        lengths: dict[str, I64],
        starts: dict[str, int],
        hashes: npt.NDArray[np.uint64],
        meta: dict[str, float | int],
    ) -> None:
        self._vocab = vocab
        self._v = len(vocab)
        self._chains = {k: _Chain(chains[k], self._v, float(meta[f"trigram_weight_{k}"])) for k in _CHAINS}
        self._lengths = {k: _ints(np.asarray(v, dtype=np.int64)) for k, v in lengths.items()}
        self._starts = dict(starts)
        self._hash_array = np.asarray(hashes, dtype=np.uint64)
        self._hashes = array("Q", self._hash_array.tobytes())
        self._stats = dict(meta)
        self._p_parent = float(meta.get("p_parent", 0.0))
        self._post_styles = (float(meta["post_code_share"]), float(meta["post_markdown_share"]))
        self._comment_styles = (float(meta["comment_code_share"]), float(meta["comment_markdown_share"]))
        self._bytes = array("i", (len(t.encode("utf-8")) + 1 for t in vocab))
        self._ends = bytearray(1 if t.endswith((".", "!", "?", ".*", "!*", "?*")) else 0 for t in vocab)
        comments = self._chains["comment"]
        n_special = 2 + len(starts)
        self._index = {t: i for i, t in enumerate(vocab) if i >= n_special}
        self._content = frozenset(
            t
            for t, i in self._index.items()
            if len(t) >= 4 and t.lower().strip(_STRIP) not in _STOP and comments.knows(i)
        )

    # -------------------------------------------------------------- fit

    @classmethod
    def fit(cls, samples: Iterable[TextSample], *, max_texts: int = 200_000) -> TextModel:
        """Fit on at most ``max_texts`` samples (a post counts once, for its title and body)."""
        reader = _Reader()
        for n, sample in enumerate(samples):
            if n >= max_texts:
                break
            reader.add(sample)
        vocab, starts, remap = _vocabulary(reader)
        extra = _openings(reader, starts, remap)
        n_special = 2 + len(starts)
        chains: dict[str, dict[str, I64]] = {}
        tokens = 0
        for k in _CHAINS:
            prov = np.frombuffer(reader.flats[k], dtype=np.int64)
            flat = np.where(prov >= 0, remap[np.maximum(prov, 0)], prov)
            tokens += int((flat >= n_special).sum() + (flat == NL).sum())
            chains[k] = _build_chain(flat, extra[k], n_special, len(vocab))
        lengths = {k: np.asarray(reader.lengths[k] or [0], dtype=np.int64) for k in _CHAINS}
        hashes = np.unique(np.fromiter(reader.hashes, dtype=np.uint64, count=len(reader.hashes)))
        real = [bow_cosine(t, p) for t, p in reader.pairs]
        n_of = {k: len(reader.lengths[k]) for k in _CHAINS}
        posts = n_of["post"] + n_of["post_md"] + n_of["post_code"]
        comments = n_of["comment"] + n_of["comment_md"] + n_of["comment_code"]
        meta: dict[str, float | int] = {
            "texts": reader.texts,
            "skipped_oversize": reader.skipped,
            "posts": posts,
            "comments": comments,
            "post_markdown_share": n_of["post_md"] / max(posts, 1),
            "post_code_share": n_of["post_code"] / max(posts, 1),
            "comment_markdown_share": n_of["comment_md"] / max(comments, 1),
            "comment_code_share": n_of["comment_code"] / max(comments, 1),
            "tokens": tokens,
            "vocabulary": len(vocab),
            "submolt_openings": len(starts),
            "bigrams": sum(int(c["b2"].size) for c in chains.values()),
            "trigrams": sum(int(c["c3"].size) for c in chains.values()),
            "training_hashes": int(hashes.size),
            "parent_pairs": reader.n_pairs,
            "parent_cosine_mean": float(np.mean(real)) if real else 0.0,
            "p_parent": 0.0,
            **{f"trigram_weight_{k}": TRIGRAM_WEIGHT[k.split("_")[0]] for k in _CHAINS},
        }
        model = cls(vocab, chains, lengths, starts, hashes, meta)
        model._fit_parent(reader.pairs[:FIT_COMMENTS])
        return model

    def _fit_parent(self, pairs: list[tuple[str, str]]) -> None:
        """Bisect ``p_parent`` so the generated comments' mean cosine to real parents meets the real one."""
        target = float(self._stats["parent_cosine_mean"])
        parents = [p for _, p in pairs]
        if not parents:
            return
        lo, hi = 0.0, 1.0
        got = self._mean_cosine(parents, hi)
        if got > target:
            for _ in range(10):
                mid = (lo + hi) / 2
                got_mid = self._mean_cosine(parents, mid)
                lo, hi = (mid, hi) if got_mid < target else (lo, mid)
            got = self._mean_cosine(parents, (lo + hi) / 2)
            self._p_parent = (lo + hi) / 2
        else:
            self._p_parent = 1.0
        self._stats["p_parent"] = self._p_parent
        self._stats["generated_parent_cosine_mean"] = got

    def _mean_cosine(self, parents: list[str], p: float) -> float:
        self._p_parent = p
        py = random.Random(_FIT_SEED)
        return float(np.mean([bow_cosine(self.comment(py, parent), parent) for parent in parents]))

    # -------------------------------------------------------------- file

    def save(self, path: Path) -> None:
        """Write the model to ``path`` (one compressed ``.npz``, written next to it then renamed)."""
        arrays: dict[str, npt.NDArray[np.generic]] = {
            "header": np.frombuffer(
                orjson.dumps(
                    {"format": FORMAT, "version": VERSION, "starts": self._starts, "stats": self._stats}
                ),
                dtype=np.uint8,
            ),
            "vocab": np.frombuffer(orjson.dumps(self._vocab), dtype=np.uint8),
            "hashes": self._hash_array,
        }
        for name, lengths in self._lengths.items():
            arrays[f"len_{name}"] = np.frombuffer(
                lengths, dtype=np.int32 if lengths.typecode == "i" else np.int64
            )
        for name, chain in self._chains.items():
            for k, values in chain.arrays.items():
                arrays[f"{name}_{k}"] = _narrow(values)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as f:
            np.savez_compressed(f, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> TextModel:
        """Read a model written by ``save``; ``ValueError`` naming ``path`` on a corrupt or foreign file."""
        try:
            with np.load(path, allow_pickle=False) as z:
                header = orjson.loads(z["header"].tobytes())
                if not isinstance(header, dict) or header.get("format") != FORMAT:
                    raise ValueError("not a text model")
                if header.get("version") != VERSION:
                    raise ValueError(f"version {header.get('version')!r}, expected {VERSION}")
                vocab = orjson.loads(z["vocab"].tobytes())
                chains = {c: {k: z[f"{c}_{k}"].astype(np.int64) for k in _ARRAYS} for c in _CHAINS}
                lengths = {k: z[f"len_{k}"].astype(np.int64) for k in _CHAINS}
                return cls(vocab, chains, lengths, header["starts"], z["hashes"], header["stats"])
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            EOFError,
            zipfile.BadZipFile,
            orjson.JSONDecodeError,
        ) as e:
            raise ValueError(f"{path}: not a readable text model file ({e})") from e

    # -------------------------------------------------------------- generation

    def post(self, py: random.Random, submolt: str) -> tuple[str, str]:
        """A post of ``submolt``: (title, content)."""
        start = self._starts.get(submolt, BOS)
        title = self._novel("title", py, start, None)
        return title, self._novel("post" + self._draw_style(py, self._post_styles), py, start, None)

    def comment(self, py: random.Random, parent: str) -> str:
        """A comment answering ``parent`` (the parent comment, or the post's title and content; may be "")."""
        content = self._content
        words = parent.split()[:PARENT_WORDS]
        hits = [i for i, w in enumerate(words) if w in content]
        return self._novel("comment" + self._draw_style(py, self._comment_styles), py, BOS, (words, hits))

    @staticmethod
    def _draw_style(py: random.Random, shares: tuple[float, float]) -> str:
        r = py.random()
        return "_code" if r < shares[0] else "_md" if r < shares[0] + shares[1] else ""

    def stats(self) -> dict[str, float | int]:
        """What the model was fitted on and how: texts, tokens, vocabulary, n-grams, parent cosine, ..."""
        return dict(self._stats)

    def _novel(self, name: str, py: random.Random, start: int, parent: _Parent | None) -> str:
        """A text of chain ``name`` that is no training text (see the module docstring)."""
        chain = self._chains[name]
        lengths = self._lengths[name]
        length = lengths[int(py.random() * len(lengths))]
        if length <= 0:
            return ""
        if not chain.knows(start):
            start = BOS  # a submolt whose posts of this style the chain never saw: the overall openings
        for _ in range(1 + RETRIES):
            ids = self._walk(chain, py, length, start, parent)
            if not self._seen(ids):
                return self._text(ids)
        ids.append(NL)
        for _ in range(64):  # a copy still: one word more, drawn again until the text is new
            word = chain.unigram(py.random)
            if word != NL:
                ids[-1] = word
                if not self._seen(ids):
                    break
        return self._text(ids)

    def _walk(
        self, chain: _Chain, py: random.Random, length: int, start: int, parent: _Parent | None
    ) -> list[int]:
        """Token ids of one text: ``length`` words (fewer if the bytes run out), line breaks between."""
        rnd = py.random
        nxt = chain.next
        sizes, ends = self._bytes, self._ends
        p = self._p_parent if parent and parent[1] else 0.0
        out: list[int] = []
        quote: list[int] = []
        a = b = start
        words = size = 0
        steps = 4 * length + 16
        while words < length and steps:
            steps -= 1
            if quote:
                c = quote.pop()
            elif words == length - 1:
                c = chain.last(rnd)
            elif p and (b == start or ends[b]) and rnd() < p:
                quote = self._quote(parent, rnd)  # type: ignore[arg-type]
                c = quote.pop()
            else:
                c = nxt(a, b, rnd)
            if c == NL:
                if not out or (out[-1] == NL and len(out) > 1 and out[-2] == NL):
                    continue  # no line break first, nor a third in a row: draw again
            else:
                size += sizes[c]
                if size > _BYTE_ROOM:
                    break
                words += 1
            out.append(c)
            a, b = b, c
        while out and out[-1] == NL:
            out.pop()
        return out

    def _quote(self, parent: _Parent, rnd: Callable[[], float]) -> list[int]:
        """Up to ``QUOTE_WORDS`` words of the parent from one of its content words, reversed (to pop)."""
        words, hits = parent
        i = hits[int(rnd() * len(hits))]
        index = self._index
        out = [index[words[i]]]
        for w in words[i + 1 : i + QUOTE_WORDS]:
            j = index.get(w)
            if j is None:
                break
            out.append(j)
        out.reverse()
        return out

    def _seen(self, ids: list[int]) -> bool:
        vocab = self._vocab
        norm = " ".join(vocab[i] for i in ids if i != NL).lower()
        if not norm:
            return False
        h = int.from_bytes(hashlib.blake2b(norm.encode("utf-8"), digest_size=8).digest(), "big")
        hashes = self._hashes
        j = bisect_left(hashes, h)
        return j < len(hashes) and hashes[j] == h

    def _text(self, ids: list[int]) -> str:
        vocab = self._vocab
        return detokenize([vocab[i] for i in ids])


_ARRAYS = ("a2", "b2", "n2", "r3", "c3", "n3", "uni", "euni")


def _narrow(values: I64) -> npt.NDArray[np.generic]:
    """The smallest unsigned or signed integer type that holds ``values`` (the file only)."""
    if values.size == 0:
        return values.astype(np.int32)
    lo, hi = int(values.min()), int(values.max())
    for t in (np.uint8, np.uint16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return values.astype(t)
    return values
