"""The base of an experiment and the run of one arm x seed on the local stack.

``resolve_base`` turns the spec's base into a society and a fork point:

- ``base = { society, at }``: the society must have a recorded configuration (``society.fork``); a tick
  ``at`` is the instant ``sim_start + at * tick_seconds``, a time is rounded up to a tick boundary; the
  point may not lie past the society's recorded end.
- ``base = { replay }``: the archive or dump (a path relative to the spec's directory, or absolute) is
  replayed once into the society ``<experiment>.base`` (``society.replay_run``), which the experiment then
  forks at its end. A replay has no agents of its own, so its recorded configuration is the experiment's
  settings (seed, agents, shards, tick length) with ``sim_start`` at the history's first window and
  ``window_seconds`` the archive's: the forks continue the replayed history with a synthetic roster of
  that many agents, whose ids are not the archive's authors; they never registered in the history
  (registration is tick 0's genesis), so they appear in the arms from their first action on.

``run_pair`` is ``society.fork.run_fork`` with a progress callback and the arm's settings (seed, plan).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from molt_society.runtime.brokers import Broker, start_broker
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.schemas.control import from_us, to_us
from molt_society.schemas.experiment import ExperimentSpec, ReplayBase
from molt_society.society.drive import drive_clock, last_window_start, wait_drained
from molt_society.society.fork import (
    ForkPoint,
    config_path,
    copy_history,
    fork_point,
    fork_settings,
    save_config,
)
from molt_society.society.stack import LocalStack

if TYPE_CHECKING:
    from molt_society.replay.source import Source

log = get_logger(__name__)


class ExperimentError(RuntimeError):
    """An experiment that cannot go on; the message is one line that says why."""


@dataclass(frozen=True)
class Base:
    """The society the arms fork, its settings (recorded configuration) and the fork point."""

    society: str
    settings: Settings
    point: ForkPoint


@dataclass(frozen=True)
class PairJob:
    """One arm x seed to run: its society, settings (seed and plan set), base and length."""

    society: str
    settings: Settings
    base: Base
    ticks: int
    extra: dict[str, Any]


def resolve_base(settings: Settings, spec: ExperimentSpec, spec_path: Path, console: Console) -> Base:
    """The base society and fork point of ``spec`` (see module docstring)."""
    if isinstance(spec.base, ReplayBase):
        society = replay_base(settings, spec, spec.base, spec_path, console)
        at: datetime | int | None = None
    else:
        society, at = spec.base.society, spec.base.at
    try:
        base_settings, cfg = fork_settings(settings, society, None)
    except FileNotFoundError:
        raise ExperimentError(
            f"base society {society!r} has no recorded configuration ({config_path(settings, society)}): "
            "run it with `society run` first"
        ) from None
    except ValueError as exc:
        raise ExperimentError(str(exc)) from None
    return Base(society, base_settings, _point(base_settings, society, at, cfg.get("end_us")))


def _point(s: Settings, society: str, at: datetime | int | None, end_us: int | None) -> ForkPoint:
    when: datetime | None
    if isinstance(at, int):
        when = datetime.fromisoformat(s.sim_start) + timedelta(seconds=at * s.tick_seconds)
    else:
        when = at
    try:
        # the end is checked below, with the experiment's own words
        point = fork_point(s, when, end_us if when is None else None)
    except ValueError as exc:
        raise ExperimentError(f"base society {society!r}: {exc}") from None
    if end_us is not None and point.at_us > end_us:
        origin_us = to_us(datetime.fromisoformat(s.sim_start))
        end_tick = (end_us - origin_us) // int(s.tick_seconds * 1_000_000)
        raise ExperimentError(
            f"the fork point (tick {point.tick}, {from_us(point.at_us).isoformat()}) is past the end of base "
            f"society {society!r} (tick {end_tick}, {from_us(end_us).isoformat()})"
        )
    return point


def replay_base(
    settings: Settings, spec: ExperimentSpec, base: ReplayBase, spec_path: Path, console: Console
) -> str:
    """Replay ``base.replay`` into ``<experiment>.base`` unless done before; the society's name."""
    from molt_society.replay.source import load_source

    society = f"{spec.name}.base"
    path = Path(base.replay).expanduser()
    if not path.is_absolute():
        path = spec_path.resolve().parent / path
    done = config_path(settings, society)
    if done.exists():
        console.print(f"base {society}: replayed before from {path.name}; forking it at its end")
        return society
    if not path.exists():
        raise ExperimentError(f"the base's replay source {path} does not exist")
    with load_source(path) as source:
        return _replay_into(settings, source, society, path, console)


