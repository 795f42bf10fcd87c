"""The dashboard's experiment pages: the list of experiments and each one's result.

- ``GET /experiments``: every experiment of the ``experiments`` table (arms, finished and started runs),
  with links to its result; a server-rendered page, every name escaped.
- ``GET /api/experiments``: the same list as JSON.
- ``GET /experiments/{name}/``: the result page. The one the runner wrote
  (``<state_dir>/experiments/<name>/result.html``, ``report.experiments.outcome.write_result``), else built
  from the table now (``build_result`` through the dashboard's ClickHouse source; kept until the table's
  finished runs change).
- ``GET /experiments/{name}/result.json``: the result's JSON, from the same place.

These routes sit behind the same Host/Origin/Content-Type checks as the others (``runtime.web_guard``).
The HTML pages are offline documents without any script: they carry their own Content-Security-Policy
(no script, styles inline only), which the server's ``security_headers`` keeps. A name is only looked up
when it is a valid experiment name (``check_name``), so it cannot reach outside the results directory.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from molt_society.dashboard.snapshot import Snapshotter
from molt_society.report.experiments.data import bind
from molt_society.report.experiments.outcome import (
    RESULT_HTML,
    RESULT_JSON,
    NoResult,
    build_result,
    check_name,
    result_dir,
    result_json,
)
from molt_society.report.experiments.page import render_result_html
from molt_society.report.svg import esc
from molt_society.runtime.logs import get_logger
from molt_society.warehouse import QueryError, Result
from molt_society.warehouse.sink_http import dumps_json

log = get_logger(__name__)

PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
"""Of the experiment pages: no script at all, inline styles (the result page is an offline document)."""

LIST_SQL = """
SELECT experiment, arm, max(control) AS control, countIf(status = {done:String}) AS done, count() AS runs
FROM experiments FINAL
GROUP BY experiment, arm
ORDER BY experiment, control DESC, arm
"""
FINGERPRINT_SQL = """
SELECT count() AS n, sum(version) AS v FROM experiments FINAL
WHERE experiment = {experiment:String} AND status = {done:String}
"""
PAGE_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1f2328}"
    "main{max-width:1000px;margin:0 auto;padding:24px}table{border-collapse:collapse;background:#fff}"
    "th,td{border-bottom:1px solid #eaecef;padding:.3rem .7rem;text-align:left}"
    ".note{color:#6b7280;font-size:.85rem}.error{color:#8a1c12}"
)


@dataclass
class _Built:
    fingerprint: tuple[int, int]
    html: str
    json: bytes


@dataclass
class ExperimentPages:
    """The handlers, with the snapshotter's settings and ClickHouse source, and results built from the
    table (by experiment)."""

    snap: Snapshotter
    built: dict[str, _Built] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def _rows(self, sql: str, **params: object) -> list[dict[str, Any]]:
        res = await self.snap.source.query(bind(sql, params))
        return [dict(zip(res.columns, r, strict=True)) for r in res.rows]

    async def listing(self) -> dict[str, Any]:
        """Experiments with their arms, and whether a written result exists; ``error`` if the table
        cannot be read (not created yet, ClickHouse unreachable)."""
        experiments: dict[str, dict[str, Any]] = {}
        error = None
        try:
            rows = await self._rows(LIST_SQL, done="done")
        except QueryError as exc:
            rows, error = [], str(exc)
        for r in rows:
            name = str(r["experiment"])
            e = experiments.setdefault(name, {"name": name, "arms": [], "done": 0, "runs": 0})
            e["arms"].append({"arm": str(r["arm"]), "control": bool(int(r["control"]))})
            e["done"] += int(r["done"])
            e["runs"] += int(r["runs"])
        for e in experiments.values():
            e["openable"] = _valid(e["name"])
            e["written"] = (
                e["openable"] and (result_dir(self.snap.settings, e["name"]) / RESULT_JSON).exists()
            )
        return {"experiments": list(experiments.values()), "error": error}

    async def result(self, name: str) -> _Built:
        """The written result of ``name``, else the one built from the table (``NoResult`` if none)."""
        folder = result_dir(self.snap.settings, name)
        html_path, json_path = folder / RESULT_HTML, folder / RESULT_JSON
        if html_path.is_file() and json_path.is_file():
            return _Built((-1, -1), html_path.read_text(encoding="utf-8"), json_path.read_bytes())
        async with self.lock:
            rows = await self._rows(FINGERPRINT_SQL, experiment=name, done="done")
            fingerprint = (int(rows[0]["n"]), int(rows[0]["v"] or 0)) if rows else (0, 0)
            known = self.built.get(name)
            if known is not None and known.fingerprint == fingerprint:
                return known
            loop = asyncio.get_running_loop()
            doc = await asyncio.to_thread(build_result, _BlockingSource(self.snap, loop), name)
            await self.snap.source.release()
            built = _Built(fingerprint, render_result_html(doc), result_json(doc))
            self.built[name] = built
            return built


class _BlockingSource:
    """The dashboard's async ClickHouse source as the blocking ``query`` that ``build_result`` calls from a
    worker thread (each query runs on the event loop's source, one at a time)."""

    def __init__(self, snap: Snapshotter, loop: asyncio.AbstractEventLoop) -> None:
        self.snap, self.loop = snap, loop

    def query(self, sql: str) -> Result:
        res = asyncio.run_coroutine_threadsafe(self.snap.source.query(sql), self.loop).result(timeout=300)
        return Result(res.columns, res.rows)


def _valid(name: str) -> bool:
    try:
        check_name(name)
    except ValueError:
        return False
    return True


def _page(title: str, body: str) -> web.Response:
    html = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="referrer" content="no-referrer"><title>{esc(title)}</title>'
        f"<style>{PAGE_STYLE}</style></head><body><main>{body}</main></body></html>\n"
    )
    return html_response(html)


