"""``society``: run, watch and query an event-sourced agent society."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from molt_society.runtime.logs import configure_logging
from molt_society.runtime.settings import Settings, get_settings
from molt_society.society import stored
from molt_society.society.progress_lines import status as progress_status

if TYPE_CHECKING:
    from molt_society.replay.publisher import PublishStats
    from molt_society.replay.source import Source

console = Console()

HELP_MODELS_HELP = (
    "Tier I Delta-help of these models, comma-separated NAME or NAME@URL (OpenAI-compatible base URL; "
    "a bare NAME uses SOCIETY_LLM_BASE_URL or the society's model server)"
)
ONLY_HELP = (
    "run only these diagnostics (repeatable): activity, threads, lexical, semantic, individual, "
    "collective, roles, cascades, cooperation, agreement, fidelity"
)


def _settings(**overrides: Any) -> Settings:
    base = get_settings()
    clean = {k: v for k, v in overrides.items() if v is not None}
    return base.model_copy(update=clean) if clean else base


def _society_name(value: str, hint: str | None = None) -> str:
    """A society name, checked before anything uses it (a file name, a topic name, a SQL literal): a usage
    error of one line otherwise (``hint``: the option it came from, when not known to click)."""
    from molt_society.schemas.society_name import BadSocietyName, check_society_name

    try:
        return check_society_name(value)
    except BadSocietyName as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


def _named(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback of every option or argument that names a society: ``_society_name``."""
    return None if value is None else _society_name(value)


REPORT_FILES_SHOWN = 20
"""Files of an import's per-file report shown on the console (those not imported cleanly first)."""
POSITIVE = click.IntRange(min=1)
"""Counts that must be at least 1 (agents, ticks, workers): click refuses others with one line."""
SECONDS = click.FloatRange(min=0, min_open=True)
"""Durations that must be above 0."""


class _Commands(click.Group):
    """The ``society`` group: a command that reads a store that does not exist says so in one line (a
    reader never creates an empty store, ``warehouse.reader.require_store``)."""

    def invoke(self, ctx: click.Context) -> Any:
        from molt_society.warehouse.reader import NoStore

        try:
            return super().invoke(ctx)
        except NoStore as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Run, watch and query an event-sourced LLM-agent society (MoltBook-style).

    Settings come from the environment (SOCIETY_*, KAFKA_BOOTSTRAP, CLICKHOUSE_URL); options override them.
    """
    s = get_settings()
    configure_logging(s.log_level if s.log_level != "info" else "warning", s.log_json)


@main.command()
@click.option("--society", "name", callback=_named, help="society name (new topics; rows tagged with it)")
@click.option("--agents", type=POSITIVE, help="number of agents")
@click.option(
    "--llm-agents", type=click.IntRange(min=0), help="how many of them use the LLM brain (SOCIETY_LLM_AGENTS)"
)
@click.option("--llm-models", help="comma-separated model names for the LLM agents (SOCIETY_LLM_MODELS)")
@click.option("--duration", type=SECONDS, help="wall-clock seconds to run (default 60 unless --ticks)")
@click.option("--ticks", type=POSITIVE, help="number of ticks to run (exact, reproducible length)")
@click.option("--seed", type=int)
@click.option("--mode", type=click.Choice(["sim", "realtime"]))
@click.option("--tick-seconds", type=SECONDS, help="event-time seconds per tick")
@click.option("--window-seconds", type=SECONDS, help="event-time window of the rolling metrics")
@click.option("--stream-workers", type=POSITIVE, default=None)
@click.option("--agent-workers", type=POSITIVE, default=None)
@click.option("--from", "fork_from", callback=_named, help="start from the history of this society (fork)")
@click.option(
    "--at",
    "fork_at",
    help="with --from: fork at this tick number or event time (ISO 8601, zoned; default: where it stopped)",
)
@click.option(
    "--resume",
    "resume_name",
    callback=_named,
    help="rebuild this society from ClickHouse after its run died (driver killed, stack lost) and go on",
)
@click.option(
    "--dashboard/--no-dashboard", default=True, show_default=True, help="serve the live web dashboard"
)
@click.option(
    "--behaviour",
    "behaviour_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="behaviour file (SOCIETY_BEHAVIOUR_FILE); a fitted one (society calibrate --fit) also gives the "
    "population, period, tick length and start, unless --agents, --ticks/--duration, --tick-seconds say",
)
@click.option(
    "--replace",
    is_flag=True,
    help="the store already holds a society of this name: delete its rows first (without it, an error)",
)
def run(
    name: str | None,
    agents: int | None,
    llm_agents: int | None,
    llm_models: str | None,
    duration: float | None,
    ticks: int | None,
    seed: int | None,
    mode: str | None,
    tick_seconds: float | None,
    window_seconds: float | None,
    stream_workers: int | None,
    agent_workers: int | None,
    fork_from: str | None,
    fork_at: str | None,
    resume_name: str | None,
    dashboard: bool,
    behaviour_file: Path | None,
    replace: bool,
) -> None:
    """Run a society of N agents for a duration on the local stack, with live figures.

    With --from OLD [--at TIME] the new society's history up to TIME (default: where OLD stopped) is
    OLD's, replayed from ClickHouse; its agents then continue live. With --resume NAME a society whose run
    died goes on under its own name, from the first tick ClickHouse may not hold completely, to the tick it
    was to reach. A lost local broker is rebuilt the same way while the run goes on (simulated time).
    """
    if fork_at is not None and fork_from is None:
        raise click.UsageError("--at needs --from")
    at = _parse_fork_at(fork_at)  # a bad --at is said before anything is looked up
    if resume_name is not None and (fork_from is not None or (name is not None and name != resume_name)):
        raise click.UsageError(
            "--resume NAME continues NAME itself: give neither --from nor another --society"
        )
    fitted = _fitted_defaults(behaviour_file, ticks_given=ticks is not None or duration is not None)
    given = {
        "agents": agents,
        "seed": seed,
        "mode": mode,
        "tick_seconds": tick_seconds,
        "window_seconds": window_seconds,
        "llm_agents": llm_agents,
        "llm_models": llm_models,
    }
    s = _settings(**(fitted.get("settings", {}) | {k: v for k, v in given.items() if v is not None}))
    pop = fitted.get("population")
    if pop is not None and (size := pop.feed_size_for(s.agents, s.tick_seconds)) is not None:
        s = s.model_copy(update={"feed_size": size})  # the fitted feed, scaled to this population and tick
    if ticks is None and duration is None and "hours" in fitted:
        ticks = round(fitted["hours"] * 3600 / s.tick_seconds) + 1
    if s.llm_agents > s.agents:
        raise click.UsageError(f"--llm-agents {s.llm_agents} is more than the {s.agents} agents")
    society = resume_name or name or f"{s.society}_{datetime.now(UTC):%Y%m%d_%H%M%S}"
    _society_name(society, "--society")  # SOCIETY_SOCIETY's default too
    if ticks is None and duration is None and resume_name is None:
        duration = 60.0
    if fork_from is not None or resume_name is not None:
        _check_recorded(s, fork_from or society)
    if replace and resume_name is not None:
        raise click.UsageError("--replace starts a society again: not with --resume")
    if resume_name is None and _check_new(s, society, replace=replace):
        # the purged rows' deduplication tokens must not meet the new ones (``stored.next_generation``)
        s = s.model_copy(update={"generation": stored.next_generation(s, society), "resume_us": None})
    summary = _run_society(
        s,
        society,
        ticks=ticks,
        duration=duration,
        stream_workers=stream_workers or s.stream_workers,
        agent_workers=agent_workers or s.agent_workers,
        fork_from=fork_from,
        fork_at=at,
        dashboard=dashboard,
        resume=resume_name is not None,
    )
    _print_run_summary(society, summary)


def _check_new(s: Settings, society: str, *, replace: bool) -> int:
    """A new society's name must not be one the store holds (``society.stored``); the events deleted
    (``--replace``)."""
    from molt_society.society.stored import SocietyTaken, check_new_society
    from molt_society.warehouse import QueryError

    try:
        deleted = check_new_society(s, society, replace=replace)
    except SocietyTaken as exc:
        raise click.ClickException(str(exc)) from None
    except QueryError as exc:
        raise click.ClickException(f"cannot read the store {s.clickhouse_url}: {exc}") from None
    if deleted:
        console.print(f"deleted the {deleted:,} stored events of {society} (--replace)", highlight=False)
    return deleted


def _fitted_defaults(path: Path | None, *, ticks_given: bool) -> dict[str, Any]:
    """Settings a behaviour file brings: the file itself, and a fitted one's population, tick length, start
    and period (``hours``)."""
    if path is None:
        return {}
    from pydantic import ValidationError

    from molt_society.agents.behaviour import load_behaviour

    try:
        b = load_behaviour(path)
    except (ValueError, ValidationError) as exc:
        raise click.BadParameter(str(exc), param_hint="--behaviour") from None
    out: dict[str, Any] = {"settings": {"behaviour_file": path.resolve()}}
    if b.population is not None:
        pop = b.population
        out["settings"] |= {"agents": pop.agents, "tick_seconds": pop.tick_seconds, "sim_start": pop.start}
        out["population"] = pop
        if not ticks_given:
            out["hours"] = pop.hours
    return out


def _check_recorded(s: Settings, society: str) -> None:
    """A fork or resume needs the society's recorded configuration: say so when it has none."""
    from molt_society.society.fork import load_config

    try:
        load_config(s, society)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None


