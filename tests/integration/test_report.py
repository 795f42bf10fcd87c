"""``society report`` end to end: on every shared MoltBook sample, a simulated society, degenerate inputs
and a live society whose streaming metrics it checks; each report opened offline in real Chromium.

Real chDB, the real embedding model, the real broker and stream processor for the live society.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from stack_helpers import ARTIFACTS, browser_page, make_settings, run_ticks, running_stack

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from stored_events import open_chdb, store_events
from test_importers import DATA, SAMPLES

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.offline import simulate
from molt_society.importers import import_path
from molt_society.report.build import SPECS, build_report
from molt_society.report.embeddings import Encoder
from molt_society.report.model import Report, Scalar
from molt_society.report.verdicts import VERDICTS
from molt_society.report.warehouse_source import ClientWarehouse, sink_warehouse
from molt_society.report.write import report_json, write_report
from molt_society.schemas.events import AgentRegistered, CommentCreated, Event, PostCreated
from molt_society.schemas.ids import uuid7

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(1800),  # the module's reports: about 9 minutes alone, longer beside another lane
    pytest.mark.skipif(not DATA.is_dir(), reason=f"MoltBook samples not found at {DATA}"),
]
T0 = datetime(2026, 2, 2, 8, 0, tzinfo=UTC)


def _degenerate() -> dict[str, list[Event]]:
    def post(soc: str, actor: str, pid: str, at: datetime, title: str) -> Event:
        body = {"post_id": pid, "submolt": "general", "title": title, "content": "a body of text " + pid}
        return PostCreated(event_id=uuid7(at), society=soc, actor=actor, occurred_at=at, body=body)

    def comment(soc: str, actor: str, cid: str, pid: str, at: datetime) -> Event:
        body = {"comment_id": cid, "post_id": pid, "depth": 1, "content": "a reply " + cid}
        return CommentCreated(event_id=uuid7(at), society=soc, actor=actor, occurred_at=at, body=body)

    one = [
        post("deg_one_agent", "solo", f"p{i}", T0 + timedelta(hours=7 * i), f"thoughts {i}") for i in range(6)
    ]
    one += [
        comment("deg_one_agent", "solo", f"c{i}", f"p{i}", T0 + timedelta(hours=7 * i, minutes=5))
        for i in range(6)
    ]
    day = [
        post("deg_one_day", f"a{i % 4}", f"p{i}", T0 + timedelta(minutes=9 * i), f"idea {i}")
        for i in range(12)
    ]
    day += [
        comment("deg_one_day", f"a{(i + 1) % 4}", f"c{i}", f"p{i}", T0 + timedelta(minutes=9 * i + 3))
        for i in range(12)
    ]
    quiet = [
        post("deg_no_comments", f"a{i % 5}", f"p{i}", T0 + timedelta(hours=5 * i), f"note {i}")
        for i in range(15)
    ]
    reg = [
        AgentRegistered(
            event_id=uuid7(T0),
            society="deg_only_agents",
            actor=f"a{i}",
            occurred_at=T0,
            body={"name": f"A{i}"},
        )
        for i in range(3)
    ]
    return {"deg_one_agent": one, "deg_one_day": day, "deg_no_comments": quiet, "deg_only_agents": reg}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClientWarehouse, list[str]]]:
    """Every shared sample, a simulated society and the degenerate societies in one chDB."""
    client = open_chdb(str(tmp_path_factory.mktemp("reports") / "ch"))
    names = []
    for name in sorted(SAMPLES):
        soc = "sample_" + name.replace("-", "_")
        store_events(
            client, [e.model_copy(update={"society": soc}) for e in import_path(SAMPLES[name][0], soc).events]
        )
        names.append(soc)
    sim = simulate(
        seed=3,
        agents=300,
        ticks=120,
        tick_seconds=1800.0,
        behaviour=load_behaviour(),
        start=T0,
        society="simulated",
    )
    store_events(client, sim.events)
    names.append("simulated")
    for soc, events in _degenerate().items():
        store_events(client, events)
        names.append(soc)
    names.append("deg_empty")  # nothing stored at all
    wh = ClientWarehouse(client)
    yield wh, names
    wh.close()


NOT_EMBEDDED = {"sample_observatory_posts_raw", "sample_kelkalot_csv"}
"""Reported with ``embed=False`` (``--no-embeddings``): their 6,000 and 1,764 distinct real texts would take
the real model about 3 and 1 CPU minutes (3 to 6 beside the other lane of ``make test``); the embedding
sections run here on the real texts of the other samples (the daily export's 632 among them) and on the
simulated society, and against independent computations in tests/unit/report/test_report_layers.py."""
EMBEDDED_ONLY = ("semantic", "individual")


@pytest.fixture(scope="module")
def reports(warehouse: tuple[ClientWarehouse, list[str]]) -> dict[str, Report]:
    wh, names = warehouse
    enc = Encoder()
    return {n: build_report(wh, n, encoder=enc, embed=n not in NOT_EMBEDDED) for n in names}


def _check_complete(rep: Report) -> None:
    """Every diagnostic ran (those without embeddings where the report was built without); every missing
    number says why; nothing is NaN."""
    specs = [s.key for s in SPECS if rep.society not in NOT_EMBEDDED or s.key not in EMBEDDED_ONLY]
    assert [s.key for s in rep.sections] == ["comparisons", *specs]
    assert rep.settings["embeddings"] == ("skipped" if rep.society in NOT_EMBEDDED else "all-MiniLM-L6-v2")
    assert [(s.key, s.error) for s in rep.sections if s.error] == []
    published = {k for k, sc in rep.scalars().items() if sc.published is not None}
    assert published <= {c.key for c in rep.comparisons}, rep.society  # every published figure is judged
    for c in rep.comparisons:
        assert c.verdict in VERDICTS, (rep.society, c.key)
        assert len(c.why) > 10, (rep.society, c.key)
    for s in rep.sections:
        for i in s.items:
            if isinstance(i, Scalar):
                if i.value is None:
                    assert len(i.reason or "") > 10, (rep.society, i.key)
                else:
                    assert math.isfinite(float(i.value)), (rep.society, i.key)
    doc = json.loads(report_json([rep]))  # strict JSON: no NaN or Infinity tokens
    assert doc["reports"][0]["society"] == rep.society
    assert [c["verdict"] for c in doc["reports"][0]["comparisons"]] == [c.verdict for c in rep.comparisons]


def _open_offline(html: Path, shot: Path | None = None) -> dict[str, Any]:
    """Open ``html`` from disk in Chromium; every request must be the file itself."""
    with browser_page() as page:
        requests: list[str] = []
        errors: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(html.as_uri())
        figures = page.evaluate(
            """() => [...document.querySelectorAll('svg.figure')].map(svg => {
                 const r = svg.getBoundingClientRect();
                 const marks = [...svg.querySelectorAll('.mark')].filter(m => {
                   const b = m.getBoundingClientRect(); return b.width > 0 || b.height > 0; });
                 return {key: svg.dataset.key, w: r.width, h: r.height, marks: marks.length};
               })"""
        )
        nodata = page.evaluate("() => document.querySelectorAll('.nodata').length")
        if shot is not None:
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=False)
    assert requests == [html.as_uri()], requests
    assert errors == []
    return {"figures": figures, "nodata": nodata}


def test_report_on_every_sample_and_a_simulated_society(reports: dict[str, Report], tmp_path: Path) -> None:
    for name in [n for n in reports if n.startswith("sample_")] + ["simulated"]:
        rep = reports[name]
        assert rep.events > 0
        _check_complete(rep)
        values = rep.scalars()
        assert values["activity.posts"].value
        assert values["threads.share_posts_without_comment"].value is not None
        html, _ = write_report([rep], tmp_path / f"{name}.html")
        seen = _open_offline(html)
        assert seen["figures"], name
        for fig in seen["figures"]:
            assert (fig["w"] > 100, fig["h"] > 50, fig["marks"] > 0) == (True, True, True), (name, fig)
    sim = reports["simulated"].scalars()
    for key in (
        "semantic.mean_pairwise",
        "collective.top1_share",
        "roles.silhouette",
        "lexical.birth_rate_n1",
    ):
        assert sim[key].value is not None, (key, sim[key].reason)


def test_degenerate_societies_say_what_could_not_be_computed(
    reports: dict[str, Report], tmp_path: Path
) -> None:
    expect_missing = {
        "deg_empty": ["activity.days", "threads.share_posts_without_comment", "semantic.mean_pairwise"],
        "deg_only_agents": ["activity.days", "collective.top1_share"],
        "deg_one_agent": ["collective.top1_share", "collective.topk_churn"],
        "deg_one_day": ["collective.topk_churn", "semantic.centroid_similarity", "lexical.death_rate_n1"],
        "deg_no_comments": ["threads.share_top_level_comments", "collective.top1_share"],
    }
    for name, keys in expect_missing.items():
        rep = reports[name]
        _check_complete(rep)
        values = rep.scalars()
        for key in keys:
            assert key in values, (name, key)
            assert values[key].value is None, (name, key)
            assert values[key].reason, (name, key)
    assert "no events stored" in reports["deg_empty"].scalars()["activity.days"].reason  # type: ignore[operator]
    html, _ = write_report([reports["deg_empty"], reports["deg_one_day"]], tmp_path / "degenerate.html")
    seen = _open_offline(html, ARTIFACTS / "report-degenerate.png")
    assert seen["nodata"] > 0  # charts without data say so instead of drawing nothing
    assert "not computed" in html.read_text()


def test_comparison_of_a_moltbook_sample_and_a_simulated_society(
    reports: dict[str, Report], tmp_path: Path
) -> None:
    a, b = reports["sample_observatory_daily"], reports["simulated"]
    html, js = write_report([a, b], tmp_path / "compare.html")
    doc = json.loads(js.read_text())
    assert [r["society"] for r in doc["reports"]] == [a.society, b.society]
    assert doc["published"]["roles.silhouette"]["value"] == 0.91
    text = html.read_text()
    assert "MoltBook (published)" in text
    assert a.society in text
    assert b.society in text
    seen = _open_offline(html, ARTIFACTS / "report-comparison-real.png")
    assert all(f["marks"] > 0 for f in seen["figures"])


def test_live_society_report_through_the_sink_agrees_with_streaming(
    broker: str, tmp_path: Path, society_name: str
) -> None:
    """A running society: the report reads and stores embeddings through the sink (it owns chDB), and the
    pipeline's streaming metrics equal their batch recomputation."""
    settings = make_settings(broker, tmp_path, agents=200, window_seconds=600.0)
    with running_stack(settings, society_name) as stack:
        run_ticks(stack, 60)
        wh = sink_warehouse(settings, stack.sink_url())
        rep = build_report(wh, society_name)
    _check_complete(rep)
    values = rep.scalars()
    windows = values["agreement.windows"].value
    assert windows is not None
    assert windows >= 5
    assert values["agreement.max_abs_diff"].value is not None
    assert values["agreement.max_abs_diff"].value <= 1e-9
    table = next(i for s in rep.sections for i in s.items if i.key == "agreement.table")
    compared = {row[0] for row in table.rows}  # type: ignore[union-attr]
    assert {
        "PageRank top1 share",
        "top-k churn",
        "events per window and type",
        "depth histogram (last window)",
    } <= compared
    assert values["collective.window_seconds"].value == 86400.0  # the study's days
    assert values["collective.variant_stream_window.window_seconds"].value == 600.0  # the stream's, labelled
    assert values["semantic.texts"].value


def test_cli_writes_html_and_json(tmp_path: Path) -> None:
    """The command as a user runs it, in its own process on its own chDB directory."""
    events = _degenerate()["deg_one_day"]
    store = subprocess.run(
        [sys.executable, "-c", STORE, str(tmp_path / "ch")],
        input=orjson.dumps([e.model_dump(mode="json") for e in events]),
        capture_output=True,
        check=False,
    )
    assert store.returncode == 0, store.stderr.decode()
    out = tmp_path / "out" / "r.html"
    env = {
        **os.environ,
        "CLICKHOUSE_URL": f"chdb://{tmp_path / 'ch'}",
        "SOCIETY_STATE_DIR": str(tmp_path / "st"),
    }
    society = str(Path(sys.executable).parent / "society")
    cmd = [society, "report", "deg_one_day", "--out", str(out), "--only", "activity", "--only", "threads"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert str(out.resolve()) in res.stdout.replace("\n", "")
    assert json.loads(out.with_suffix(".json").read_text())["reports"][0]["events"] == len(events)
    bad = subprocess.run(
        [society, "report", "x'; DROP TABLE events; --"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "invalid society name" in bad.stderr


STORE = """
import sys, orjson
sys.path.insert(0, {!r})
from pydantic import TypeAdapter
from molt_society.schemas.events import Event
from stored_events import open_chdb, store_events
events = TypeAdapter(list[Event]).validate_python(orjson.loads(sys.stdin.buffer.read()))
client = open_chdb(sys.argv[1])
store_events(client, events)
client.close()
""".format(str(Path(__file__).resolve().parents[1] / "unit"))
