"""A replay's progress as a small JSON file, ``<state_dir>/<society>/replay.json``, for the dashboard.

Written by ``society replay`` (atomically, at most twice a second, and once more when done); read by the
dashboard's health panel. A file and not a topic: progress is about one local command, and it must stay
readable while the broker is not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def progress_path(state_dir: Path, society: str) -> Path:
    return state_dir / society / "replay.json"


class ProgressFile:
    def __init__(self, path: Path, total: int, source: str | None) -> None:
        self.path = path
        self.total = total
        self.source = source
        self.started_at = time.time()
        self._last = 0.0
        self.update(0, 0.0)

    def update(self, published: int, rate: float, done: bool = False) -> None:
        now = time.time()
        if not done and published and now - self._last < 0.5:
            return
        self._last = now
        doc = {
            "source": self.source,
            "total": self.total,
            "published": published,
            "rate": round(rate, 1),
            "started_at": self.started_at,
            "updated_at": now,
            "done": done,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.path)


def read_progress(state_dir: Path, society: str) -> dict[str, Any] | None:
    """The progress the replay command last wrote for ``society``, if any."""
    try:
        doc = json.loads(progress_path(state_dir, society).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