def _run_society(s: Settings, society: str, **options: Any) -> dict[str, Any]:
    """``society.run.run_society`` with the local broker rebuilt when lost; exits 1 when the stack failed."""
    from molt_society.agents.clock import BarrierTimeout
    from molt_society.runtime.preflight import EnvironmentProblem
    from molt_society.society.fork import ForkError
    from molt_society.society.recover import rebuild_hook
    from molt_society.society.run import run_society
    from molt_society.society.stack import StackBusy, StackFailed

    try:
        return run_society(
            s,
            society=society,
            console=console,
            # simulated time regenerates what the lost topics held; a cluster is never "lost"
            on_broker_lost=rebuild_hook if s.mode == "sim" and not s.kafka_bootstrap else None,
            **options,
        )
    except (StackBusy, EnvironmentProblem, ForkError) as exc:
        raise click.ClickException(str(exc)) from None
    except (StackFailed, BarrierTimeout) as exc:
        console.print(
            f"[bold red]society {society} stopped:[/bold red] {escape(str(exc))}.\nIts processes and broker "
            f"are stopped; the logs are in {s.state_dir / society} (what the stack did: run.log). "
            f"{_finish_advice(society, _recorded_end_tick(s, society))}",
            highlight=False,
        )
        sys.exit(1)


def _recorded_end_tick(s: Settings, society: str) -> int | None:
    """The tick a run was to reach, as its configuration recorded it (None for a run by duration)."""
    from molt_society.society.fork import load_config

    try:
        end = load_config(s, society).get("end_tick")
    except (FileNotFoundError, ValueError):
        return None
    return None if end is None else int(end)


def _finish_advice(society: str, end_tick: int | None) -> str:
    """The command that finishes a stopped run (to ``end_tick``, the tick it was to reach, when it ran by
    ticks) without losing or changing an event: ``--resume`` rebuilds from the first tick the store may not
    hold whole (a fork at the stored end would skip a partial tick)."""
    if end_tick is not None:
        return f"Finish it (to tick {end_tick:,}) with: society run --resume {society}"
    return f"Go on with it with: society run --resume {society} --ticks N (N more ticks)"


