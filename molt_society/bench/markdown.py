"""BENCHMARKS.md, written by several benchmarks: each owns a section between ``<!-- name:begin -->`` and
``<!-- name:end -->`` and replaces only that one, so a run of one benchmark keeps the others' figures.

``bench.pipeline`` rewrites the whole file; it keeps every other benchmark's block (``kept_blocks``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rich.console import Console

err = Console(stderr=True)


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of the section ``name``."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


DASHBOARD = markers("dashboard")
REPORT = markers("report")
LLM = markers("llm")
KEPT_BLOCKS = [DASHBOARD, REPORT, LLM]
"""Sections of other benchmarks that ``bench.pipeline`` keeps even where the file does not have them yet."""


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (``|`` in cells escaped)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def block_of(text: str, begin: str, end: str) -> str | None:
    """What stands between ``begin`` and ``end`` in ``text`` (None without both)."""
    if begin in text and end in text:
        return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")
    return None


def kept_blocks(text: str, own: set[str]) -> list[tuple[str, str]]:
    """Every ``<!-- name:begin -->`` ... ``<!-- name:end -->`` block of another benchmark, in file order
    (``KEPT_BLOCKS`` and any other: a benchmark that writes BENCHMARKS.md marks its section this way);
    ``own``: the begin markers of the writer's own blocks."""
    found = [m.group(0) for m in re.finditer(r"<!-- [a-z0-9-]+:begin -->", text)]
    names = [*found, *(b for b, _ in KEPT_BLOCKS if b not in found)]
    return [(b, b.replace(":begin", ":end")) for b in names if b not in own]


def write_section(path: Path, block: str, begin: str, end: str) -> None:
    """Put ``block`` (which starts with ``begin`` and ends with ``end``) in place of the old one, or at the
    end of the file."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    block = block.rstrip("\n") + "\n"  # the text after the section keeps its own line
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", lambda m: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text, encoding="utf-8")


def publish(block: str, out: Path, write: bool, begin: str, end: str) -> None:
    """Print a benchmark's Markdown block and, unless ``--no-write``, put it in ``out``."""
    err.print(block)
    if write:
        write_section(out, block, begin, end)
        err.print(f"wrote {out}")


def read_doc(path: Path) -> dict[str, Any] | None:
    """The JSON object a benchmark step wrote to ``path`` for its report; None when it is missing, not
    JSON or not an object (a step that failed or never ran)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
