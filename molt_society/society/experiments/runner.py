"""``society experiment SPEC.toml``: fork one base into arms x seeds, run each, record it, write the result.

The spec (``schemas.experiment``) names a base (a society at a tick or time, or an archive to replay: see
``society.experiments.base``), the arms and their interventions, the seeds and the ticks after the fork.
Every arm x seed is its own society ``<experiment>.<arm>.s<seed>``, a fork of the base at the same point
(``society.fork``: the base's history copied from ClickHouse into its topics, then the clock runs live)
with the arm's plan (``schemas.arm_plan``, ``society.experiments.plan``) in ``<state>/<society>/
arm-plan.json`` and the simulation seed ``run_seed``; its processes get both through ``Settings``
(``society.stack.settings_env``). After a pair ran, the set of its event ids before the fork instant must
equal the base's, or the experiment stops with an error.

The pairs run one after another, never side by side: the machine this was built for has 2 cores, which
one stack (sink, stream worker, agent worker, broker) already keeps busy, and one stack at a time keeps
the embedded chDB single-writer (one process may open it: the running sink, or between two pairs this
process, which writes the ``experiments`` table then). Without a configured broker the pairs share one
local broker that the run starts and stops (``experiments.base.StackPairs``).

The ``experiments`` table (``warehouse/experiments.sql``) has one row per arm x seed: 'started' before it
runs, 'done' once its history was verified. Rerunning the same spec resumes: a pair 'done' with the same
spec hash is skipped; a pair left 'started' (an interrupted run) is purged (its rows in every table, its
state directory) and run again. A society of a pair's name that the experiment did not create (no row of
it in ``experiments``: another run took the name) is never purged: the experiment stops, saying so.
Compare arms in SQL, e.g. the events per window after the fork::

    SELECT e.arm, e.seed, avg(m.value) AS events_per_window
    FROM experiments AS e FINAL
    JOIN metrics AS m FINAL ON m.society = e.society
    WHERE e.experiment = 'feed-and-moderation' AND e.status = 'done'
      AND m.metric = 'events_total' AND m.window_end > e.fork_at
    GROUP BY e.arm, e.seed ORDER BY e.arm, e.seed

At the end ``report.experiments.outcome.write_result`` writes the result (HTML and JSON) to
``<state>/experiments/<name>/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console

from molt_society.report.experiments.outcome import write_result
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.schemas.arm_plan import ArmPlan, write_plan
from molt_society.schemas.control import from_us
from molt_society.schemas.experiment import Arm, ExperimentSpec, load_spec, run_seed, society_name
from molt_society.society.experiments.base import Base, PairJob, StackPairs, drop_topics, resolve_base
from molt_society.society.experiments.base import ExperimentError as ExperimentError
from molt_society.society.experiments.display import Display
from molt_society.society.experiments.plan import BaseHistory, build_plan, needs_history
from molt_society.society.experiments.tables import ExperimentRow, Recorded, Store, new_version, now
from molt_society.society.stale_stack import check_no_live_stack
from molt_society.society.stored import held_by, next_generation

log = get_logger(__name__)

PairRunner = Callable[[PairJob, Callable[[int], None]], int]
"""Runs one pair (``experiments.base.run_pair``): the job and a tick callback in, history events out."""


@dataclass(frozen=True)
class Pair:
    """One arm x seed of the experiment, with its place in the order of runs."""

    arm: Arm
    seed: int
    society: str
    run_seed: int
    arm_no: int
    arms: int
    seed_no: int
    seeds: int

    @property
    def label(self) -> str:
        return f"arm {self.arm_no}/{self.arms} seed {self.seed_no}/{self.seeds}"


@dataclass
class ExperimentOutcome:
    """What an experiment did: its pairs, those run now and those done before (resumed), the result."""

    experiment: str
    base: str
    fork_tick: int
    pairs: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    html: Path | None = None
    json: Path | None = None


def quick_look(settings: Settings, spec: ExperimentSpec, console: Console) -> ExperimentSpec:
    """The spec cut to ``SOCIETY_EXPERIMENT_MAX_SEEDS`` seeds and ``SOCIETY_EXPERIMENT_MAX_TICKS`` ticks
    when they are set (said on the console); the cut spec has its own hash (``spec_hash``)."""
    seeds, ticks = settings.experiment_max_seeds, settings.experiment_max_ticks
    update: dict[str, object] = {}
    if seeds is not None and seeds < len(spec.seeds):
        update["seeds"] = list(spec.seeds[:seeds])
    if ticks is not None and ticks < spec.ticks:
        update["ticks"] = ticks
    if not update:
        return spec
    cut = spec.model_copy(update=update)
    console.print(
        f"a quick look (SOCIETY_EXPERIMENT_MAX_SEEDS / _MAX_TICKS): seeds {list(cut.seeds)}, {cut.ticks} "
        f"ticks per arm, not the spec's {len(spec.seeds)} seeds x {spec.ticks} ticks",
        highlight=False,
    )
    return cut


def spec_hash(spec: ExperimentSpec) -> str:
    """SHA-256 of the spec's meaning (its normalised JSON), not of the file's bytes or comments."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def pairs_of(spec: ExperimentSpec) -> list[Pair]:
    arms = [a.name for a in spec.arms]
    return [
        Pair(spec.arm(a), s, society_name(spec, a, s), run_seed(spec, a, s), arms.index(a) + 1, len(arms),
             spec.seeds.index(s) + 1, len(spec.seeds))
        for a, s in spec.runs()
    ]  # fmt: skip