def _print_run_summary(society: str, summary: dict[str, Any]) -> None:
    """How the run ended; a signalled run exits 128 + the signal's number."""
    restarts = ", ".join(f"{role} {n}" for role, n in sorted(summary.get("restarts", {}).items()))
    restarted = f" Restarted on the way: {restarts}." if restarts else ""
    console.print()
    if summary.get("interrupted") and not summary["ticks"]:
        console.print(
            f"[bold yellow]stopped by {summary['interrupted']}[/bold yellow] before society [bold]{society}"
            "[/bold] ran a tick; nothing of it runs any more.",
            highlight=False,
        )
        sys.exit(128 + signal.Signals[summary["interrupted"]].value)
    if summary.get("interrupted"):
        name = summary["interrupted"]
        console.print(
            f"[bold yellow]stopped by {name}[/bold yellow]: society [bold]{society}[/bold], "
            f"{summary['ticks']:,} ticks, {summary['events']:,} events stored"
            f"{'' if summary.get('drained') else ' (not drained: the last tick may be partly stored)'}; "
            f"the stack is stopped, nothing of it runs any more.{restarted} "
            f"{_finish_advice(society, summary.get('end_tick'))}",
            highlight=False,
        )
        sys.exit(128 + signal.Signals[name].value)
    console.print(
        f"[bold green]done[/bold green]: society [bold]{society}[/bold], {summary['ticks']:,} ticks, "
        f"{summary['events']:,} events in {summary['seconds']:.1f} s.{restarted} Query it with: "
        f"society sql \"SELECT type, count() FROM events WHERE society = '{society}' GROUP BY type\"; "
        f"look at it with: society dashboard --society {society}"
    )


@main.command()
@click.argument("spec_path", metavar="SPEC.toml", type=click.Path(path_type=Path))
def experiment(spec_path: Path) -> None:
    """Fork a base society into the spec's arms x seeds, run each, and write the result.

    Every arm x seed is its own society <experiment>.<arm>.s<seed>, recorded in the `experiments` table.
    Run it again to resume: pairs done are skipped, a pair left unfinished is purged and run again.
    See docs/experiment.example.toml for a spec."""
    from molt_society.schemas.experiment import SpecError
    from molt_society.society.experiments.runner import ExperimentError, run_experiment
    from molt_society.society.stack import StackBusy

    try:
        run_experiment(get_settings(), spec_path, console=console)
    except SpecError as exc:
        for text in str(exc).splitlines():
            console.print(f"[red]{escape(text)}[/red]", highlight=False)
        sys.exit(2)
    except (ExperimentError, StackBusy) as exc:
        console.print(f"[bold red]experiment failed:[/bold red] {escape(str(exc))}", highlight=False)
        sys.exit(1)


@main.command()
@click.option("--society", "name", required=True, callback=_named)
@click.option("--ticks", type=POSITIVE)
@click.option("--duration", type=SECONDS)
def clock(name: str, ticks: int | None, duration: float | None) -> None:
    """Drive the simulation clock of a society whose workers already run (e.g. docker compose)."""
    import asyncio

    from molt_society.society.drive import drive_clock

    s = get_settings()
    if not s.kafka_bootstrap:
        raise click.UsageError("KAFKA_BOOTSTRAP must name the cluster the workers use")
    if ticks is None and duration is None:
        duration = 60.0
    n, _ = asyncio.run(
        drive_clock(s, s.kafka_bootstrap, name, ticks=ticks, duration=duration, on_tick=_print_tick)
    )
    console.print(f"{n} ticks; every window of society {name} is closed")


def _print_tick(t: int) -> None:
    if t % 50 == 0:
        console.print(f"tick {t}", highlight=False)


def _parse_fork_at(value: str | None) -> datetime | int | None:
    """``--at`` of a fork: a tick number, or an event time (``_parse_time``)."""
    if value is not None and value.strip().isdigit():
        return int(value.strip())
    return _parse_time(value, "--at")


def _parse_time(value: str | None, option: str = "the time") -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{option} {value!r} is not an ISO 8601 time; write it as e.g. 2026-01-28T00:00:00Z"
        ) from None
    if t.tzinfo is None:
        raise click.BadParameter(f"{value!r} has no time zone; write it as e.g. 2026-01-28T00:00:00Z")
    return t


def _parse_speed(value: str) -> float | None:
    v = value.strip().lower()
    if v in ("max", "fast", "asap"):
        return None
    if v in ("realtime", "real-time"):
        return 1.0
    try:
        speed = float(v.removesuffix("x"))
    except ValueError:
        raise click.BadParameter(f"{value!r}: use max, realtime, or a factor such as 60x") from None
    if speed <= 0:
        raise click.BadParameter("the speed factor must be positive")
    return speed


@main.command()
@click.argument("society_name", callback=_named)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="archive: .jsonl.gz, .jsonl or .parquet; moltbook-json: .json or .json.gz; "
    "observatory-sqlite: .sqlite",
)
@click.option(
    "--format",
    "layout",
    type=click.Choice(["archive", "moltbook-json", "observatory-sqlite"]),
    default="archive",
    show_default=True,
    help="archive: the events themselves (replays exactly); moltbook-json: posts_full.json, posts with their "
    "nested comments; observatory-sqlite: the observatory's SQLite database",
)
@click.option("--since", help="first event time to include (ISO 8601 with a zone; archive only)")
@click.option("--until", help="event time to stop before (ISO 8601 with a zone; archive only)")
def export(society_name: str, out: Path, layout: str, since: str | None, until: str | None) -> None:
    """Export a society: its events (compressed JSON Lines or Parquet), or the community's dump layouts."""
    s = get_settings()
    if layout != "archive":
        if since or until:
            raise click.UsageError(
                "--since/--until select events of an archive; a dump layout holds the society"
            )
        _export_layout(s, society_name, out, layout)
        return
    from rich.progress import Progress

    from molt_society.replay.export import count_events, export_society

    lo, hi = _parse_time(since), _parse_time(until)
    total = count_events(s, society_name, lo, hi)
    if total == 0:
        where = "" if lo is None and hi is None else " in that span"
        raise click.ClickException(
            f"society {society_name!r} has no events{where} in {s.clickhouse_url}; {stored.held_by(s)}"
        )
    with Progress(console=console) as progress:
        task = progress.add_task(f"export {society_name}", total=total)
        header = export_society(
            s, society_name, out, since=lo, until=hi, on_event=lambda n: progress.update(task, completed=n)
        )
    console.print(f"wrote {header.events:,} events of {society_name} to {out}")