def _replay_into(settings: Settings, source: Source, society: str, path: Path, console: Console) -> str:
    if not source.events:
        raise ExperimentError(f"the base's replay source {path} has no events")
    from molt_society.society.experiments.tables import Store  # a partial replay of an earlier attempt
    from molt_society.society.replay_run import replay_source

    with Store(settings.clickhouse_url) as store:
        store.purge(society)
    shutil.rmtree(settings.state_dir / society, ignore_errors=True)
    console.print(f"replaying {path} into the base society {society} ...")
    stats = replay_source(
        settings, source, society=society, speed=None, console=console, source_name=path.name
    )
    header = source.header
    window_s = header.window_seconds if header and header.window_seconds else settings.window_seconds
    window_us = int(window_s * 1_000_000)
    if header is not None and header.origin_us is not None:
        origin_us = header.origin_us
    else:  # the publisher's own origin: the first event's window
        origin_us = stats.first_us if stats.first_us is not None else _first_us(source.events)
        origin_us -= origin_us % window_us
    last_us = stats.last_us if stats.last_us is not None else origin_us
    s = settings.model_copy(update={"sim_start": from_us(origin_us).isoformat(), "window_seconds": window_s})
    save_config(s, society, mode="sim", end_us=last_us + 1, replayed_from=str(path))
    return society


def _first_us(events: Iterable[dict[str, Any]]) -> int:
    ev = next(iter(events))
    return to_us(datetime.fromisoformat(str(ev["occurred_at"])))


def run_pair(job: PairJob, on_tick: Callable[[int], None]) -> int:
    """Fork the base into ``job.society`` and run it ``job.ticks`` ticks; the history events copied."""
    s, point, base = job.settings, job.base.point, job.base.society
    stack = LocalStack(s, job.society, stream_workers=s.stream_workers, agent_workers=s.agent_workers)
    try:
        stack.start()
        save_config(s, job.society, forked_from=base, fork_at_us=point.at_us, **job.extra)
        stack.sink_url()
        copied = asyncio.run(copy_history(s, stack.bootstrap, base, job.society, point))

        async def go() -> None:
            _, end_us = await drive_clock(
                s,
                stack.bootstrap,
                job.society,
                ticks=point.tick + job.ticks,
                duration=None,
                start_tick=point.tick,
                on_tick=on_tick,
            )
            save_config(s, job.society, end_us=end_us, end_tick=point.tick + job.ticks)
            await wait_drained(job.society, last_window_start(s, end_us), stack)

        asyncio.run(go())
        return copied
    finally:
        stack.stop()


DROP_TOPICS_S = 30.0


class StackPairs:
    """The experiment's default pair runner: ``run_pair`` on the local stack, with one local broker for
    every pair of the run when none is configured (``KAFKA_BOOTSTRAP``), started with the first pair
    that runs, in ``<state>/.experiment-brokers/<experiment>``, and stopped, its log removed, by
    ``close``. A broker per pair cost every pair about 5 s and 9 CPU-seconds (Apache Kafka's start and
    stop). A pair's topics are deleted from it once the pair is stored; a rerun starts a new broker and
    resumes from ClickHouse as before. Not supervised, as a pair's own broker was not: a broker that dies
    fails the pair, and the rerun resumes it."""

    def __init__(self, settings: Settings, experiment: str) -> None:
        self.settings, self.experiment = settings, experiment
        self.broker: Broker | None = None
        self.run_dir = settings.state_dir / ".experiment-brokers" / experiment

    def __call__(self, job: PairJob, on_tick: Callable[[int], None]) -> int:
        if job.settings.kafka_bootstrap:
            return run_pair(job, on_tick)
        if self.broker is not None and (code := self.broker.exited()) is not None:
            log.warning(
                "experiment.broker_lost",
                experiment=self.experiment,
                pid=self.broker.pid,
                exit_status=code,
                action="starting another for the next pair (it runs from ClickHouse's history)",
            )
            self.broker = None
        if self.broker is None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.broker = start_broker(self.settings, self.run_dir)
        bootstrap = self.broker.bootstrap
        s = job.settings.model_copy(update={"kafka_bootstrap": bootstrap})
        copied = run_pair(dataclasses.replace(job, settings=s), on_tick)
        try:  # the pair is stored: freeing its topics is best effort and never fails it
            asyncio.run(asyncio.wait_for(drop_topics(bootstrap, job.society), DROP_TOPICS_S))
        except Exception as exc:
            log.warning("experiment.topics_kept", society=job.society, error=repr(exc))
        return copied

    def close(self) -> None:
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
            shutil.rmtree(self.run_dir, ignore_errors=True)


async def drop_topics(bootstrap: str, society: str) -> None:
    """Delete a society's topics on the broker at ``bootstrap`` (best effort)."""
    from molt_society.runtime import kafka
    from molt_society.schemas.topics import Role, topic_name

    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        names = [topic_name(society, r) for r in Role if topic_name(society, r) in existing]
        if names:
            with contextlib.suppress(Exception):
                await admin.delete_topics(names)
    finally:
        await admin.close()
