"""What ``society experiment`` reads from and writes to ClickHouse: the ``experiments`` table, the purge of
an interrupted pair (``warehouse.purge``), the base's history for the plans, and the event ids that verify
a pair's history.

Every value travels as a query parameter (``{name:Type}``); the only names in SQL text are table names
that ClickHouse itself lists (``system.tables``), checked as identifiers. With chDB (the default) only one
process may open the database and a running stack's sink holds it: ``Store`` is opened while no stack
runs and closed before the next pair's stack starts.
"""

from __future__ import annotations

import json
import time
from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from typing import Any

from molt_society.runtime.logs import get_logger
from molt_society.society.experiments.plan import BaseHistory, Item
from molt_society.warehouse.client import connect
from molt_society.warehouse.purge import purge_society
from molt_society.warehouse.schema import ensure_schema

log = get_logger(__name__)

TABLE = "experiments"


@dataclass(frozen=True)
class ExperimentRow:
    """One version of one arm x seed's row (the columns of ``warehouse/experiments.sql``, in order)."""

    experiment: str
    arm: str
    seed: int
    society: str
    control: int
    run_seed: int
    base_society: str
    fork_tick: int
    fork_at: datetime
    ticks: int
    status: str  # 'started' | 'done'
    history_events: int
    history_verified: int
    spec_sha256: str
    started_at: datetime
    finished_at: datetime | None
    wall_seconds: float
    version: int


COLUMNS = [f.name for f in fields(ExperimentRow)]


@dataclass(frozen=True)
class Recorded:
    """What the table says of a pair: its newest status, spec hash and start."""

    status: str
    spec_sha256: str
    started_at: datetime


def now() -> datetime:
    return datetime.now(UTC)


def new_version() -> int:
    """Versions grow with wall time (nanoseconds): a later write replaces an earlier one."""
    return time.time_ns()


class Store:
    """A client of the experiment's ClickHouse (``settings.clickhouse_url``); ``schema``: apply the schema
    first (idempotent; once per run is enough)."""

    def __init__(self, url: str, client: Any = None, *, schema: bool = True) -> None:
        self.client = client if client is not None else connect(url)
        if client is None and schema:
            ensure_schema(self.client)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self, row: ExperimentRow) -> None:
        self.client.insert(TABLE, [list(astuple(row))], column_names=COLUMNS)

    def recorded(self, experiment: str) -> dict[tuple[str, int], Recorded]:
        """The newest row of every pair of ``experiment``, by (arm, seed)."""
        result = self.client.query(
            f"SELECT arm, seed, status, spec_sha256, started_at FROM {TABLE} FINAL "
            "WHERE experiment = {e:String}",
            parameters={"e": experiment},
        )
        return {(str(a), int(s)): Recorded(str(st), str(h), t) for a, s, st, h, t in result.result_rows}

    def purge(self, society: str) -> list[str]:
        """Delete ``society``'s rows from every table that has them (but ``experiments``); the tables."""
        return purge_society(self.client, society)

    def count_events(self, society: str, before_us: int | None = None) -> int:
        cond, params = _before(society, before_us)
        result = self.client.query(f"SELECT count() FROM events FINAL WHERE {cond}", parameters=params)
        return int(result.result_rows[0][0])

    def event_ids(self, society: str, before_us: int) -> set[str]:
        """The ids of ``society``'s events before ``before_us``."""
        cond, params = _before(society, before_us)
        result = self.client.query(
            f"SELECT toString(event_id) FROM events FINAL WHERE {cond}", parameters=params
        )
        return {str(r[0]) for r in result.result_rows}

    def history(self, society: str, before_us: int) -> BaseHistory:
        """``society``'s posts and comments before ``before_us``, in the order they occurred."""
        cond, params = _before(society, before_us)
        result = self.client.query(
            "SELECT type, if(type = 'post_created', post_id, comment_id), post_id, actor, parent_id, body, "
            f"title, content FROM events FINAL WHERE {cond} AND type IN ('post_created', 'comment_created') "
            "ORDER BY occurred_at, event_id",
            parameters=params,
        )
        items = []
        for etype, item_id, post_id, actor, parent_id, body, title, content in result.result_rows:
            post = etype == "post_created"
            unknown = False if post else bool(json.loads(body or "{}").get("parent_unknown", False))
            text = f"{title}\n{content}" if post else str(content)
            kind = "post" if post else "comment"
            items.append(Item(kind, str(item_id), str(post_id), str(actor), str(parent_id), unknown, text))
        return BaseHistory(items)


def _before(society: str, before_us: int | None) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {"s": society}
    cond = "society = {s:String}"
    if before_us is not None:
        cond += " AND toUnixTimestamp64Micro(occurred_at) < {t:Int64}"
        params["t"] = before_us
    return cond, params
