"""Dashboard pieces without a broker: panel SQL, the fitted line, the server's headers, Grafana parity."""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from molt_society.dashboard import grafana
from molt_society.dashboard.panels import PANELS
from molt_society.dashboard.server import CSP, STATIC, make_app
from molt_society.dashboard.snapshot import Snapshotter, collect_panels, power_law_line
from molt_society.dashboard.sources import ClickHouseSource
from molt_society.runtime.settings import Settings
from molt_society.schemas.society_name import BadSocietyName, check_society_name


@pytest.mark.parametrize("name", ["demo", "t1a2b3", "replay_20260101_120000", "a.b-c"])
def test_valid_society_names_are_quoted_into_the_sql(name: str):
    sql = PANELS[0].queries[0].render(name)
    assert f"society = '{name}'" in sql
    assert "{society}" not in sql


@pytest.mark.parametrize("name", ["x' OR 1=1 --", "", "a b", "-lead", "é", "a;b", "a" * 200])
def test_other_society_names_are_refused(name: str):
    with pytest.raises(BadSocietyName):
        check_society_name(name)
    with pytest.raises(BadSocietyName):
        PANELS[0].queries[0].render(name)


def _ccdf_reference(alpha: float, s: int, xmin: int, terms: int = 2_000_000) -> float:
    """sum_{k>=s} k^-alpha / sum_{k>=xmin} k^-alpha by direct summation plus an Euler-Maclaurin tail."""

    def tail(start: int) -> float:
        head = math.fsum(k**-alpha for k in range(start, terms))
        return head + terms ** (1 - alpha) / (alpha - 1) + 0.5 * terms**-alpha

    return tail(s) / tail(xmin)


def test_power_law_line_is_the_discrete_ccdf_anchored_at_xmin():
    alpha, xmin = 2.4, 3
    ccdf = [{"size": s, "ccdf": c} for s, c in [(1, 1.0), (2, 0.6), (3, 0.4), (5, 0.2), (9, 0.1), (40, 0.01)]]
    line = power_law_line(ccdf, {"alpha": alpha, "xmin": float(xmin)})
    assert [p[0] for p in line] == [3, 5, 9, 40]
    for s, y in line:
        assert y == pytest.approx(0.4 * _ccdf_reference(alpha, s, xmin), rel=1e-6)


def test_power_law_line_is_empty_without_a_fit():
    ccdf = [{"size": 1, "ccdf": 1.0}]
    assert power_law_line(ccdf, {}) == []
    assert power_law_line(ccdf, {"alpha": 2.0, "xmin": 5.0}) == []  # no observed size in the tail


def test_every_panel_query_runs_on_an_empty_society(tmp_path: Path):
    settings = Settings(clickhouse_url=f"chdb://{tmp_path / 'ch'}", state_dir=tmp_path / "state")

    async def go() -> dict[str, Any]:
        src = ClickHouseSource(settings, "empty")
        try:
            return await collect_panels(src, "empty")
        finally:
            await src.close()

    out = asyncio.run(go())
    assert set(out) == {p.id for p in PANELS}
    for p in PANELS:
        for q in p.queries:
            res = out[p.id]["queries"][q.name]
            assert "error" not in res, (p.id, q.name, res)
    assert out["activity"]["queries"]["totals"]["rows"][0]["events"] == 0
    assert out["content"]["queries"]["hot"]["rows"] == []


def test_a_failing_source_marks_every_panel_instead_of_crashing(tmp_path: Path):
    settings = Settings(clickhouse_url="http://127.0.0.1:9/db", state_dir=tmp_path / "state")

    async def go() -> dict[str, Any]:
        snap = Snapshotter(settings, "nowhere", None)
        try:
            return await snap.refresh()
        finally:
            await snap.close()

    out = asyncio.run(go())
    assert out["clickhouse"]["ok"] is False
    for p in PANELS:
        for q in p.queries:
            assert out["panels"][p.id]["queries"][q.name]["error"]


def test_server_sends_a_strict_content_security_policy_and_the_panels_sql(tmp_path: Path):
    settings = Settings(clickhouse_url=f"chdb://{tmp_path / 'ch'}", state_dir=tmp_path / "state")

    async def go() -> None:
        snap = Snapshotter(settings, "demo", None)
        ports: list[int] = []
        server = TestServer(make_app(snap, lambda: ports[0] if ports else None), host="127.0.0.1")
        client = TestClient(server)
        await client.start_server()
        ports.append(int(server.port or 0))
        try:
            page = await client.get("/")
            assert page.status == 200
            assert page.headers["Content-Security-Policy"] == CSP
            assert page.headers["X-Content-Type-Options"] == "nosniff"
            js = await client.get("/static/app.js")
            assert js.headers["Content-Security-Policy"] == CSP
            doc = json.loads(await (await client.get("/api/panels")).text())
            assert [p["id"] for p in doc["panels"]] == [p.id for p in PANELS]
            for shown, p in zip(doc["panels"], PANELS, strict=True):
                assert [q["sql"] for q in shown["queries"]] == [q.render("demo") for q in p.queries]
            missing = await client.get("/static/../panels.py")
            assert missing.status in (403, 404)
        finally:
            await client.close()
            await snap.close()

    asyncio.run(go())
    assert "script-src 'self'" in CSP
    assert "unsafe-inline" not in CSP


def test_page_scripts_never_parse_strings_as_html():
    """The page code builds DOM nodes and sets textContent; no API that parses markup or code."""
    forbidden = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function"
        r"|setAttribute\(\s*['\"]on"
    )
    for path in STATIC.glob("*.js"):
        hits = forbidden.findall(path.read_text(encoding="utf-8"))
        assert hits == [], (path.name, hits)
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    assert "<script>" not in html  # no inline script (the policy would block it anyway)
    assert "http://" not in html
    assert "https://" not in html  # nothing loaded from elsewhere


def test_grafana_dashboard_is_current_and_uses_the_same_sql():
    assert grafana.main(["--check"]) == 0
    doc = json.loads(grafana.OUT.read_text(encoding="utf-8"))
    sqls = [t["rawSql"] for p in doc["panels"] for t in p["targets"]]
    by_id = {p.id: p for p in PANELS}
    expected = [by_id[pid].query(qn).sql.strip() for pid, qn, *_ in grafana.LAYOUT]
    assert [s.replace("'${society}'", "{society}") for s in sqls] == expected
    covered = {(pid, qn) for pid, qn, *_ in grafana.LAYOUT}
    assert covered == {(p.id, q.name) for p in PANELS for q in p.queries}