@dataclass
class _Run:
    """The state one experiment run shares between its pairs."""

    settings: Settings
    spec: ExperimentSpec
    base: Base
    digest: str
    runner: PairRunner
    display: Display
    history: BaseHistory
    base_ids: set[str]
    plans: dict[str, ArmPlan] = field(default_factory=dict)

    def plan(self, pair: Pair) -> ArmPlan:
        """The arm's plan (bans and removals computed once per arm), for this seed."""
        if pair.arm.name not in self.plans:
            self.plans[pair.arm.name] = build_plan(
                experiment=self.spec.name,
                arm=pair.arm,
                seed=pair.seed,
                fork_tick=self.base.point.tick,
                fork_at_us=self.base.point.at_us,
                history=self.history,
            )
        return self.plans[pair.arm.name].model_copy(update={"seed": pair.seed})

    def store(self) -> Store:
        return Store(self.settings.clickhouse_url, schema=False)

    def row(self, pair: Pair, status: str, started: ExperimentRow | None = None) -> ExperimentRow:
        point = self.base.point
        return ExperimentRow(
            experiment=self.spec.name, arm=pair.arm.name, seed=pair.seed, society=pair.society,
            control=int(pair.arm.control), run_seed=pair.run_seed, base_society=self.base.society,
            fork_tick=point.tick, fork_at=from_us(point.at_us), ticks=self.spec.ticks, status=status,
            history_events=0, history_verified=0, spec_sha256=self.digest,
            started_at=started.started_at if started else now(), finished_at=None, wall_seconds=0.0,
            version=new_version(),
        )  # fmt: skip


def run_experiment(
    settings: Settings,
    spec_path: Path,
    *,
    console: Console,
    runner: PairRunner | None = None,
    after_pair: Callable[[str], None] | None = None,
) -> ExperimentOutcome:
    """Run every arm x seed of the spec at ``spec_path`` not done before (see module docstring).

    Raises ``schemas.experiment.SpecError`` for a bad spec, ``ExperimentError`` (one line) for a base that
    cannot be forked or a pair that fails or whose history differs from the base's, ``StackBusy`` when a
    stack runs in the state directory. ``after_pair`` is called with the society of each pair run now,
    once it is recorded 'done' (tests use it to interrupt a run)."""
    spec = quick_look(settings, load_spec(spec_path), console)
    stale = check_no_live_stack(settings)
    if stale is not None:
        console.print(stale.describe(), highlight=False, markup=False)
    base = resolve_base(settings, spec, spec_path, console)
    pairs = pairs_of(spec)
    with Store(settings.clickhouse_url) as store:  # applies the schema once
        recorded = store.recorded(spec.name)
        base_ids = store.event_ids(base.society, base.point.at_us)
        history = store.history(base.society, base.point.at_us) if needs_history(spec.arms) else BaseHistory()
    if not base_ids:
        raise ExperimentError(
            f"base society {base.society!r} has no events before the fork point (tick {base.point.tick}) "
            f"in ClickHouse ({settings.clickhouse_url}); {held_by(settings)}"
        )
    outcome = ExperimentOutcome(spec.name, base.society, base.point.tick, [p.society for p in pairs])
    console.print(
        f"[bold]experiment[/bold] {spec.name}: {len(spec.arms)} arms x {len(spec.seeds)} seeds x "
        f"{spec.ticks} ticks, forking {base.society} at tick {base.point.tick} "
        f"({from_us(base.point.at_us).isoformat()}; {len(base_ids):,} events of history)",
        highlight=False,
    )
    with contextlib.ExitStack() as cleanup, Display(console, len(pairs), spec.ticks) as display:
        if runner is None:
            stack_pairs = StackPairs(settings, spec.name)
            cleanup.callback(stack_pairs.close)
            runner = stack_pairs
        run = _Run(settings, spec, base, spec_hash(spec), runner, display, history, base_ids)
        for pair in pairs:
            rec = recorded.get((pair.arm.name, pair.seed))
            if rec is not None and rec.status == "done" and rec.spec_sha256 == run.digest:
                outcome.resumed.append(pair.society)
                display.skipped(pair.label, pair.society)
                continue
            _run_pair(run, pair, rec)
            outcome.ran.append(pair.society)
            if after_pair is not None:
                after_pair(pair.society)
    outcome.html, outcome.json = _write_result(settings, spec.name, console)
    return outcome