def _export_layout(s: Settings, society_name: str, out: Path, layout: str) -> None:
    from rich.progress import Progress

    from molt_society.replay.export_json import write_posts_full
    from molt_society.replay.export_layout import StoredSource
    from molt_society.replay.export_sqlite import write_observatory

    source = StoredSource(s, society_name)
    total = sum(source.counts().values())
    if total == 0:
        raise click.ClickException(
            f"society {society_name!r} has no events in {s.clickhouse_url}; {stored.held_by(s)}"
        )
    write = write_posts_full if layout == "moltbook-json" else write_observatory
    with Progress(console=console) as progress:
        task = progress.add_task(f"export {society_name} ({layout})", total=total)
        summary = write(out, source, lambda n: progress.update(task, completed=n))
        progress.update(task, completed=total)
    for line in summary.lines():
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@main.command()
@click.argument("source", type=click.Path(path_type=Path, exists=True))
@click.option(
    "--society", "name", callback=_named, help="the new society to replay into (default replay_<timestamp>)"
)
@click.option("--speed", default="max", show_default=True, help="max, realtime, or a factor such as 60x")
@click.option("--since", help="first event time to replay (ISO 8601 with a zone)")
@click.option("--until", help="event time to stop before (ISO 8601 with a zone)")
@click.option(
    "--dashboard/--no-dashboard", default=True, show_default=True, help="serve the live web dashboard"
)
@click.option(
    "--through",
    type=click.Choice(["auto", "stack", "direct"]),
    default="auto",
    show_default=True,
    help="stack: through the broker, stream workers and sink; direct: straight into ClickHouse through the "
    "stream workers' state machines, no broker (same stored events and metrics); auto: direct for more "
    "than SOCIETY_REPLAY_DIRECT_ABOVE events unless --speed or --dashboard is given",
)
@click.pass_context
def replay(
    ctx: click.Context,
    source: Path,
    name: str | None,
    speed: str,
    since: str | None,
    until: str | None,
    dashboard: bool,
    through: str,
) -> None:
    """Replay an archive or a MoltBook dump through the stream processors into ClickHouse."""
    from molt_society.importers.makers import MakerError
    from molt_society.replay.archive import ArchiveError, is_archive
    from molt_society.replay.source import archive_header, load_source
    from molt_society.runtime.gc_tuning import tune_gc
    from molt_society.society.replay_direct import DirectReplayError
    from molt_society.society.replay_run import replay_loading

    tune_gc()  # the import: millions of records through this process
    s = get_settings()
    factor = _parse_speed(speed)
    lo, hi = _parse_time(since), _parse_time(until)
    society = name or f"replay_{datetime.now(UTC):%Y%m%d_%H%M%S}"
    given = click.core.ParameterSource.COMMANDLINE
    live = factor is not None or (dashboard and ctx.get_parameter_source("dashboard") == given)
    if through == "direct" and factor is not None:
        raise click.UsageError("--speed paces a replay through the stack; --through direct runs at full pace")
    direct = False
    with contextlib.ExitStack() as held:

        def load() -> Source:  # while the stack starts, when it goes through the stack
            src = held.enter_context(load_source(source, since=lo, until=hi))
            _import_summary(s, src, society)
            if not src.events:
                raise click.ClickException(f"{source}: no events to replay")
            return src

        try:
            if through == "stack":
                stats = replay_loading(
                    s,
                    archive_header(source),
                    load,
                    society=society,
                    speed=factor,
                    console=console,
                    dashboard=dashboard,
                    source_name=source.name,
                    early=not is_archive(source),  # an archive is read in seconds; a dump is imported
                )
            else:
                stats, direct = _replay_loaded(
                    s, load(), society, through, live, factor, dashboard, source.name
                )
        except (ArchiveError, DirectReplayError, MakerError) as exc:
            raise click.ClickException(str(exc)) from None
    console.print(
        f"replayed {stats.events:,} events into society [bold]{society}[/bold] in {stats.seconds:.1f} s "
        f"({stats.events / max(stats.seconds, 1e-6):,.0f} events/s {'stored' if direct else 'published'})"
    )


def _replay_loaded(
    s: Settings,
    src: Source,
    society: str,
    through: str,
    live: bool,
    factor: float | None,
    dashboard: bool,
    source_name: str,
) -> tuple[PublishStats, bool]:
    """Replay a loaded history through the stack or directly (``--through``); (what went through, direct)."""
    from molt_society.society.replay_direct import replay_direct
    from molt_society.society.replay_run import replay_source

    n = len(src.events)
    if through == "auto" and (live or n <= s.replay_direct_above):
        stats = replay_source(
            s,
            src,
            society=society,
            speed=factor,
            console=console,
            dashboard=dashboard,
            source_name=source_name,
        )
        return stats, False
    if through == "auto":
        console.print(
            f"{n:,} events: replayed straight into ClickHouse through the stream workers' state machines "
            f"(more than SOCIETY_REPLAY_DIRECT_ABOVE={s.replay_direct_above:,}; --through stack goes "
            "through the broker)",
            highlight=False,
        )
    if dashboard:
        console.print(
            "a direct replay has no live dashboard; once it is stored: "
            f"society dashboard --society {society}",
            highlight=False,
        )
    return replay_direct(s, src, society=society, console=console, source_name=source_name), True


def _import_summary(s: Settings, src: Source, society: str) -> None:
    """A dump's import report: its summary on the console, the whole in the society's state folder."""
    if src.report is not None:
        full = s.state_dir / society / "import-report.txt"
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(src.report.render() + "\n", encoding="utf-8")
        summary = src.report.render(max_files=REPORT_FILES_SHOWN, full_report=str(full))
        console.print(summary, highlight=False, markup=False)


