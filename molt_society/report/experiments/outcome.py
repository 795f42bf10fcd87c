"""The result of a controlled experiment: per metric, every arm's mean over seeds and its effect vs control.

``build_result(source, experiment)`` reads the experiment's finished societies (``experiments FINAL``,
status ``done``), their post-fork streaming metrics and the report's diagnostics (``report.experiments.data``)
and computes, per metric, with ``report.effects``:

- per arm: the mean across seeds with its 95% CI;
- per treated arm: the difference from the control with its 95% CI (paired by seed when the arms share
  their seeds, ``common_seeds``: common random numbers; else the arms are independent replications),
  Hedges' g, and a family-wise interval:
  Bonferroni over m = (metrics) x (treated arms) comparisons, i.e. the same bootstrap at confidence
  1 - 0.05/m. ``significant`` is "the family-wise interval excludes 0"; ``significant_unadjusted`` is "the
  95% interval excludes 0" (an A/A experiment shows about 5% of those by chance);
- for streaming metrics, the bands of a plot: per arm and per window since the fork, the mean across seeds
  and its 95% CI (``SERIES_RESAMPLES`` resamples per window).

The document is JSON-able and stable: floats rounded to 12 significant digits, keys sorted by
``result_json``, no clock: the same data gives byte-identical JSON. ``write_result`` writes
``result.json`` and ``result.html`` (``report.experiments.page``) into a directory.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from molt_society.report.effects import (
    CONFIDENCE,
    RESAMPLES,
    MetricEffects,
    metric_effects,
    series_effects,
)
from molt_society.report.experiments.data import (
    DIAGNOSTICS,
    Run,
    SocietyMetrics,
    Source,
    fork_elite,
    load_diagnostics,
    load_metrics,
    load_runs,
    series_offsets,
)
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings

log = get_logger(__name__)

SERIES_RESAMPLES = 2_000
"""Resamples per window of a plot's bands (the tables use ``RESAMPLES``)."""
SIGNIFICANT_DIGITS = 12
RESULT_HTML = "result.html"
RESULT_JSON = "result.json"
AA_NOTE = (
    "An A/A experiment (arms that differ by nothing) shows about 5% of the unadjusted 95% CIs excluding 0 "
    "by chance; with many metrics some always do. 'significant' therefore uses the family-wise interval."
)


class NoResult(ValueError):
    """The experiment has nothing to compare: no finished society, or no single control arm."""


def stable(value: Any) -> Any:
    """``value`` as JSON values that print the same every time: floats to ``SIGNIFICANT_DIGITS``
    significant digits (NaN as null, infinities as "inf"/"-inf"), tuples as lists, keys as strings."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        rounded = float(f"{value:.{SIGNIFICANT_DIGITS}g}")
        return 0.0 if rounded == 0 else rounded
    if isinstance(value, Mapping):
        return {str(k): stable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [stable(v) for v in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def result_json(doc: Mapping[str, Any]) -> bytes:
    """The result as JSON bytes: sorted keys, stable floats, UTF-8."""
    text = json.dumps(stable(doc), sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def _arms(runs: Sequence[Run]) -> tuple[str, list[str]]:
    """The control arm and all arms, control first then by name."""
    controls = sorted({r.arm for r in runs if r.control})
    if len(controls) != 1:
        raise NoResult(f"the finished societies name {len(controls)} control arms ({', '.join(controls)})")
    control = controls[0]
    return control, [control, *sorted({r.arm for r in runs} - {control})]


def _effects_entry(
    key: str, source: str, definition: str, m95: MetricEffects, mfw: MetricEffects
) -> dict[str, Any]:
    """One metric's table: arms (mean, CI) and effects with both intervals."""
    effects = []
    for e95, efw in zip(m95.effects, mfw.effects, strict=True):
        entry = e95.to_dict()
        entry["significant_unadjusted"] = e95.significant
        entry["significant"] = efw.significant
        entry["familywise_ci_low"] = efw.ci_low
        entry["familywise_ci_high"] = efw.ci_high
        effects.append(entry)
    return {
        "key": key,
        "source": source,
        "definition": definition,
        "arms": [a.to_dict() for a in m95.arms],
        "effects": effects,
    }


