"""The offline HTML report: escaping of every data string, layout, figures on odd data, well-formedness."""

from __future__ import annotations

import html
import math
import re
from html.parser import HTMLParser

import pytest

from molt_society.report.model import Figure, Item, Report, Scalar, Section, Series, Table
from molt_society.report.render import render_html
from molt_society.report.svg import figure_svg, fmt_number, log_axis, nice_ticks, time_axis

PAYLOADS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'><svg onload=alert(1)>",
    "</title><script>alert(2)</script>",
    "</style><script>alert(3)</script>",
    "javascript:alert(4)",
    "https://evil.example/x.png",
]
TAGS = set(
    """html head meta title style body main header footer nav section details summary h1 h2 h3 h4 p span
    strong small code div ol li a table thead tbody tr th td figure figcaption svg g line path polyline circle
    rect text""".split()  # noqa: SIM905
)
ATTRIBUTES = set(
    """lang charset http-equiv content name class id href scope data-key data-series viewbox width height role
    font-size preserveaspectratio x y x1 x2 y1 y2 cx cy r d points fill fill-opacity stroke stroke-width
    stroke-linejoin stroke-linecap stroke-dasharray text-anchor transform""".split()  # noqa: SIM905
)
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "embed", "source", "track"}


class Tags(HTMLParser):
    """Every start tag with its attributes; fails on a tag closed out of order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.errors: list[str] = []
        self.texts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()


def parse(doc: str) -> Tags:
    p = Tags()
    p.feed(doc)
    p.close()
    assert not p.errors, p.errors[:5]
    assert not p.stack, p.stack
    return p


def check_safe(doc: str) -> Tags:
    """No script, no event handler, no remote reference: only elements and attributes the renderer writes."""
    p = parse(doc)
    assert "<script" not in doc.lower()
    for tag, attrs in p.tags:
        assert tag in TAGS, tag
        for name, value in attrs:
            assert name in ATTRIBUTES, (tag, name)
            if name == "href":
                assert (value or "").startswith("#"), value
            if name in {"content", "http-equiv", "charset"}:
                assert tag == "meta"
    return p


def no_nan(text: str) -> bool:
    return re.search(r"\b(nan|inf|infinity)\b", text, re.IGNORECASE) is None


def sample(society: str = "alpha", scale: float = 1.0) -> Report:
    t0 = 1_714_000_000.0
    return Report(
        society=society,
        generated_at="2024-05-01T12:00:00Z",
        events=1234567,
        settings={"seed": 7, "window_seconds": 600.0},
        sections=[
            Section(
                key="activity",
                title="Activity",
                description="Posts and comments per day.",
                seconds=1.5,
                items=[
                    Scalar(
                        "posts", "posts per agent", 12.3456 * scale, published=10.5, published_source="paper"
                    ),
                    Scalar("gini", "Gini of activity", None, reason="fewer than 10 agents posted"),
                    Scalar("count", "agents", 1500),
                    Figure(
                        "daily",
                        "Events per day",
                        "day",
                        "events",
                        [
                            Series(
                                "events",
                                [t0 + i * 86400 for i in range(10)],
                                [float(i * 10) for i in range(10)],
                            )
                        ],
                        x_kind="time",
                    ),
                    Table("top", "Top agents", ["agent", "posts"], [["a1", 10], ["a2", 9.5], ["a3", None]]),
                ],
            ),
            Section(
                key="degrees",
                title="Degree distribution",
                description="CCDF of in-degree.",
                seconds=0.2,
                items=[
                    Figure(
                        "ccdf",
                        "In-degree CCDF",
                        "degree",
                        "P(X >= k)",
                        [Series("empirical", [1, 2, 5, 10, 20], [1.0, 0.5, 0.2, 0.05, 0.01], style="points")],
                        log_x=True,
                        log_y=True,
                    ),
                    Figure(
                        "kinds",
                        "Events by kind",
                        "kind",
                        "count",
                        [Series("n", [0, 1, 2], [5, 3, 1], style="bars")],
                        x_kind="category",
                        categories=["post", "comment", "vote"],
                    ),
                ],
            ),
            Section(key="broken", title="Broken", description="fails", error="ClickHouse timed out"),
        ],
    )


def test_single_report_layout() -> None:
    doc = render_html([sample()])
    check_safe(doc)
    assert doc.startswith("<!DOCTYPE html>")
    assert "Content-Security-Policy" in doc
    assert "default-src &#x27;none&#x27;" in doc
    for key in ("activity", "degrees", "broken"):
        assert f'<section class="diag" id="{key}">' in doc
        assert f'href="#{key}"' in doc
    assert "MoltBook (published)" in doc
    assert "not computed" in doc
    assert "fewer than 10 agents posted" in doc
    assert "12.35" in doc
    assert "10.5" in doc
    assert "paper" in doc
    assert "1,500" in doc
    assert "1,234,567" in doc
    assert "ClickHouse timed out" in doc
    assert 'class="notice error"' in doc
    assert no_nan(doc)
    assert "http://" not in doc
    assert "https://" not in doc
    assert doc.count('<svg class="figure"') == 3
    assert 'data-key="ccdf"' in doc


def test_comparison_layout() -> None:
    doc = render_html([sample("alpha"), sample("beta", 2.0)], published_label="MoltBook (paper)")
    check_safe(doc)
    for key in ("activity", "degrees", "broken"):
        assert doc.count(f'id="{key}"') == 1
    assert "<th>alpha</th><th>beta</th><th>MoltBook (paper)</th>" in doc
    assert "24.69" in doc  # beta's value
    assert doc.count("not computed") == 2
    # both societies' series in the same chart, prefixed, with a legend
    assert "alpha: events" in doc
    assert "beta: events" in doc
    assert doc.count('<svg class="figure"') == 3
    assert doc.count('class="legend"') == 3
    # each society's table, labeled
    assert "<h4>alpha</h4>" in doc
    assert "<h4>beta</h4>" in doc


def test_comparison_with_missing_items() -> None:
    a = sample("alpha")
    b = sample("beta")
    b.sections = [s for s in b.sections if s.key != "degrees"]
    b.sections[0].items = [i for i in b.sections[0].items if i.key not in ("gini", "top")]
    b.sections.append(Section("extra", "Only in beta", "", [Scalar("z", "z", 3)]))
    doc = render_html([a, b])
    check_safe(doc)
    assert 'id="extra"' in doc
    assert "Not in the report of alpha." in doc
    assert "Not in the report of beta." in doc
    assert "not in this report" in doc


def test_merged_categories() -> None:
    fa = Figure(
        "k", "K", "kind", "n", [Series("n", [0, 1], [1, 2], "bars")], x_kind="category", categories=["a", "b"]
    )
    fb = Figure(
        "k", "K", "kind", "n", [Series("n", [0, 1], [3, 4], "bars")], x_kind="category", categories=["b", "c"]
    )
    ra = Report("A", "t", 1, [Section("s", "S", "", [fa])])
    rb = Report("B", "t", 1, [Section("s", "S", "", [fb])])
    doc = render_html([ra, rb])
    assert doc.count('class="mark bar"') == 4
    for label in ("a", "b", "c"):
        assert f">{label}</text>" in doc
    assert "<title>b: 3</title>" in doc
    assert "<title>b: 2</title>" in doc


def hostile_report(society: str) -> Report:
    p = PAYLOADS
    series = [Series(name=s, x=[0, 1, 2], y=[1.0, 2.0, 3.0], style="line") for s in p]
    return Report(
        society=society,
        generated_at=p[1],
        events=3,
        settings={p[0]: p[1], "nested": {p[2]: [p[3]]}},
        sections=[
            Section(
                key=k,
                title=p[i % len(p)],
                description=p[(i + 1) % len(p)],
                error=p[(i + 2) % len(p)],
                items=[
                    Scalar(k + "a", p[0], None, reason=p[1], unit=p[2], published=1.0, published_source=p[3]),
                    Scalar(k + "b", p[4], 2.0, reason=p[5]),
                    Table(k + "t", p[0], list(p), [list(p), list(p)]),
                    Table(k + "e", p[1], list(p), [], reason=p[2]),
                    Figure(k + "f", p[0], p[1], p[2], series),
                    Figure(
                        k + "c",
                        p[3],
                        p[4],
                        p[5],
                        [Series(p[6], list(range(len(p))), [1.0] * len(p), "bars")],
                        x_kind="category",
                        categories=list(p),
                    ),
                    Figure(k + "n", p[4], p[5], p[6], [Series(p[0], [1.0], [None])], reason=p[0]),
                ],
            )
            for i, k in enumerate([*p, "plain"])
        ],
    )


@pytest.mark.parametrize("n", [1, 2])
def test_every_string_is_escaped(n: int) -> None:
    reports = [hostile_report(PAYLOADS[i]) for i in range(n)]
    doc = render_html(reports, published_label=PAYLOADS[1])
    check_safe(doc)
    for payload in PAYLOADS:
        if any(c in payload for c in "<>\"'"):
            assert payload not in doc, payload
        assert html.escape(payload, quote=True) in doc
    # text survives escaping intact: the parser reads back the original strings
    joined = "".join(parse(doc).texts)
    for payload in PAYLOADS:
        assert payload in joined


def test_log_axes_drop_non_positive() -> None:
    xs = [-1.0, 0.0, 1.0, 10.0, 100.0, math.nan, math.inf, 1000.0]
    ys: list[float | None] = [1.0, 1.0, 0.0, -5.0, 0.5, 1.0, 1.0, 0.01]
    fig = Figure("f", "t", "x", "y", [Series("s", xs, ys, "points")], log_x=True, log_y=True)
    svg = figure_svg(fig)
    assert svg is not None
    assert svg.count('class="mark point"') == 2  # (100, 0.5) and (1000, 0.01)
    assert no_nan(svg)
    none_left = Figure("g", "t", "x", "y", [Series("s", [0.0, -1.0], [1.0, 2.0], "points")], log_x=True)
    assert figure_svg(none_left) is None
    doc = render_html([Report("r", "t", 0, [Section("s", "S", "", [none_left])])])
    assert "a log axis shows positive values only" in doc


def test_all_none_series_shows_reason() -> None:
    fig = Figure(
        "f", "Title", "x", "y", [Series("s", [1, 2, 3], [None, None, math.nan])], reason="nobody replied"
    )
    empty = Figure("g", "Empty", "x", "y", [])
    doc = render_html([Report("r", "t", 0, [Section("s", "S", "", [fig, empty])])])
    check_safe(doc)
    assert '<p class="nodata" data-key="f">nobody replied</p>' in doc
    assert '<p class="nodata" data-key="g">no data</p>' in doc
    assert "<svg" not in doc


def test_degenerate_values() -> None:
    series = [
        Series("line", [1, 2, 3, 4, 5], [1.0, None, 2.0, math.inf, 3.0]),
        Series("flat", [1, 1, 1], [5.0, 5.0, 5.0], "points"),
        Series("huge", [1e300, -1e300], [1e300, -1e300], "bars"),
        Series("nan-x", [math.nan, math.inf], [1.0, 2.0]),
        Series("mismatched", [1, 2, 3], [1.0]),
    ]
    for s in series:
        svg = figure_svg(Figure("f", "t", "x", "y", [s]))
        assert svg is not None or s.name == "nan-x"
        assert svg is None or no_nan(svg)
    both = figure_svg(Figure("f", "t", "x", "y", series))
    assert both is not None
    assert both.count('class="mark dot"') == 4  # three isolated points of "line", the one of "mismatched"
    scalars: list[Item] = [Scalar("a", "a", math.nan), Scalar("b", "b", math.inf, published=math.nan)]
    doc = render_html([Report("r", "t", 0, [Section("s", "S", "", scalars)])])
    assert doc.count("not computed") == 2
    assert no_nan(doc)


def test_time_axis_labels() -> None:
    day = time_axis(1_714_000_000.0, 1_714_000_000.0 + 6 * 3600)
    assert all(len(label) == 5 and label[2] == ":" for _, label in day.ticks)
    weeks = time_axis(1_714_000_000.0, 1_714_000_000.0 + 30 * 86400)
    assert all(len(label) == 10 and label[4] == "-" for _, label in weeks.ticks)
    years = time_axis(1_600_000_000.0, 1_700_000_000.0)
    assert all(label.endswith("-01") for _, label in years.ticks)
    assert len(years.ticks) >= 3


def test_ticks() -> None:
    lo, hi, ticks = nice_ticks(0.13, 9.7)
    assert (lo, hi) == (0.0, 10.0)
    assert ticks == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    _, _, ticks = nice_ticks(0.1, 0.3)
    assert 0.3 in ticks or 0.30000000000000004 not in ticks
    axis = log_axis(0.0, 4.0)
    assert [label for _, label in axis.ticks] == ["1", "10", "100", "1,000", "10,000"]
    assert [label for _, label in log_axis(-8.0, 8.0).ticks] == ["10⁻⁶", "10⁻³", "10⁰", "10³", "10⁶"]
    assert len(log_axis(0.2, 0.5).ticks) >= 2


@pytest.mark.parametrize(
    ("value", "text"),
    [(1234567, "1,234,567"), (0.0, "0"), (12.3456, "12.35"), (2.5, "2.5"), (12345.6, "12,346"),
     (1e-5, "1e-5"), (1.23456e12, "1.235e12"), (-0.5, "-0.5"), (3.0, "3")],
)  # fmt: skip
def test_fmt_number(value: float, text: str) -> None:
    assert fmt_number(value) == text


def test_table_row_cap() -> None:
    rows: list[list[float | int | str | None]] = [[i, f"agent{i}"] for i in range(450)]
    doc = render_html([Report("r", "t", 0, [Section("s", "S", "", [Table("t", "T", ["i", "name"], rows)])])])
    assert "first 200 of 450 rows (all in the JSON)" in doc
    assert "agent199" in doc
    assert "agent200" not in doc


def test_needs_a_report() -> None:
    with pytest.raises(ValueError):
        render_html([])
