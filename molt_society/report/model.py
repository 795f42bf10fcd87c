"""What a report is made of: sections of scalars, tables and figures, each with the reason when missing.

Every diagnostic returns these items; ``report.render`` turns them into the offline HTML page and
``Report.to_json`` into the machine-readable document. A value that could not be computed is ``None``
together with ``reason`` (a sentence a user can act on), never a bare NaN.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Cell = float | int | str | None


@dataclass
class Scalar:
    """One number. ``published`` is MoltBook's published value for the same quantity, when there is one."""

    key: str
    label: str
    value: float | int | None
    reason: str | None = None
    unit: str = ""
    published: float | None = None
    published_source: str | None = None
    kind: Literal["scalar"] = "scalar"


@dataclass
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[Cell]]
    reason: str | None = None
    kind: Literal["table"] = "table"


Style = Literal["line", "points", "bars"]


@dataclass
class Series:
    name: str
    x: list[float]
    y: list[float | None]
    style: Style = "line"


@dataclass
class Figure:
    """A chart. ``x_kind`` "time" means x values are seconds since the epoch (UTC days, windows)."""

    key: str
    title: str
    x_label: str
    y_label: str
    series: list[Series]
    reason: str | None = None
    log_x: bool = False
    log_y: bool = False
    x_kind: Literal["number", "time", "category"] = "number"
    categories: list[str] = field(default_factory=list)  # x_kind == "category": labels of x = 0, 1, ...
    kind: Literal["figure"] = "figure"


Item = Scalar | Table | Figure


@dataclass
class Section:
    key: str
    title: str
    description: str
    items: list[Item] = field(default_factory=list)
    seconds: float = 0.0  # time spent computing this section
    error: str | None = None  # the section failed as a whole (the others still ran)
    note: str | None = None  # a caveat on what the section's figures mean (shown above its items)


@dataclass
class ComparisonReading:
    """One definition's value of a published quantity, with its 95% interval."""

    label: str
    value: float | None
    ci: tuple[float, float] | None = None
    reason: str | None = None


@dataclass
class Comparison:
    """A published figure beside this society's (``report.comparisons``): the study's reading, every
    definition's (``readings``, their range ``spread``), the null's, and the verdict with why."""

    key: str
    figure: str
    published: float
    published_ci: tuple[float, float] | None
    published_source: str
    study: ComparisonReading | None
    readings: list[ComparisonReading]
    spread: tuple[float, float] | None
    null: ComparisonReading | None
    verdict: str  # reproduced | same direction | differs | not comparable (report.verdicts)
    why: str
    null_flag: str | None = None  # "not distinguishable from the null"


@dataclass
class Report:
    society: str
    generated_at: str
    events: int
    sections: list[Section]
    settings: dict[str, Any] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)  # per published figure: its verdict

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def scalars(self) -> dict[str, Scalar]:
        return {i.key: i for s in self.sections for i in s.items if isinstance(i, Scalar)}