@main.command()
@click.option(
    "--society", "name", help="the society to show (default: the running stack's, else SOCIETY_SOCIETY)"
)
@click.option("--host", help="address to listen on (default SOCIETY_DASHBOARD_HOST, 127.0.0.1)")
@click.option("--port", type=int, help="port (default SOCIETY_DASHBOARD_PORT, 8765; 0 picks a free one)")
@click.option(
    "--bootstrap", help="Kafka bootstrap for consumer lag (default: KAFKA_BOOTSTRAP or the stack's)"
)
def dashboard(name: str | None, host: str | None, port: int | None, bootstrap: str | None) -> None:
    """Serve the live web dashboard of a society (running, replaying or stored) until Ctrl-C."""
    import asyncio

    from molt_society.dashboard.__main__ import run as serve_dashboard
    from molt_society.runtime.stack_state import read_state

    s = _settings(dashboard_host=host, dashboard_port=port)
    stack_state = read_state(s)
    society = _society_name(name or stack_state.get("society") or s.society, "--society")
    bootstrap = bootstrap or s.kafka_bootstrap or stack_state.get("bootstrap")
    if stack_state.get("society") != society:  # a running society may not have stored its first event yet
        try:
            stored.check_stored(s, society)
        except stored.SocietyUnknown as exc:
            raise click.ClickException(str(exc)) from None
    configure_logging("info", s.log_json)
    console.print(
        f"dashboard of society [bold]{society}[/bold] (ClickHouse {s.clickhouse_url}; broker "
        f"{bootstrap or 'not watched'}); its URL follows. Ctrl-C stops it."
    )
    try:
        asyncio.run(serve_dashboard(s, society, bootstrap))
    except OSError as exc:
        raise click.ClickException(f"cannot serve the dashboard: {exc}") from None


@main.command()
@click.option("--society", "name", required=True, callback=_named, help="the running society to probe")
@click.option(
    "--tier", type=click.Choice(["1", "2", "3", "memory"]), help="Tier I, II, III or the shared-memory probe"
)
@click.option("--questions", type=click.Path(path_type=Path), help="Tier I: JSON, JSON lines or CSV")
@click.option("--count", type=int, default=5, show_default=True, help="probes to post (Tiers II, III)")
@click.option("--submolt", help="community to post in (default: the society's first)")
@click.option("--seed", type=int, help="seed of the generated problems and probing agents")
@click.option(
    "--wait", type=float, default=120.0, show_default=True, help="seconds to let the society answer"
)
@click.option(
    "--score", "score_file", type=click.Path(path_type=Path), help="only (re)score this probe run file"
)
@click.option("--judge", type=click.Choice(["exact", "llm"]), default="exact", show_default=True)
@click.option("--judge-model", default=None, help="model of the LLM judge (default: the first LLM model)")
@click.option("--help-models", default=None, help=HELP_MODELS_HELP)
@click.option(
    "--help-max-tokens", type=int, default=512, show_default=True, help="tokens per Delta-help answer"
)
def probe(
    name: str,
    tier: str | None,
    questions: Path | None,
    count: int,
    submolt: str | None,
    seed: int | None,
    wait: float,
    score_file: Path | None,
    judge: str,
    judge_model: str | None,
    help_models: str | None,
    help_max_tokens: int,
) -> None:
    """Probe a running society (Superminds Test): post tasks with known answers, then score the answers.

    The probes look like ordinary posts by ordinary agents; the probing agents never act after posting.
    Results per tier (no-reply share, replies per probe, task following, individual and thread accuracy)
    are printed and written beside the run in <state_dir>/<society>/probes/.
    """
    import time

    from molt_society.probes import session, tasks
    from molt_society.report.probe_runs import ProbeError, load_run
    from molt_society.report.warehouse_source import open_warehouse
    from molt_society.warehouse import QueryError

    s = get_settings()
    judge_impl = _judge(s, judge, judge_model)
    helpers = _help_models(s, help_models)
    wh = open_warehouse(s)
    try:
        if score_file is not None:
            run = load_run(score_file)
        else:
            if tier is None:
                raise click.UsageError("--tier is required (or --score RUN_FILE)")
            if tier == "1":
                if questions is None:
                    raise click.UsageError("Tier I needs --questions FILE (question and answer per item)")
                made = tasks.tier1(tasks.load_questions(questions))
            elif tier == "2":
                made = tasks.tier2(count, seed if seed is not None else 0)
            elif tier == "3":
                made = tasks.tier3(count, seed if seed is not None else 0)
            else:
                made = tasks.shared_memory(count)
            run = session.inject(
                s, wh, _bootstrap(s), name, made, submolt=submolt or _first_submolt(s), seed=seed
            )
            console.print(f"posted {len(made)} probe(s) of tier {tier} in {run.submolt}: run {run.run_id}")
            with progress_status(console, f"letting the society answer for {wait:.0f} s ..."):
                time.sleep(wait)
            # the society may have ended meanwhile (its sink gone): read the store as it is now
            wh.close()
            wh = open_warehouse(s)
        doc = session.score(s, wh, run, judge_impl, help_models=helpers, help_max_tokens=help_max_tokens)
    except (ProbeError, tasks.ProbeFileError) as exc:
        raise click.ClickException(str(exc)) from None
    except QueryError as exc:
        raise click.ClickException(f"cannot read the store {s.clickhouse_url}: {exc}") from None
    finally:
        wh.close()
    _print_probe_results(doc)


def _bootstrap(s: Settings) -> str:
    from molt_society.runtime.stack_state import read_state

    bootstrap = s.kafka_bootstrap or read_state(s).get("bootstrap")
    if not bootstrap:
        raise click.ClickException(
            "no running society here: start one with `society run` (or set KAFKA_BOOTSTRAP)"
        )
    return str(bootstrap)


def _first_submolt(s: Settings) -> str:
    from molt_society.agents.behaviour import load_behaviour

    return load_behaviour(s.behaviour_file).submolts.names[0]


