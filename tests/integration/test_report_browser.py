"""The offline HTML report in real headless Chromium: every figure drawn, nothing asked of the network."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from stack_helpers import ARTIFACTS, browser_page

from molt_society.report.model import Cell, Figure, Report, Scalar, Section, Series, Table
from molt_society.report.render import render_html

pytestmark = pytest.mark.integration

T0 = 1_714_521_600.0  # 2024-05-01 00:00 UTC
DEGREES = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 0, -3, math.nan, math.inf]
CCDF: list[float | None] = [1.0, 0.62, 0.45, 0.3, 0.19, 0.11, 0.065, 0.04, 0.022, 0.012, 0.006, 0.003]
CCDF += [0.9, 0.8, 0.5, 0.4]  # at the degrees a log axis cannot show
FITTED = [1.0, 10.0, 100.0, 300.0]


def points_drawn() -> int:
    """Points of the CCDF with a finite positive x and y: what a log-log chart can show."""
    return sum(1 for x, y in zip(DEGREES, CCDF, strict=True) if math.isfinite(x) and x > 0 and y and y > 0)


def synthetic(society: str, scale: float) -> Report:
    hours = [T0 + i * 3600 * 6 for i in range(40)]
    activity: list[float | None] = [scale * (50 + 30 * math.sin(i / 3)) for i in range(40)]
    activity[17] = None  # a gap in the line
    return Report(
        society=society,
        generated_at="2024-05-11T09:30:00Z",
        events=int(48_213 * scale),
        settings={"seed": 7, "window_seconds": 600.0, "agents": 300},
        sections=[
            Section(
                key="activity",
                title="Activity over time",
                description="Events per six hours; the gap is a window the sink did not receive.",
                seconds=0.84,
                items=[
                    Scalar(
                        "events_per_agent",
                        "events per agent",
                        160.7 * scale,
                        published=142.0,
                        published_source="MoltBook paper, table 2",
                    ),
                    Scalar(
                        "reply_rate",
                        "share of posts with a reply",
                        None,
                        reason="no comment events: the society ran without the comment action",
                        published=0.34,
                        published_source="MoltBook paper, §4.1",
                    ),
                    Scalar("agents", "active agents", int(300 * scale)),
                    Figure(
                        "activity",
                        "Events per six hours",
                        "time",
                        "events",
                        [Series("events", hours, activity)],
                        x_kind="time",
                    ),
                ],
            ),
            Section(
                key="degrees",
                title="Degree distribution",
                description="Complementary CDF of the in-degree with the fitted power law.",
                seconds=2.1,
                items=[
                    Figure(
                        "ccdf",
                        "In-degree CCDF (log-log)",
                        "in-degree k",
                        "P(K ≥ k)",
                        [
                            Series("empirical", [float(d) for d in DEGREES], CCDF, "points"),
                            Series("power law fit", FITTED, [1.0 / x**0.9 for x in FITTED], "line"),
                        ],
                        log_x=True,
                        log_y=True,
                    ),
                    Figure(
                        "kinds",
                        "Events by kind",
                        "kind",
                        "events",
                        [Series("events", [0, 1, 2, 3], [scale * 1200, scale * 3400, 800, 95], "bars")],
                        x_kind="category",
                        categories=["post", "comment", "upvote", "<b>follow</b>"],
                    ),
                    Table(
                        "top",
                        "Most followed agents",
                        ["agent", "followers", "share"],
                        [[f"agent-{i:03d}", 500 - i * 7, (500 - i * 7) / 9000] for i in range(12)],
                    ),
                ],
            ),
            Section(key="topics", title="Topics", description="Embedding clusters.", error="model not found"),
        ],
    )


@pytest.mark.parametrize("compare", [False, True], ids=["single", "comparison"])
def test_report_in_chromium(tmp_path: Path, compare: bool) -> None:
    reports = [synthetic("alpha", 1.0)] + ([synthetic("beta", 1.7)] if compare else [])
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(reports), encoding="utf-8")

    with browser_page(width=1200, height=900) as page:
        errors: list[str] = []
        remote: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: None if r.url.startswith("file://") else remote.append(r.url))
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")

        figures = page.locator("svg.figure")
        assert figures.count() == 3
        for i in range(figures.count()):
            svg = figures.nth(i)
            box = svg.bounding_box()
            assert box is not None
            assert box["width"] > 300, box
            assert box["height"] > 100, box
            marks = svg.locator(".mark")
            assert marks.count() >= 1
            sizes = [marks.nth(j).bounding_box() for j in range(marks.count())]
            assert any(b is not None and b["width"] > 0 and b["height"] > 0 for b in sizes)

        circles = page.locator('svg.figure[data-key="ccdf"] circle.mark').count()
        assert circles == points_drawn() * len(reports)
        assert page.locator('svg.figure[data-key="activity"] polyline.mark').count() == 2 * len(reports)
        assert page.locator('svg.figure[data-key="kinds"] rect.mark').count() == 4 * len(reports)
        assert page.locator("section.diag").count() == 3
        assert page.locator("text=not computed").count() == len(reports)
        assert page.locator(".notice.error").count() == len(reports)
        assert page.locator("script").count() == 0
        assert page.locator("svg.figure text", has_text="<b>follow</b>").count() == 1

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = "report-comparison.png" if compare else "report.png"
        page.screenshot(path=str(ARTIFACTS / name), full_page=True)

    assert not errors, errors
    assert not remote, remote


def test_hostile_text_stays_text(tmp_path: Path) -> None:
    """Agent-written strings with markup in every field: shown as text, nothing runs, nothing is fetched."""
    bad = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "<svg onload=alert(1)>"]
    bad.append("<img src='https://example.invalid/x.png'>")
    row: list[Cell] = list(bad)
    series = [Series(b, [0, 1, 2], [1.0, 2.0, 3.0], "bars") for b in bad]
    figure = Figure(bad[0], bad[1], bad[2], bad[3], series, x_kind="category", categories=bad[:3])
    section = Section(bad[1], bad[0], bad[2], [Scalar(bad[3], bad[0], None, reason=bad[1], unit=bad[2]),
                      Table(bad[2], bad[3], bad, [row, row]), figure], error=bad[3])  # fmt: skip
    page_file = tmp_path / "hostile.html"
    page_file.write_text(
        render_html([Report(bad[0], bad[1], 1, [section], {bad[2]: bad[3]})]), encoding="utf-8"
    )
    with browser_page() as page:
        dialogs: list[str] = []
        remote: list[str] = []

        def on_dialog(d: Any) -> None:
            dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", on_dialog)
        page.on("request", lambda r: None if r.url.startswith("file://") else remote.append(r.url))
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        assert page.locator("script, img, iframe, object").count() == 0
        assert page.locator("svg").count() == 1
        assert bad[0] in page.locator("h1").inner_text()
        assert page.locator("table.data td", has_text=bad[1]).count() == 2
        page.screenshot(path=str(ARTIFACTS / "report-hostile-text.png"), full_page=True)
    assert not dialogs
    assert not remote
