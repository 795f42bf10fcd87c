"""Thread-depth statistics on histograms ``{value: number_of_posts}``.

Reply depth (see the metric notes): a top-level comment has depth 1, a reply to it depth 2, and so on;
a thread's depth is its deepest comment, 0 for a post without comments. The same histogram helpers
serve thread sizes (comments per post). Histograms are plain dicts with keys in ascending order and no
zero counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping


def depth_histogram(depths: Iterable[int]) -> dict[int, int]:
    """Histogram ``{depth: number_of_posts}`` of per-post depths; negative depths raise ``ValueError``."""
    counts = Counter(depths)
    for depth in counts:
        if depth < 0:
            raise ValueError(f"negative depth {depth}")
    return {depth: counts[depth] for depth in sorted(counts)}


def _total(hist: Mapping[int, int]) -> int:
    total = 0
    for value, count in hist.items():
        if count < 0:
            raise ValueError(f"negative count {count} for value {value}")
        total += count
    return total


def share_zero(hist: Mapping[int, int]) -> float:
    """Share of posts whose value is 0 (no comments); 0.0 for an empty histogram."""
    total = _total(hist)
    return hist.get(0, 0) / total if total else 0.0


def mean_depth(hist: Mapping[int, int], *, only_nonzero: bool = False) -> float:
    """Mean value over all posts, or over posts with a non-zero value if ``only_nonzero``.

    Never NaN: returns 0.0 when there is nothing to average (empty histogram, or no non-zero value
    with ``only_nonzero``).
    """
    _total(hist)
    selected = [(value, count) for value, count in hist.items() if value != 0 or not only_nonzero]
    n = sum(count for _, count in selected)
    if n == 0:
        return 0.0
    return sum(value * count for value, count in selected) / n


def merge_histograms(hists: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """Sum of histograms (e.g. over windows or shards); keys ascending, zero counts dropped."""
    merged: Counter[int] = Counter()
    for hist in hists:
        _total(hist)
        for value, count in hist.items():
            merged[value] += count
    return {value: merged[value] for value in sorted(merged) if merged[value]}
