"""The dashboard's web server (aiohttp): the page, its static files, and the JSON and live-stream API.

- ``GET /``: the page (static HTML; the figures are drawn by ``static/app.js`` as SVG from the data).
- ``GET /api/panels``: every panel with its SQL as it runs for this society (the page's "SQL" buttons).
- ``GET /api/snapshot``: the newest snapshot (see ``dashboard.snapshot``) as JSON.
- ``GET /api/stream``: the snapshots as server-sent events, one per refresh; the browser's EventSource
  reconnects by itself if the dashboard restarts.
- ``GET /healthz``: liveness.
- ``GET /experiments`` and below: the experiments and their results (``dashboard.experiments``).

Every response carries a strict Content-Security-Policy (scripts and styles only from this server, no
inline script, no plugins, no framing). The page renders agent-written text with ``textContent`` only;
the policy is a second wall behind that. The experiment pages (offline documents without any script) set
their own: no script at all, inline styles only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path

from aiohttp import web

from molt_society.dashboard.experiments import add_routes as add_experiment_routes
from molt_society.dashboard.panels import PANELS
from molt_society.dashboard.snapshot import Snapshotter
from molt_society.runtime import process_status
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.runtime.web_guard import check_bind, guard
from molt_society.warehouse.sink_http import dumps_json  # the same JSON as the sink's /query answers

log = get_logger(__name__)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
STATIC = Path(str(resources.files(__package__).joinpath("static")))
SNAPSHOT_KEY = web.AppKey("snapshotter", Snapshotter)


@web.middleware
async def security_headers(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    resp = await handler(request)
    resp.headers.setdefault("Content-Security-Policy", CSP)  # the experiment pages set a stricter one
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "index.html")


async def panels(request: web.Request) -> web.Response:
    snap = request.app[SNAPSHOT_KEY]
    body = [
        {
            "id": p.id,
            "title": p.title,
            "description": p.description,
            "queries": [{"name": q.name, "sql": q.render(snap.society)} for q in p.queries],
            "extra_sources": list(p.extra_sources),
        }
        for p in PANELS
    ]
    return web.Response(
        body=dumps_json({"society": snap.society, "panels": body}), content_type="application/json"
    )


async def snapshot(request: web.Request) -> web.Response:
    snap = request.app[SNAPSHOT_KEY]
    latest = snap.latest or await snap.next_after(0, 30.0)
    if latest is None:
        return web.Response(status=503, text="no snapshot yet")
    return web.Response(body=dumps_json(latest), content_type="application/json")


async def stream(request: web.Request) -> web.StreamResponse:
    snap = request.app[SNAPSHOT_KEY]
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    seq = 0
    try:
        await resp.write(b"retry: 2000\n\n")
        while True:
            latest = snap.latest if snap.latest is not None and snap.latest["seq"] > seq else None
            if latest is None:
                latest = await snap.next_after(seq, 15.0)
            if latest is None:
                await resp.write(b": keep-alive\n\n")
                continue
            seq = latest["seq"]
            await resp.write(b"event: snapshot\ndata: " + dumps_json(latest) + b"\n\n")
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return resp


async def healthz(request: web.Request) -> web.Response:
    snap = request.app[SNAPSHOT_KEY]
    return web.json_response({"ok": True, "society": snap.society, "seq": snap.seq})


def make_app(
    snapshotter: Snapshotter, port: Callable[[], int | None] = lambda: None, extra_hosts: tuple[str, ...] = ()
) -> web.Application:
    """The dashboard's routes behind the Host/Origin/Content-Type checks (``runtime.web_guard``) of the
    bound ``port()``."""
    app = web.Application(middlewares=[guard(port, extra_hosts), security_headers], client_max_size=64 << 10)
    app[SNAPSHOT_KEY] = snapshotter
    app.router.add_get("/", index)
    app.router.add_get("/api/panels", panels)
    app.router.add_get("/api/snapshot", snapshot)
    app.router.add_get("/api/stream", stream)
    app.router.add_get("/healthz", healthz)
    add_experiment_routes(app, snapshotter)
    app.router.add_static("/static/", STATIC, show_index=False)
    return app


def state_file(settings: Settings, society: str) -> Path:
    return settings.state_dir / society / "dashboard.json"


async def serve(settings: Settings, society: str, bootstrap: str | None, stop: asyncio.Event) -> None:
    """Serve the dashboard of ``society`` until ``stop`` is set; writes its URL to ``dashboard.json``."""
    host, port = settings.dashboard_host, settings.dashboard_port
    check_bind(host, allow_remote=settings.allow_remote, what="dashboard")
    bound_port: list[int] = []
    snapshotter = Snapshotter(settings, society, bootstrap)
    app = make_app(
        snapshotter, lambda: bound_port[0] if bound_port else None, tuple(settings.allowed_hosts.split(","))
    )
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except OSError as exc:
        if port == 0:
            raise
        log.warning("dashboard.port_busy", port=port, error=str(exc))
        site = web.TCPSite(runner, host, 0)
        await site.start()
    bound = runner.addresses[0]
    bound_port.append(int(bound[1]))
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104 (naming, not binding)
    url = f"http://{shown}:{bound[1]}/"
    path = state_file(settings, society)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": url, "started_at": time.time()}))
    log.info("dashboard.started", url=url, society=society, bootstrap=bootstrap)
    process_status.mark_ready(url=url)
    tasks = [asyncio.create_task(snapshotter.run(stop))]
    if snapshotter.broker is not None:
        tasks.append(asyncio.create_task(snapshotter.broker.run(stop)))
    try:
        await stop.wait()
    finally:
        for t in tasks:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(t, 6)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        await runner.cleanup()
        await snapshotter.close()
        log.info("dashboard.stopped", url=url)
