"""The store of probe runs: ``<state_dir>/<society>/probes/<run_id>.json`` and the replies in their threads.

``society probe`` (``probes.session``) writes a run when it posts its probes; scoring it later, and the
report's comment-quality figures (``report.superminds``), read it back with ``load_run`` and read every
comment of its probe threads from ClickHouse with ``replies``. Reading a stored run needs nothing of the
probes' posting or scoring, so it lives here, below both.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from molt_society.report.warehouse_source import Warehouse, quoted
from molt_society.runtime.settings import Settings


class ProbeError(RuntimeError):
    pass


@dataclass(frozen=True)
class Reply:
    comment_id: str
    parent_id: str | None  # None: a top-level comment (answers the post)
    actor: str
    depth: int
    content: str
    occurred_us: int = 0  # event time; replies are read in this order (ties: in the given order)


@dataclass
class ProbeRun:
    run_id: str
    society: str
    submolt: str
    posted_at: str
    probes: list[dict[str, Any]] = field(default_factory=list)  # Probe fields + post_id, agents

    @property
    def agents(self) -> set[str]:
        return {a for p in self.probes for a in p["agents"]}


def run_dir(settings: Settings, society: str) -> Path:
    return settings.state_dir / society / "probes"


def save_run(settings: Settings, run: ProbeRun) -> Path:
    """Write ``run`` to ``<run_dir>/<run_id>.json``; returns the path."""
    path = run_dir(settings, run.society) / f"{run.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(run), indent=2))
    return path


def load_run(path: Path) -> ProbeRun:
    try:
        doc = json.loads(path.read_text())
        return ProbeRun(**doc)
    except (OSError, ValueError, TypeError) as exc:
        raise ProbeError(f"{path}: not a probe run ({exc})") from None


def replies(wh: Warehouse, run: ProbeRun) -> dict[str, list[Reply]]:
    """Every comment in the probe threads, by post id, in time order (as a thread reads)."""
    ids = ", ".join(f"'{uuid.UUID(p['post_id'])}'" for p in run.probes)  # ids, checked, never free text
    rows = wh.query(
        "SELECT post_id, comment_id, parent_id, actor, depth, content, toUnixTimestamp64Micro(occurred_at) "
        f"FROM events FINAL WHERE society = {quoted(run.society)} AND type = 'comment_created' "
        f"AND post_id IN ({ids}) ORDER BY post_id, occurred_at, comment_id"
    ).rows
    out: dict[str, list[Reply]] = {p["post_id"]: [] for p in run.probes}
    for post_id, cid, parent, actor, depth, content, at in rows:
        out[str(post_id)].append(
            Reply(str(cid), str(parent) or None, str(actor), int(depth), str(content), int(at))
        )
    return out
