"""The dashboard's experiment pages on a real server and a real chDB: the list, a result built from the
table, a written result, names that are refused, and the Host/Origin checks in front of them all."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from molt_society.dashboard.experiments import PAGE_CSP
from molt_society.dashboard.server import make_app
from molt_society.dashboard.snapshot import Snapshotter
from molt_society.report.experiments.outcome import RESULT_HTML, RESULT_JSON, result_dir
from molt_society.runtime.settings import Settings
from molt_society.warehouse.client import connect
from molt_society.warehouse.schema import ensure_schema

FORK = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
EVIL = "<script>alert(1)</script>"
COLUMNS = ["experiment", "arm", "seed", "society", "control", "run_seed", "base_society", "fork_tick",
           "fork_at", "ticks", "status", "history_events", "history_verified", "spec_sha256", "started_at",
           "finished_at", "wall_seconds", "version"]  # fmt: skip


def _store(settings: Settings) -> None:
    client = connect(settings.clickhouse_url)
    try:
        ensure_schema(client)
        rows: list[list[Any]] = []
        metrics: list[list[Any]] = []
        for experiment in ("live", EVIL):
            for arm, control, base in (("control", 1, 10.0), (EVIL, 0, 20.0)):
                for seed in (0, 1):
                    society = f"{experiment}.{arm}.s{seed}"
                    rows.append([experiment, arm, seed, society, control, seed, "base", 5, FORK, 3, "done",
                                 1, 1, "00", FORK, FORK, 1.0, 1])  # fmt: skip
                    for w in range(2):
                        start = FORK + timedelta(hours=w)
                        end = start + timedelta(hours=1)
                        value = base + seed + w
                        metrics.append([uuid.uuid4(), society, "events_total", start, end, "", value,
                                        datetime.now(UTC), "t", 0, w])  # fmt: skip
        client.insert("experiments", rows, column_names=COLUMNS)
        client.insert(
            "metrics",
            metrics,
            column_names=[
                "metric_id",
                "society",
                "metric",
                "window_start",
                "window_end",
                "dim",
                "value",
                "emitted_at",
                "_topic",
                "_partition",
                "_offset",
            ],
        )
    finally:
        client.close()


def test_experiment_pages(tmp_path: Path) -> None:
    settings = Settings(clickhouse_url=f"chdb://{tmp_path / 'ch'}", state_dir=tmp_path / "state")
    _store(settings)
    written = result_dir(settings, "written")
    written.mkdir(parents=True)
    (written / RESULT_HTML).write_text("<!DOCTYPE html><p>the runner's page</p>")
    (written / RESULT_JSON).write_bytes(b'{"experiment": "written"}')

    async def go() -> None:
        snap = Snapshotter(settings, "demo", None)
        ports: list[int] = []
        server = TestServer(make_app(snap, lambda: ports[0] if ports else None), host="127.0.0.1")
        client = TestClient(server)
        await client.start_server()
        ports.append(int(server.port or 0))
        try:
            page = await client.get("/experiments")
            assert page.status == 200
            assert page.headers["Content-Security-Policy"] == PAGE_CSP
            html = await page.text()
            assert "<script" not in html
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
            assert 'href="/experiments/live/"' in html
            assert "not a valid experiment name" in html  # the evil experiment is listed, not linked

            doc = json.loads(await (await client.get("/api/experiments")).text())
            live = next(e for e in doc["experiments"] if e["name"] == "live")
            assert live["done"] == 4
            assert live["openable"]
            assert not live["written"]
            assert {a["arm"] for a in live["arms"]} == {"control", EVIL}

            built = await client.get("/experiments/live/")
            assert built.status == 200
            assert built.headers["Content-Security-Policy"] == PAGE_CSP
            body = await built.text()
            assert "Experiment: live" in body
            assert "<script" not in body
            result = json.loads(await (await client.get("/experiments/live/result.json")).text())
            effect = next(m for m in result["metrics"] if m["key"] == "events_total")["effects"][0]
            assert effect["arm"] == EVIL
            assert effect["difference"] == 10.0

            mine = await client.get("/experiments/written/")
            assert await mine.text() == "<!DOCTYPE html><p>the runner's page</p>"
            assert (
                await (await client.get("/experiments/written/result.json")).read()
                == b'{"experiment": "written"}'
            )

            for bad in (
                "/experiments/..%2Fsecret/",
                "/experiments/%3Cscript%3E/result.json",
                "/experiments/nope/",
            ):
                assert (await client.get(bad)).status == 404, bad
            foreign = await client.get("/experiments", headers={"Host": "evil.example"})
            assert foreign.status == 403
            cross = await client.get(
                "/experiments/live/result.json", headers={"Origin": "http://evil.example"}
            )
            assert cross.status == 403
        finally:
            await client.close()
            await snap.close()

    asyncio.run(go())
