"""One refresh of the dashboard: every panel's queries, the derived series, and the health figures.

A snapshot is computed once per refresh interval however many browsers watch, so the cost to ClickHouse
does not grow with viewers or with the event rate (the queries read aggregates and bounded time ranges).
A query that fails marks its own panel with the error; the others still update.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from scipy.special import zeta

from molt_society.dashboard.panels import PANELS
from molt_society.dashboard.sources import BrokerWatch, ClickHouseSource, sink_health
from molt_society.replay.progress import read_progress
from molt_society.runtime.pids import pid_alive
from molt_society.runtime.settings import Settings
from molt_society.runtime.stack_state import read_state
from molt_society.warehouse import QueryError


def power_law_line(ccdf: list[dict[str, Any]], fit: dict[str, float]) -> list[list[float]]:
    """The fitted discrete power law as a CCDF over the observed sizes >= xmin.

    For a discrete power law above xmin, P(S >= s | S >= xmin) = zeta(alpha, s) / zeta(alpha, xmin); the
    tail holds the empirical share P(S >= xmin) of all cascades, so the line meets the data at xmin.
    """
    alpha, xmin = fit.get("alpha"), fit.get("xmin")
    if alpha is None or xmin is None or alpha <= 1:
        return []
    tail = [r for r in ccdf if r["size"] >= xmin]
    if not tail:
        return []
    at_xmin = float(tail[0]["ccdf"])
    z0 = float(zeta(alpha, xmin))
    sizes = sorted({int(r["size"]) for r in tail})
    return [[s, at_xmin * float(zeta(alpha, s)) / z0] for s in sizes]


def _records(columns: list[str], rows: list[list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(columns, r, strict=True)) for r in rows]


async def collect_panels(source: ClickHouseSource, society: str) -> dict[str, Any]:
    """Run every panel's queries (one at a time: chDB serves one query at a time anyway)."""
    out: dict[str, Any] = {}
    for p in PANELS:
        queries: dict[str, Any] = {}
        for q in p.queries:
            try:
                res = await source.query(q.render(society))
            except QueryError as exc:
                queries[q.name] = {"error": str(exc), "ms": None}
            else:
                queries[q.name] = {"rows": _records(res.columns, res.rows), "ms": res.ms}
        out[p.id] = {"queries": queries}
    casc = out["cascades"]["queries"]
    if "rows" in casc.get("ccdf", {}) and "rows" in casc.get("fit", {}):
        fit = {r["dim"]: float(r["value"]) for r in casc["fit"]["rows"]}
        out["cascades"]["fit_line"] = power_law_line(casc["ccdf"]["rows"], fit)
    return out


def society_running(settings: Settings, society: str) -> bool:
    """Whether a stack of ``society`` runs now (its driver, as ``stack.json`` names it, is alive: the same
    pid and start time) or a replay of it is in progress: the page then expects events to keep coming and
    says so when they stop (a stored society is shown as such, without that warning)."""
    state = read_state(settings)
    driver = state.get("driver") or {}
    pid = driver.get("pid")
    if state.get("society") == society and isinstance(pid, int) and pid_alive(pid, driver.get("start")):
        return True
    progress = read_progress(settings.state_dir, society) or {}
    return bool(progress) and not progress.get("done")


class Snapshotter:
    """Computes snapshots on an interval and hands the newest to every subscriber."""

    def __init__(self, settings: Settings, society: str, bootstrap: str | None) -> None:
        self.settings = settings
        self.society = society
        self.source = ClickHouseSource(settings, society)
        self.broker = BrokerWatch(bootstrap, society) if bootstrap else None
        self.latest: dict[str, Any] | None = None
        self.seq = 0
        self._changed = asyncio.Condition()

    async def refresh(self) -> dict[str, Any]:
        began = time.perf_counter()
        panels = await collect_panels(self.source, self.society)
        sink = await sink_health(self.source)
        await self.source.release()
        self.seq += 1
        snap = {
            "seq": self.seq,
            "society": self.society,
            "running": society_running(self.settings, self.society),
            "generated_at": time.time(),
            "refresh_ms": round((time.perf_counter() - began) * 1000, 1),
            "clickhouse": {"url_kind": self.source.mode, "ok": _any_ok(panels)},
            "panels": panels,
            "health": {
                "broker": self.broker.snapshot() if self.broker else None,
                "sink": sink,
                "replay": read_progress(self.settings.state_dir, self.society),
            },
        }
        return snap

    async def run(self, stop: asyncio.Event) -> None:
        interval = self.settings.dashboard_refresh_seconds
        while not stop.is_set():
            began = time.monotonic()
            snap = await self.refresh()
            async with self._changed:
                self.latest = snap
                self._changed.notify_all()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.05, interval - (time.monotonic() - began)))

    async def next_after(self, seq: int, timeout: float) -> dict[str, Any] | None:
        """The first snapshot newer than ``seq`` (waits up to ``timeout`` s; None if none came)."""
        async with self._changed:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self.latest is not None and self.latest["seq"] > seq),
                    timeout,
                )
            if self.latest is not None and self.latest["seq"] > seq:
                return self.latest
            return None

    async def close(self) -> None:
        await self.source.close()


def _any_ok(panels: dict[str, Any]) -> bool:
    return any("rows" in q for p in panels.values() for q in p["queries"].values())
