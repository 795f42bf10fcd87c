"""The fidelity table reads a society's stored events into the same moments as its events in memory."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from stored_events import open_chdb, store_events

from molt_society.agents.behaviour import Population, load_behaviour
from molt_society.agents.offline import simulate
from molt_society.calibration.moments import MOMENTS, distance
from molt_society.calibration.observed import observe
from molt_society.report.fidelity import Reference, items, observed
from molt_society.report.model import Scalar, Table
from molt_society.report.warehouse_source import ClientWarehouse


def _behaviour():  # type: ignore[no-untyped-def]
    pop = Population(
        agents=300, hours=12.0, start="2026-01-28T00:00:00+00:00", tick_seconds=300.0, post_per_hour=0.1,
        post_sigma=0.5, comment_per_hour=0.6, comment_sigma=1.5, vote_per_comment=1.0, heartbeat_share=0.2,
        heartbeat_hours=2.0, heartbeat_skip=0.1, initial_share=0.5, growth_per_day=1.0, hourly=[1.0] * 24,
        new_share=0.5, post_lead_seconds=5.0, first_delay_seconds=5.0,
    )  # fmt: skip
    return load_behaviour().model_copy(update={"population": pop})


def test_stored_moments_equal_the_events_moments_and_rows_say_their_band(tmp_path: Path) -> None:
    start = datetime(2026, 1, 28, tzinfo=UTC)
    res = simulate(seed=3, agents=300, ticks=145, behaviour=_behaviour(), tick_seconds=300.0, start=start,
                   society="fid")  # fmt: skip
    in_memory = observe(res.events).result()
    client = open_chdb(str(tmp_path / "ch"))
    try:
        store_events(client, res.events)
        wh = ClientWarehouse(client)
        stored = observed(wh, "fid").result()
        for key, value in in_memory.items():
            if value is None:
                assert stored[key] is None, key
            else:
                assert stored[key] == pytest.approx(value, rel=1e-9, abs=1e-6), key
        real = {k: (v * 1.1 if v is not None else None) for k, v in in_memory.items()}
        out = items(wh, "fid", Reference("a test", real))
    finally:
        client.close()
    table = next(i for i in out if isinstance(i, Table))
    assert len(table.rows) == len(MOMENTS)
    inside = 0
    for m, row in zip(MOMENTS, table.rows, strict=True):
        d = distance(m.key, in_memory[m.key], real[m.key])
        assert row[5] == ("-" if d is None else ("in band" if d <= 1 else "outside")), m.key
        inside += d is not None and d <= 1
    count = next(i for i in out if isinstance(i, Scalar) and i.key == "fidelity.in_band")
    assert count.value == inside
    assert 0 < inside < len(MOMENTS)  # 10% off: inside some bands, outside others