def _judge(s: Settings, kind: str, model: str | None) -> Any:
    if kind == "exact":
        return None
    from molt_society.probes.judge import LLMJudge
    from molt_society.runtime.stack_state import model_server_url

    url = s.llm_base_url or model_server_url(s)  # else the running stack's local model server
    if not url:
        raise click.UsageError(
            "--judge llm needs a model server: SOCIETY_LLM_BASE_URL, or a running society with LLM agents"
        )
    from molt_society.agents.llm_client import ChatClient

    return LLMJudge(ChatClient(url, s.llm_api_key), model or s.model_names[0])


def _help_models(s: Settings, spec: str | None) -> Any:
    if not spec:
        return None
    from molt_society.probes.helpfulness import ModelSpecError, parse_models
    from molt_society.runtime.stack_state import model_server_url

    url = s.llm_base_url or model_server_url(s)
    try:
        return parse_models(spec, url, s.llm_api_key)
    except ModelSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--help-models") from None


def _print_probe_results(doc: dict[str, Any]) -> None:
    from rich.table import Table

    labels = [
        ("probes", "probes"),
        ("no_reply_share", "no external reply"),
        ("replies_per_probe", "replies per probe"),
        ("follow_share", "replies following the task"),
        ("individual_accuracy", "probes with a correct reply"),
        ("reply_accuracy", "correct replies"),
        ("thread_accuracy", "threads correct as a whole"),
        ("mean_depth", "deepest reply (mean)"),
    ]
    tiers = doc["tiers"]
    if tiers:
        t = Table(title=f"probe run {doc['run_id']} (judge: {doc['judge']})")
        t.add_column("")
        for tier in tiers:
            t.add_column(f"tier {tier}", justify="right")
        for key, label in labels:
            cells = [tiers[k][key] for k in tiers]
            t.add_row(
                label, *("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in cells)
            )
        console.print(t)
    _print_probe_extras(doc)
    memory = doc.get("shared_memory")
    if memory:
        console.print(
            f"shared memory: {memory['naming']}/{memory['replies']} replies name an agent; agreement "
            f"{memory['agreement']}; share of named agents among PageRank leaders {memory['precision']}; "
            f"leaders named {memory['recall']}"
        )


def _print_probe_extras(doc: dict[str, Any]) -> None:
    """The paper's values beside ours (with their source) and Delta-help per model."""
    from rich.table import Table

    def pct(v: Any) -> str:
        return "-" if v is None else f"{100 * v:.1f}%"

    if doc.get("published"):
        t = Table(title="beside the Superminds Test's published values")
        for col in ("tier", "metric", "ours", "published", "source"):
            t.add_column(col, justify="right" if col in ("ours", "published") else "left")
        for c in doc["published"]:
            t.add_row(c["tier"], c["metric"], pct(c["ours"]), pct(c["published"]), c["source"])
        console.print(t)
    if "delta_help" in doc:
        t = Table(title="Tier I Delta-help per model (commented questions, answer comments left out)")
        for col in ("model", "server", "questions", "Acc(M(q))", "Acc(M(q+C*))", "Delta-help", "failed"):
            t.add_column(col, justify="left" if col in ("model", "server") else "right")
        for h in doc["delta_help"]:
            delta = "-" if h["delta_help"] is None else f"{100 * h['delta_help']:+.1f}%"
            t.add_row(h["model"], h["base_url"], str(h["questions"]), pct(h["baseline_accuracy"]),
                      pct(h["context_accuracy"]), delta, str(h["failed"]))  # fmt: skip
        console.print(t)


@main.command()
@click.argument("society_name", callback=_named)
@click.option("--vs", "other", callback=_named, help="a second society, shown side by side")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="HTML file to write (default <society>[-vs-<other>]-report.html); the JSON goes beside it",
)
@click.option("--no-embeddings", is_flag=True, help="skip the layers that need sentence embeddings")
@click.option("--only", multiple=True, help=ONLY_HELP)
@click.option(
    "--dump",
    type=click.Path(path_type=Path, exists=True),
    help="a real MoltBook dump to show the fidelity table against (default: the dump a fitted behaviour "
    "file recorded, when the society ran with one)",
)
def report(
    society_name: str,
    other: str | None,
    out: Path | None,
    no_embeddings: bool,
    only: tuple[str, ...],
    dump: Path | None,
) -> None:
    """Write the MoltBook studies' diagnostics of a society as an offline HTML report and a JSON file.

    Social, individual and collective layers, Molt Dynamics' roles, cascades, saturation and cooperation,
    and the streaming metrics checked against a batch recomputation; published MoltBook values alongside.
    """
    from molt_society.report.build import SPECS, build_report
    from molt_society.report.embeddings import Encoder
    from molt_society.report.warehouse_source import open_warehouse
    from molt_society.report.write import write_report
    from molt_society.warehouse import QueryError

    names = [society_name] + ([other] if other else [])  # checked by their callbacks
    known = {s.key for s in SPECS} | {"fidelity"}
    if unknown := set(only) - known:
        raise click.UsageError(f"unknown diagnostic(s) {sorted(unknown)}; choose from {sorted(known)}")
    out = out or Path(f"{'-vs-'.join(names)}-report.html")
    wh = open_warehouse(get_settings())
    encoder = Encoder()  # one model load for both societies
    reports = []
    try:
        held = {row[0]: row for row in stored.stored_societies(wh)}
        if missing := [n for n in names if n not in held]:
            raise click.ClickException(
                f"the store {get_settings().clickhouse_url} holds no society "
                f"{', '.join(map(repr, missing))}; " + stored.held_line(list(held.values()))
            )
        for n in names:
            with progress_status(console, f"{n}: starting") as status:
                reports.append(
                    build_report(
                        wh,
                        n,
                        embed=not no_embeddings,
                        encoder=encoder,
                        only=set(only) or None,
                        reference=_reference(n, dump),
                        progress=lambda msg, n=n: status.update(f"{n}: {msg}"),  # type: ignore[misc]
                    )
                )
            for sec in reports[-1].sections:
                flag = f"[red]failed: {sec.error}[/red]" if sec.error else ""
                console.print(f"  {n} · {sec.title}: {sec.seconds:.1f} s {flag}", highlight=False)
    except QueryError as exc:
        raise click.ClickException(f"query failed: {exc}") from None
    finally:
        wh.close()
    html_path, json_path = write_report(reports, out)
    console.print(
        f"report: {html_path.resolve()}\nnumbers: {json_path.resolve()}\n"
        f"from the store {get_settings().clickhouse_url}",
        highlight=False,
    )


