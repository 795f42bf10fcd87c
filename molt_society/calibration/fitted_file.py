"""The fitted behaviour file: the parameters, the text model beside it, and the fit's record.

``F.toml`` is an ordinary behaviour file (``agents.behaviour``) with a ``[population]`` section, a
``[text]`` section naming the text model (``F.text.npz``, beside it) and a ``[fit]`` record: the dump, its
period and population, and for every moment the dump's value, the fitted society's, the distance and the
band, so a report or a reader can tell how close the fit came without running anything.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import tomli_w

from molt_society.agents.behaviour import Behaviour, TextSource
from molt_society.calibration.dump import Dump
from molt_society.calibration.fit import FitResult
from molt_society.calibration.moments import MOMENTS, distance


def moment_rows(real: dict[str, float | None], sim: dict[str, float | None]) -> list[dict[str, Any]]:
    """One row per moment: key, label, real, simulated, distance, band, in band, core."""
    rows = []
    for m in MOMENTS:
        r, s = real.get(m.key), sim.get(m.key)
        d = distance(m.key, s, r)
        rows.append(
            {
                "key": m.key,
                "label": m.label,
                "real": _num(r),
                "simulated": _num(s),
                "distance": _num(d),
                "band": m.band.describe(),
                "in_band": d is not None and d <= 1.0,
                "core": m.core,
            }
        )
    return rows


def _num(v: float | None) -> float | str:
    return "nan" if v is None or not math.isfinite(v) else round(float(v), 6)


def fit_record(dump: Dump, result: FitResult) -> dict[str, Any]:
    return {
        "dump": str(dump.path.resolve()),
        "start": dump.start.isoformat(),
        "hours": dump.hours,
        "agents": dump.agents,
        "posts": dump.posts,
        "comments": dump.comments,
        "seconds": round(result.seconds, 1),
        "evaluations": result.evaluations,
        "totals_simulated": result.totals_simulated,
        "moments": moment_rows(result.real, result.simulated),
    }


def write_fitted(path: Path, behaviour: Behaviour, record: dict[str, Any], text_file: Path | None) -> None:
    """Write ``behaviour`` with its text model's name and the fit's record as TOML at ``path``."""
    b = behaviour
    if text_file is not None:
        b = b.model_copy(update={"text": TextSource(model=text_file.name)})
    doc = b.model_dump(mode="json", exclude={"source"}, exclude_none=True)
    doc["fit"] = record
    head = (
        "# Fitted by `society calibrate --fit` (molt_society.calibration): the MoltBook model's parameters,\n"
        "# the text model beside this file, and the fit's record ([fit]: every moment, dump vs fitted).\n"
        "# Run it with: society run --behaviour " + path.name + "\n"
    )
    path.write_text(head + tomli_w.dumps(doc))


def read_record(behaviour: Behaviour) -> list[dict[str, Any]]:
    """The moment rows a fitted file recorded (empty for a behaviour that was not fitted)."""
    fit = behaviour.fit or {}
    rows = fit.get("moments", [])
    return [r for r in rows if isinstance(r, dict)]