def common_seeds(runs: Sequence[Run]) -> bool:
    """Whether the arms share their seeds (common random numbers): every arm ran the same seeds, each with
    the same simulation seed as the control's (the spec's ``common_seeds``), so differences pair by seed."""
    by_arm: dict[str, dict[int, int]] = {}
    for r in runs:
        by_arm.setdefault(r.arm, {})[r.seed] = r.run_seed
    return len({tuple(sorted(seeds.items())) for seeds in by_arm.values()}) == 1


def _values(
    runs: Sequence[Run], arms: Sequence[str], of: Mapping[str, float | None]
) -> dict[str, dict[int, float | None]]:
    """``values[arm][seed]`` from a value per society (arms in ``arms`` order)."""
    out: dict[str, dict[int, float | None]] = {arm: {} for arm in arms}
    for r in runs:
        out[r.arm][r.seed] = of.get(r.society)
    return out


def _streaming_keys(metrics: Mapping[str, SocietyMetrics]) -> list[str]:
    return sorted({k for m in metrics.values() for k in m.values})


STREAM_SOURCE = (
    "streaming metric: mean over the society's windows that end after the fork (the window holding the fork "
    "whole: its part before the fork is the base's, the same in every arm)"
)
EVENTS_SOURCE = "events after the fork (SQL)"


def build_result(
    source: Source,
    experiment: str,
    *,
    seed: int = 0,
    resamples: int = RESAMPLES,
    series_resamples: int = SERIES_RESAMPLES,
) -> dict[str, Any]:
    """The experiment's result as a JSON-able dict, exactly as ``result_json`` writes it (``stable``: seeds
    as string keys); raises ``NoResult`` when it has no finished society or not exactly one control arm."""
    began = time.perf_counter()
    runs = load_runs(source, experiment)
    if not runs:
        raise NoResult(f"the experiment {experiment!r} has no finished society (status 'done')")
    control, arms = _arms(runs)
    metrics = {r.society: load_metrics(source, r.society, r.fork_at_us) for r in runs}
    first = min(runs, key=lambda r: (r.arm, r.seed))  # every run shares the base and the fork point
    elite = fork_elite(source, first.base_society, first.fork_at_us)
    diags = {r.society: load_diagnostics(source, r.society, r.fork_at_us, elite) for r in runs}
    keys = _streaming_keys(metrics)
    treated = len(arms) - 1
    m = max(1, (len(DIAGNOSTICS) + len(keys)) * treated)
    fw = 1.0 - (1.0 - CONFIDENCE) / m
    paired = common_seeds(runs)
    opts: dict[str, Any] = {"seed": seed, "resamples": resamples, "paired": paired}
    tables: list[dict[str, Any]] = []
    for key, definition in DIAGNOSTICS.items():
        values = _values(runs, arms, {s: d[key] for s, d in diags.items()})
        m95 = metric_effects(values, control, metric=key, **opts)
        mfw = metric_effects(values, control, metric=key, confidence=fw, **opts)
        entry = _effects_entry(key, EVENTS_SOURCE, definition, m95, mfw)
        entry["values"] = values
        tables.append(entry)
    offsets = series_offsets(list(metrics.values()))
    for key in keys:
        values = _values(runs, arms, {s: sm.mean(key) for s, sm in metrics.items()})
        m95 = metric_effects(values, control, metric=key, **opts)
        mfw = metric_effects(values, control, metric=key, confidence=fw, **opts)
        entry = _effects_entry(key, STREAM_SOURCE, "", m95, mfw)
        entry["values"] = values
        entry["series"] = _series(runs, arms, control, metrics, key, offsets, seed, series_resamples)
        tables.append(entry)
    log.info(
        "experiment.result",
        experiment=experiment,
        societies=len(runs),
        metrics=len(tables),
        seconds=round(time.perf_counter() - began, 2),
    )
    doc = {
        "experiment": experiment,
        "control": control,
        "arms": [_arm(a, a == control, runs) for a in arms],
        "societies": [_society(r, metrics[r.society]) for r in runs],
        "base": _base(runs),
        "correction": {
            "method": "bonferroni",
            "metrics": len(tables),
            "treated_arms": treated,
            "m": m,
            "confidence": CONFIDENCE,
            "familywise_confidence": fw,
            "note": AA_NOTE,
        },
        "bootstrap": {
            "seed": seed,
            "resamples": resamples,
            "series_resamples": series_resamples,
            "method": "expanded percentile bootstrap over seeds (report.effects)",
            "paired": paired,
            "design": (
                "common random numbers: every arm ran the same seeds, differences are per seed (paired)"
                if paired
                else "independent replications: each arm ran its own seeds, arms resampled independently"
            ),
        },
        "metrics": tables,
    }
    stable_doc: dict[str, Any] = stable(doc)
    return stable_doc