def html_response(html: str, status: int = 200) -> web.Response:
    resp = web.Response(text=html, content_type="text/html", charset="utf-8", status=status)
    resp.headers["Content-Security-Policy"] = PAGE_CSP
    return resp


def _listing_html(doc: dict[str, Any]) -> str:
    rows: list[str] = []
    for e in doc["experiments"]:
        arms = ", ".join(a["arm"] + (" (control)" if a["control"] else "") for a in e["arms"])
        if e["openable"]:
            q = urllib.parse.quote(e["name"], safe="")
            link = f'<a href="/experiments/{q}/">result</a> · <a href="/experiments/{q}/result.json">JSON</a>'
            link += "" if e["written"] else ' <span class="note">(built from the table)</span>'
        else:
            link = '<span class="note">not a valid experiment name</span>'
        rows.append(
            f"<tr><td>{esc(e['name'])}</td><td>{esc(arms)}</td><td>{esc(e['done'])} / {esc(e['runs'])}</td>"
            f"<td>{link}</td></tr>"
        )
    error = f'<p class="error">The experiments table could not be read: {esc(doc["error"])}</p>'
    table = (
        "<table><thead><tr><th>experiment</th><th>arms</th><th>finished / runs</th><th></th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else '<p class="note">No experiment yet (<code>society experiment SPEC.toml</code>).</p>'
    )
    return (
        '<h1>Experiments</h1><p class="note"><a href="/">dashboard</a></p>'
        + (error if doc["error"] else "")
        + table
    )


def add_routes(app: web.Application, snap: Snapshotter) -> None:
    """Register the experiment routes on the dashboard's ``app`` (behind its middlewares)."""
    pages = ExperimentPages(snap)

    async def listing(request: web.Request) -> web.Response:
        return _page("Experiments", _listing_html(await pages.listing()))

    async def listing_json(request: web.Request) -> web.Response:
        return web.Response(body=dumps_json(await pages.listing()), content_type="application/json")

    async def result(request: web.Request, as_json: bool) -> web.Response:
        name = request.match_info["name"]
        if not _valid(name):
            raise web.HTTPNotFound(text="not an experiment name")
        try:
            built = await pages.result(name)
        except NoResult as exc:
            raise web.HTTPNotFound(text=str(exc)) from None
        except QueryError as exc:
            log.warning("dashboard.experiment_failed", experiment=name, error=str(exc))
            return web.Response(status=503, text=f"the experiment could not be read: {exc}")
        if as_json:
            return web.Response(body=built.json, content_type="application/json")
        return html_response(built.html)

    async def result_page(request: web.Request) -> web.Response:
        return await result(request, as_json=False)

    async def result_json_(request: web.Request) -> web.Response:
        return await result(request, as_json=True)

    app.router.add_get("/experiments", listing)
    app.router.add_get("/api/experiments", listing_json)
    app.router.add_get("/experiments/{name}/", result_page)
    app.router.add_get("/experiments/{name}/result.json", result_json_)