def _run_pair(run: _Run, pair: Pair, rec: Recorded | None) -> None:
    """Purge what an earlier attempt left, run the pair, verify its history, record it 'done'."""
    settings, display = run.settings, run.display
    state = settings.state_dir / pair.society
    generation = 0
    if rec is None:
        with run.store() as store:
            stored = store.count_events(pair.society)
        if stored or state.exists():
            raise ExperimentError(
                f"{pair.label}: society {pair.society!r} exists ({stored:,} events stored"
                f"{', a state folder' if state.exists() else ''}) and experiment {run.spec.name!r} did not "
                "create it; nothing was deleted. Rename the experiment or the arm, or remove that society"
            )
    else:
        display.say(f"{pair.label}: {pair.society} was left unfinished (or ran another spec); purging it")
        generation = next_generation(settings, pair.society)
        with run.store() as store:
            store.purge(pair.society)
        shutil.rmtree(state, ignore_errors=True)
        if settings.kafka_bootstrap:
            asyncio.run(drop_topics(settings.kafka_bootstrap, pair.society))
    started = run.row(pair, "started")
    with run.store() as store:
        store.write(started)  # first: from here on the society is this experiment's (a rerun may purge it)
    plan_path = write_plan(run.plan(pair), (state / "arm-plan.json").resolve())
    update = {"seed": pair.run_seed, "arm_plan": plan_path, "generation": generation, "resume_us": None}
    s = run.base.settings.model_copy(update=update)
    began = time.monotonic()
    display.pair_started(pair.label, pair.society)
    extra = {"experiment": run.spec.name, "arm": pair.arm.name, "experiment_seed": pair.seed}
    extra["generation"] = generation
    try:
        run.runner(PairJob(pair.society, s, run.base, run.spec.ticks, extra), display.on_tick)
    except Exception as exc:
        raise ExperimentError(f"{pair.label} ({pair.society}) failed: {type(exc).__name__}: {exc}") from exc
    with run.store() as store:
        ids = store.event_ids(pair.society, run.base.point.at_us)
        _verify(pair.society, run.base.society, ids, run.base_ids)
        wall = time.monotonic() - began
        done = replace(run.row(pair, "done", started), history_events=len(ids), history_verified=1)
        store.write(replace(done, finished_at=now(), wall_seconds=wall))
    display.pair_done(pair.label, pair.society, wall, len(ids))


def _verify(society: str, base: str, ids: set[str], base_ids: set[str]) -> None:
    """The arm's history is the base's, event for event; otherwise an error naming the first differences."""
    if ids == base_ids:
        return
    missing, extra = sorted(base_ids - ids), sorted(ids - base_ids)
    raise ExperimentError(
        f"the history of {society} is not the base's: {len(ids):,} events before the fork against "
        f"{len(base_ids):,} in {base}; missing {len(missing):,} (first {', '.join(missing[:3]) or '-'}), "
        f"extra {len(extra):,} (first {', '.join(extra[:3]) or '-'})"
    )


def _write_result(settings: Settings, name: str, console: Console) -> tuple[Path, Path]:
    """``report.experiments.outcome.write_result`` into ``<state>/experiments/<name>/``; its two paths."""
    html, js = write_result(settings, name, settings.state_dir / "experiments" / name)
    console.print(f"result: {html.resolve()}\nnumbers: {js.resolve()}", highlight=False)
    return html, js
