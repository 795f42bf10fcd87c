"""What a notebook imports: ``from molt_society import open_store, run_society, run_experiment``.

- ``open_store(path=None)``: the store a society lives in, as a ``Store`` of pandas DataFrames (the
  societies it holds, any read-only SQL, a society's events and streaming metrics, its report section by
  section). With no argument: ``CLICKHOUSE_URL`` when set, else the ``.society/clickhouse`` of the working
  directory or the nearest folder above it that has one (a notebook in ``docs/`` finds the project's store).
  A path that holds no store is an error (``StoreNotFound``): a reader never creates an empty store.
- ``run_society(name, agents=..., ticks=...)``: start the local stack, run the society to its last tick,
  drain and stop (what ``society run --no-dashboard`` does); its summary.
- ``run_experiment(spec)``: ``society experiment SPEC.toml``; the result's JSON document.

Reads go where the CLI's go (``report.warehouse_source.open_warehouse``): through the running sink while one
serves the store, else a read-only session of this process. Every statement is read-only, and values enter SQL
only through ``report.experiments.data.bind`` (hex literals), never as text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from molt_society.runtime.settings import Settings, get_settings
from molt_society.schemas.society_name import check_society_name

STORE_DIR = Path(".society") / "clickhouse"
"""Where ``society run`` keeps the embedded store, relative to the folder it runs in."""


class StoreNotFound(FileNotFoundError):
    """No store where one was asked for (or none found from the working directory up)."""


def find_store(start: Path | None = None) -> Path:
    """The ``.society/clickhouse`` of ``start`` (default: the working directory) or of the nearest folder
    above it that has one."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / STORE_DIR).is_dir():
            return folder / STORE_DIR
    raise StoreNotFound(
        f"no {STORE_DIR} in {here} or any folder above it: run a society first (`make demo`, `society "
        "run`), or name the store: open_store('/path/to/.society/clickhouse') or CLICKHOUSE_URL"
    )


def store_settings(store: str | Path | None = None, state_dir: str | Path | None = None) -> Settings:
    """Settings whose ``clickhouse_url`` is ``store`` (a chDB folder, ``chdb://...`` or a server URL; default
    as ``open_store``) and whose state folder is ``state_dir`` (default: the folder holding a chDB store,
    where ``society run`` keeps its state beside it)."""
    base = get_settings()
    url = (
        _url_of(store) if store is not None else os.environ.get("CLICKHOUSE_URL") or f"chdb://{find_store()}"
    )
    if url.startswith("chdb://"):
        folder = Path(url.removeprefix("chdb://"))
        if not (folder.is_dir() and any(folder.iterdir())):
            raise StoreNotFound(f"no store at {folder}: a reader does not create one (run a society first)")
    state = Path(state_dir) if state_dir is not None else _state_beside(url, base)
    return base.model_copy(update={"clickhouse_url": url, "state_dir": state.resolve()})


def _url_of(store: str | Path) -> str:
    """``store`` as a ClickHouse URL: a server or ``chdb://`` URL as given, a folder as ``chdb://<path>``."""
    if str(store).startswith(("http://", "https://", "chdb://")):
        return str(store)
    return f"chdb://{Path(store).resolve()}"


def _state_beside(url: str, base: Settings) -> Path:
    """Where ``society run`` keeps its state for the store ``url``: the folder holding a chDB store (the
    ``.society`` of ``.society/clickhouse``), else the environment's state folder."""
    return Path(url.removeprefix("chdb://")).parent if url.startswith("chdb://") else base.state_dir