def _reference(society: str, dump: Path | None) -> Any:
    """What the fidelity table compares ``society`` with: ``dump`` read now, else the real moments the
    fitted behaviour file it ran with recorded; None when neither (no fidelity table)."""
    from molt_society.agents.behaviour import load_behaviour
    from molt_society.calibration.fitted_file import read_record
    from molt_society.report.fidelity import Reference
    from molt_society.society.fork import load_config

    if dump is not None:
        from molt_society.calibration.dump import read_dump

        try:
            return Reference(f"the dump {dump}", read_dump(dump).moments)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    try:
        path = load_config(get_settings(), society).get("behaviour_file")
    except FileNotFoundError:
        return None
    if not path or not Path(path).is_file():
        return None
    b = load_behaviour(Path(path))
    rows = read_record(b)
    if not rows:
        return None
    real = {r["key"]: (r["real"] if isinstance(r["real"], float | int) else None) for r in rows}
    return Reference(f"the dump {(b.fit or {}).get('dump', '?')} (fitted in {path})", real)


@main.command(name="list")
def list_societies() -> None:
    """The societies the store holds: name, events, first and last event time (UTC)."""
    from molt_society.report.warehouse_source import open_warehouse
    from molt_society.warehouse import QueryError

    s = get_settings()
    wh = open_warehouse(s)
    try:
        held = stored.stored_societies(wh)
    except QueryError as exc:
        raise click.ClickException(f"query failed: {exc}") from None
    finally:
        wh.close()
    t = Table(show_header=True, header_style="bold", title=f"societies in {s.clickhouse_url}")
    for c in ("society", "events", "first event", "last event"):
        t.add_column(c)
    for name, events, first, last in held:
        t.add_row(_cell(name), f"{events:,}", _cell(first), _cell(last))
    console.print(t)
    if not held:
        console.print(stored.held_line(held), style="dim", highlight=False)


@main.command()
@click.argument("sql")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table")
def sql(sql: str, fmt: str) -> None:
    """Run one read-only SQL statement on the society's ClickHouse and print the result.

    Only reads run (SELECT, WITH, EXPLAIN, SHOW, DESCRIBE, EXISTS): ClickHouse refuses anything else, and
    no query can change a setting or reach files, the network or other processes (``warehouse``)."""
    from molt_society.warehouse import QueryError, Refused, open_reader

    s = get_settings()
    try:
        reader = open_reader(s)
        try:
            res = reader.query(sql)
        finally:
            reader.close()
    except Refused as exc:
        console.print(f"[red]refused:[/red] {escape(str(exc))}", markup=True, highlight=False)
        sys.exit(2)
    except QueryError as exc:
        console.print(f"[red]query failed:[/red] {escape(str(exc))}", markup=True, highlight=False)
        sys.exit(2)
    if fmt == "json":
        click.echo(json.dumps([dict(zip(res.columns, r, strict=True)) for r in res.rows], default=str))
    elif fmt == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(res.columns)
        w.writerows(res.rows)
    else:
        t = Table(show_header=True, header_style="bold")
        for c in res.columns:
            t.add_column(c, overflow="fold")
        for r in res.rows:
            # agent-written text is data: no rich markup interpretation
            t.add_row(*(_cell(v) for v in r))
        console.print(t)
        console.print(f"{len(res.rows)} row(s) from {s.clickhouse_url}", style="dim", highlight=False)


def _cell(v: Any) -> Any:
    from rich.text import Text

    if isinstance(v, float):
        return Text(f"{v:.6g}")
    return Text(str(v))