def _series(
    runs: Sequence[Run],
    arms: Sequence[str],
    control: str,
    metrics: Mapping[str, SocietyMetrics],
    key: str,
    offsets: Sequence[int],
    seed: int,
    resamples: int,
) -> dict[str, Any]:
    """Per arm, mean and 95% CI across seeds of the metric in each window since the fork."""
    values: dict[str, dict[int, list[float | None]]] = {arm: {} for arm in arms}
    for r in runs:
        sm = metrics[r.society]
        values[r.arm][r.seed] = [sm.value_at(key, o) for o in offsets]
    seconds = [o / 1e6 for o in offsets]
    fx = series_effects(values, control, seconds, metric=key, seed=seed, resamples=resamples)
    return {"offsets_s": seconds, "bands": fx.bands()}


def _arm(arm: str, is_control: bool, runs: Sequence[Run]) -> dict[str, Any]:
    mine = [r for r in runs if r.arm == arm]
    return {
        "arm": arm,
        "control": is_control,
        "seeds": [r.seed for r in mine],
        "societies": [r.society for r in mine],
    }


def _society(r: Run, sm: SocietyMetrics) -> dict[str, Any]:
    return {
        "society": r.society,
        "arm": r.arm,
        "seed": r.seed,
        "run_seed": r.run_seed,
        "windows": len(sm.windows),
        "history_events": r.history_events,
        "history_verified": r.history_verified,
    }  # no wall time: the same spec and seeds give the same bytes (it is in the experiments table)


def _base(runs: Sequence[Run]) -> dict[str, Any]:
    """What the societies share (a list where they differ, which they should not)."""

    def one(values: set[Any]) -> Any:
        ordered = sorted(values)
        return ordered[0] if len(ordered) == 1 else ordered

    return {
        "society": one({r.base_society for r in runs}),
        "fork_tick": one({r.fork_tick for r in runs}),
        "fork_at": one({r.fork_at for r in runs}),
        "ticks": one({r.ticks for r in runs}),
        "spec_sha256": one({r.spec_sha256 for r in runs}),
    }


def result_dir(settings: Settings, experiment: str) -> Path:
    """Where an experiment's result is written and the dashboard looks for it:
    ``<state_dir>/experiments/<experiment>/`` (``experiment`` must be a valid name: ``check_name``)."""
    return settings.state_dir / "experiments" / check_name(experiment)


_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,47}$")


def check_name(experiment: str) -> str:
    """``experiment`` if it is a name a spec allows (``schemas.experiment``: 1 to 48 letters, digits, '_'
    or '-', not starting with '-'), so it is safe as a path component; else ``ValueError``."""
    if not _NAME.fullmatch(experiment):
        raise ValueError(f"not an experiment name: {experiment!r}")
    return experiment


def write_result(settings: Settings, experiment: str, out_dir: Path) -> tuple[Path, Path]:
    """Build the result of ``experiment`` from the ClickHouse of ``settings`` (``warehouse.open_reader``:
    the running sink, else a read-only session of this process) and write ``result.html`` and
    ``result.json`` into ``out_dir``; returns (HTML, JSON)."""
    from molt_society.report.experiments.page import render_result_html
    from molt_society.warehouse import open_reader

    reader = open_reader(settings)
    try:
        doc = build_result(reader, experiment)
    finally:
        reader.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, json_path = out_dir / RESULT_HTML, out_dir / RESULT_JSON
    json_path.write_bytes(result_json(doc))
    html_path.write_text(render_result_html(doc), encoding="utf-8")
    return html_path, json_path