class Store:
    """A store's societies as DataFrames (``open_store``); close it (or use ``with``) to let a sink
    started later open the embedded store."""

    def __init__(self, settings: Settings) -> None:
        from molt_society.report.warehouse_source import open_warehouse

        self.settings = settings
        self._wh = open_warehouse(settings)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._wh.close()

    def __repr__(self) -> str:
        return f"Store({self.settings.clickhouse_url!r})"

    def sql(self, query: str, **params: object) -> Any:
        """One read-only statement as a DataFrame; ``{name:String}``, ``{name:Int64}`` and
        ``{name:Array(String)}`` placeholders take ``params`` (bound as literals of digits, never as text)."""
        from molt_society.report.experiments.data import bind

        return self._wh.query(bind(query, params)).df()

    def societies(self) -> Any:
        """Name, events, first and last event time of every society the store holds."""
        return self.sql(
            "SELECT society, count() AS events, min(occurred_at) AS first_event, max(occurred_at) AS "
            "last_event FROM events FINAL GROUP BY society ORDER BY society"
        )

    def require(self, society: str) -> str:
        """``society``, if the store holds events of it; else ``KeyError`` naming those it holds."""
        from molt_society.society.stored import held_line, stored_societies

        name = check_society_name(society)
        held = stored_societies(self._wh)
        if name not in {row[0] for row in held}:
            raise KeyError(
                f"the store {self.settings.clickhouse_url} holds no society {name!r}; {held_line(held)}"
            )
        return name

    def events(
        self,
        society: str,
        *,
        types: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> Any:
        """The society's events in the order they occurred (the ``events`` table's columns but the sink's
        bookkeeping), optionally of some ``types``, in [``since``, ``until``), at most ``limit``."""
        name = self.require(society)
        where = ["society = {s:String}"]
        params: dict[str, object] = {"s": name}
        if types:
            where.append("has({types:Array(String)}, type)")
            params["types"] = list(types)
        for op, key, t in ((">=", "since", since), ("<", "until", until)):
            if t is not None:
                where.append(f"toUnixTimestamp64Micro(occurred_at) {op} {{{key}:Int64}}")
                params[key] = int(t.timestamp() * 1_000_000)
        tail = ""
        if limit is not None:
            tail = " LIMIT {limit:Int64}"
            params["limit"] = int(limit)
        return self.sql(
            "SELECT * EXCEPT (_topic, _partition, _offset, _inserted_at) FROM events FINAL WHERE "
            + " AND ".join(where)
            + " ORDER BY occurred_at, event_id"
            + tail,
            **params,
        )

    def metrics(self, society: str, *, metrics: Iterable[str] = ()) -> Any:
        """The society's streaming metrics per event-time window (metric, dim, window_start, window_end,
        value), optionally only ``metrics``."""
        name = self.require(society)
        wanted = list(metrics)
        cond = " AND has({m:Array(String)}, metric)" if wanted else ""
        return self.sql(
            "SELECT metric, dim, window_start, window_end, value FROM metrics FINAL "
            "WHERE society = {s:String}" + cond + " ORDER BY metric, dim, window_start",
            s=name,
            m=wanted,
        )

    def report(
        self, society: str, *, only: Iterable[str] | None = None, embeddings: bool = False
    ) -> ReportFrames:
        """The studies' diagnostics of ``society`` (``society report``), every section or ``only`` those
        (keys as ``society report --only``); sentence embeddings only with ``embeddings``."""
        from molt_society.report.build import build_report

        name = self.require(society)
        chosen = set(only) if only is not None else None
        return ReportFrames(build_report(self._wh, name, embed=embeddings, only=chosen))


class ReportFrames:
    """A built report (``report.model.Report``: ``.report``) as DataFrames."""

    def __init__(self, report: Any) -> None:
        self.report = report

    @property
    def sections(self) -> list[str]:
        return [s.key for s in self.report.sections]

    def scalars(self) -> Any:
        """Every number: section, key, label, value, unit, published value and source, reason if none."""
        import pandas as pd

        from molt_society.report.model import Scalar

        rows = [
            (s.key, i.key, i.label, i.value, i.unit, i.published, i.published_source, i.reason)
            for s in self.report.sections
            for i in s.items
            if isinstance(i, Scalar)
        ]
        cols = ["section", "key", "label", "value", "unit", "published", "published_source", "reason"]
        return pd.DataFrame(rows, columns=cols)

    def _item(self, key: str, kind: type[Any]) -> Any:
        for s in self.report.sections:
            for i in s.items:
                if i.key == key and isinstance(i, kind):
                    return i
        known = [i.key for s in self.report.sections for i in s.items if isinstance(i, kind)]
        raise KeyError(f"no {kind.__name__.lower()} {key!r} in this report; it has: {', '.join(known)}")

    def table(self, key: str) -> Any:
        """A table of the report as a DataFrame."""
        import pandas as pd

        from molt_society.report.model import Table

        t = self._item(key, Table)
        return pd.DataFrame(t.rows, columns=t.columns)

    def figure(self, key: str) -> Any:
        """A figure's data in long form: series, x, y (x as the figure's categories or UTC times where it
        has them); ``.attrs`` holds its title, axis labels and log scales."""
        import pandas as pd

        from molt_society.report.model import Figure

        f = self._item(key, Figure)
        rows = [(s.name, x, y) for s in f.series for x, y in zip(s.x, s.y, strict=False)]
        df = pd.DataFrame(rows, columns=["series", "x", "y"])
        if f.x_kind == "time":
            df["x"] = pd.to_datetime(df["x"], unit="s", utc=True)
        elif f.x_kind == "category" and f.categories:
            df["x"] = [f.categories[int(x)] if 0 <= int(x) < len(f.categories) else x for x in df["x"]]
        df.attrs.update(title=f.title, x_label=f.x_label, y_label=f.y_label, log_x=f.log_x, log_y=f.log_y)
        return df

    def figures(self) -> list[str]:
        from molt_society.report.model import Figure

        return [i.key for s in self.report.sections for i in s.items if isinstance(i, Figure)]

    def comparisons(self) -> Any:
        """Per published figure: the verdict, the published value and this society's reading."""
        import pandas as pd

        rows = [
            (c.key, c.figure, c.published, c.study.value if c.study else None, c.verdict, c.why)
            for c in self.report.comparisons
        ]
        return pd.DataFrame(rows, columns=["key", "figure", "published", "this_society", "verdict", "why"])


def open_store(store: str | Path | None = None, *, state_dir: str | Path | None = None) -> Store:
    """The store ``store`` names (see the module docstring); ``StoreNotFound`` where there is none."""
    return Store(store_settings(store, state_dir))


def run_society(
    name: str,
    *,
    agents: int,
    ticks: int,
    store: str | Path | None = None,
    seed: int | None = None,
    tick_seconds: float | None = None,
    replace: bool = False,
    quiet: bool = True,
) -> dict[str, Any]:
    """Run a new society ``name`` of ``agents`` agents for ``ticks`` ticks on the local stack, then stop
    it (``society run --no-dashboard``); its summary (ticks, events, seconds). ``store``: a chDB folder to
    create or add to (default: ``CLICKHOUSE_URL``, else ``.society/clickhouse`` of the working directory).
    A name the store holds is refused unless ``replace`` (``society.stored``)."""
    from rich.console import Console

    from molt_society.society.recover import rebuild_hook
    from molt_society.society.run import run_society as run
    from molt_society.society.stored import check_new_society, next_generation

    society = check_society_name(name)
    s = _writer_settings(store).model_copy(
        update={"agents": agents, **({"seed": seed} if seed is not None else {})}
        | ({"tick_seconds": tick_seconds} if tick_seconds is not None else {})
    )
    if check_new_society(s, society, replace=replace):
        s = s.model_copy(update={"generation": next_generation(s, society), "resume_us": None})
    console = Console(quiet=quiet)
    return run(
        s,
        society=society,
        ticks=ticks,
        duration=None,
        stream_workers=s.stream_workers,
        agent_workers=s.agent_workers,
        console=console,
        dashboard=False,
        # a lost local broker is rebuilt from the store (as `society run` does); a cluster is never "lost"
        on_broker_lost=rebuild_hook if s.mode == "sim" and not s.kafka_bootstrap else None,
    )


def run_experiment(spec: str | Path, *, store: str | Path | None = None, quiet: bool = True) -> Any:
    """Run ``society experiment SPEC.toml`` on ``store`` (default as ``run_society``); the result's JSON
    document (effects with their CIs, per metric and arm)."""
    import json

    from rich.console import Console

    from molt_society.society.experiments.runner import run_experiment as run

    outcome = run(_writer_settings(store), Path(spec), console=Console(quiet=quiet))
    if outcome.json is None:
        raise RuntimeError(f"experiment {outcome.experiment} wrote no result")
    return json.loads(outcome.json.read_text())


def _writer_settings(store: str | Path | None) -> Settings:
    """Settings of a process that runs a stack: ``store`` as the chDB folder to write (created when
    missing), or the environment's."""
    base = get_settings()
    if store is None:
        return base
    url = _url_of(store)
    return base.model_copy(update={"clickhouse_url": url, "state_dir": _state_beside(url, base)})