@main.command()
@click.argument("society_name", callback=_named)
@click.argument("question")
@click.option("--agent", "agent_id", required=True, help="the agent to ask (e.g. agent-000003)")
@click.option("--at", "at", help="its history before this time: ISO 8601 with a zone, or a tick number")
@click.option("--model", help="the model to ask (default: the agent's own)")
@click.option("--seed", type=int, default=0, show_default=True, help="sampling seed")
@click.option("--temperature", type=click.FloatRange(0, 2), default=0.0, show_default=True)
@click.option("--max-tokens", type=click.IntRange(1, 8192), default=200, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the interview's record as JSON")
def interview(
    society_name: str, question: str, agent_id: str, at: str | None, model: str | None,
    seed: int, temperature: float, max_tokens: int, as_json: bool,
) -> None:  # fmt: skip
    """Ask an agent a question from its persona and its own posts and comments up to --at.

    The society is unchanged; the call is recorded in <state_dir>/<society>/interviews.jsonl."""
    from molt_society.society.interview import InterviewError, printable
    from molt_society.society.interview import interview as ask_agent

    try:
        done = ask_agent(get_settings(), society_name, agent_id, question, at=at, model=model, seed=seed,
                         temperature=temperature, max_tokens=max_tokens)  # fmt: skip
    except (InterviewError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(done.record(), ensure_ascii=False))
    elif done.ok:
        click.echo(printable(done.answer) or "(the model's answer is empty)")
    if not done.ok:
        raise click.ClickException(f"the model call failed: {printable(done.event.body.reason or '')}")


@main.command()
def status() -> None:
    """Throughput, consumer lag (from the high watermark) and dead letters of the running stack.

    A stack whose driver died is reported, whatever of it still runs is stopped, and its state removed."""
    from molt_society.society.status import print_status

    sys.exit(print_status(get_settings(), console))


@main.command()
@click.option(
    "--timeout",
    type=float,
    default=120.0,
    show_default=True,
    help="seconds to let the society drain and stop before killing its driver",
)
def stop(timeout: float) -> None:
    """Stop the running stack cleanly: its driver (`society run`) drains, flushes and stops everything.

    A stack whose driver died is cleared instead: what still runs of it is stopped, its state removed."""
    from molt_society.society.stale_stack import stop_stack

    sys.exit(
        stop_stack(get_settings(), timeout, lambda msg: console.print(msg, highlight=False, markup=False))
    )


@main.command()
@click.option("--out", type=click.Path(path_type=Path), help="write to this file instead of stdout")
def schema(out: Path | None) -> None:
    """Export the event contract as JSON Schema (for non-Python producers)."""
    from molt_society.schemas.json_schema import event_json_schema

    text = json.dumps(event_json_schema(), indent=2)
    if out:
        out.write_text(text + "\n")
        console.print(f"wrote {out}")
    else:
        click.echo(text)


@main.command()
def topics() -> None:
    """Print the topics of a society: name, key, partitions, writers and readers."""
    from molt_society.schemas.topics import topics_markdown

    click.echo(topics_markdown())


@main.command()
@click.option("--agents", type=POSITIVE, default=2000)
@click.option("--ticks", type=POSITIVE, default=300)
@click.option("--seed", type=int, default=1)
@click.option("--behaviour", "behaviour_file", type=click.Path(path_type=Path, exists=True))
@click.option(
    "--fit",
    "dump",
    type=click.Path(path_type=Path, exists=True),
    help="fit the model to this MoltBook dump (any layout society replay reads) instead",
)
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="with --fit: the fitted file")
@click.option("--tick-seconds", type=float, default=300.0, show_default=True, help="with --fit")
@click.option(
    "--scale",
    type=float,
    default=1.0,
    show_default=True,
    help="with --fit: population of the thread stage's simulations, relative to the fitted one",
)
@click.option("--evals", type=int, default=32, show_default=True, help="with --fit: thread-stage simulations")
@click.option(
    "--activity-evals",
    type=int,
    default=200,
    show_default=True,
    help="with --fit: activity-stage simulations",
)
def calibrate(
    agents: int,
    ticks: int,
    seed: int,
    behaviour_file: Path | None,
    dump: Path | None,
    out: Path | None,
    tick_seconds: float,
    scale: float,
    evals: int,
    activity_evals: int,
) -> None:
    """Run the stochastic brain offline and compare its society's shape with MoltBook's; with --fit DUMP
    --out F.toml, fit the behaviour model to a real dump instead (see README, "Fitting a society")."""
    if dump is not None:
        if out is None:
            raise click.UsageError("--fit needs --out F.toml (the fitted behaviour file to write)")
        _fit(dump, out, seed=seed, tick_seconds=tick_seconds, scale=scale, evals=(activity_evals, evals))
        return
    from molt_society.agents.behaviour import load_behaviour
    from molt_society.agents.offline import MOLTBOOK_TARGETS, simulate

    s = get_settings()
    b = load_behaviour(behaviour_file or s.behaviour_file)
    res = simulate(
        seed=seed, agents=agents, ticks=ticks, behaviour=b, start=datetime.fromisoformat(s.sim_start)
    ).figures()
    t = Table("figure", "simulated", "MoltBook", header_style="bold")
    for k, v in res.items():
        target = MOLTBOOK_TARGETS.get(k)
        t.add_row(k, f"{v:,.4f}", "" if target is None else f"{target:.4f}")
    console.print(t)


def _fit(
    dump: Path, out: Path, *, seed: int, tick_seconds: float, scale: float, evals: tuple[int, int]
) -> None:
    """``society calibrate --fit``: read, fit the text model, fit the behaviour, write, show the table."""
    import time

    from molt_society.agents.text_model import TextModel
    from molt_society.calibration.dump import read_dump
    from molt_society.calibration.fit import fit
    from molt_society.calibration.fitted_file import fit_record, moment_rows, write_fitted

    started = time.perf_counter()
    sample = get_settings().fit_sample
    with progress_status(console, f"reading {dump} ...") as status:
        if sample is not None:
            console.print(f"SOCIETY_FIT_SAMPLE={sample:g}: fitting on that share of the dump's threads")
        try:
            d = read_dump(dump, sample)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        console.print(
            f"dump: {d.posts:,} posts, {d.comments:,} comments, {d.agents:,} authors over {d.hours:g} hours "
            f"from {d.start:%Y-%m-%d %H:%M} UTC ({time.perf_counter() - started:.0f} s)",
            highlight=False,
        )
        status.update(f"fitting the text model on {len(d.texts):,} texts ...")
        text = TextModel.fit(d.texts)
        text_file = out.with_suffix(".text.npz")
        out.parent.mkdir(parents=True, exist_ok=True)
        text.save(text_file)
        console.print(f"text model: {text_file} ({time.perf_counter() - started:.0f} s)", highlight=False)
        result = fit(
            d,
            seed=seed,
            tick_seconds=tick_seconds,
            scale=scale,
            activity_evals=evals[0],
            thread_evals=evals[1],
            progress=lambda msg: status.update(f"{msg} ({time.perf_counter() - started:.0f} s)"),
        )
    write_fitted(out, result.behaviour, fit_record(d, result), text_file)
    t = Table("moment", "dump", "fitted society", "distance", "band", "", header_style="bold")
    for r in moment_rows(result.real, result.simulated):
        mark = "[green]in band[/green]" if r["in_band"] else "[red]outside[/red]"
        t.add_row(
            ("* " if r["core"] else "") + r["label"],
            _fmt(r["real"]),
            _fmt(r["simulated"]),
            _fmt(r["distance"]),
            r["band"],
            mark,
        )
    console.print(t)
    pop = result.behaviour.population
    assert pop is not None
    console.print(
        f"wrote {out} in {time.perf_counter() - started:.0f} s: {pop.agents:,} agents over "
        f"{pop.hours:g} hours from {pop.start} (* the nine moments the acceptance names). "
        f"Run it with: society run --behaviour {out} --society fitted",
        highlight=False,
    )


def _fmt(v: float | str) -> str:
    return v if isinstance(v, str) else f"{v:,.4g}"


if __name__ == "__main__":
    main()
