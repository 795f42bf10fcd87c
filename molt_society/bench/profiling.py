"""Sampling a benchmark's child with py-spy, and where its time went."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path


def py_spy_argv(pid: int, out: Path) -> list[str] | None:
    """py-spy recording ``pid`` into ``out`` (collapsed stacks) at 100 Hz, only the thread holding the GIL,
    without stopping the process for each sample; None if py-spy is not installed."""
    spy = shutil.which(
        "py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    if spy is None:
        return None
    argv = [spy, "record", "--pid", str(pid), "--rate", "100", "--gil", "--nonblocking"]
    return [*argv, "--format", "raw", "--output", str(out)]


def summarize_profile(text: str, top: int = 15) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Self and inclusive shares of functions in py-spy ``--format raw`` (collapsed stacks) output."""
    selfc: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        frames = [f for f in frames if "(" in f]  # drop process/thread labels
        if not frames:
            continue
        total += count
        selfc[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    if not total:
        return [], []

    def short(name: str) -> str:
        return re.sub(r"\(/.*?/(site-packages|main)/", "(", name)

    return (
        [(short(f), c / total) for f, c in selfc.most_common(top)],
        [(short(f), c / total) for f, c in incl.most_common(top * 2)],
    )
