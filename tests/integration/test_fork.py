"""Fork: the new society's history before the fork instant is the old one's; after it, agents continue."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from stack_helpers import make_settings, run_ticks, running_stack, sql

from molt_society.society.fork import run_fork

pytestmark = pytest.mark.integration

EVENTS_SQL = (
    "SELECT toString(event_id), type, actor, toUnixTimestamp64Micro(occurred_at), causation_id, body "
    "FROM events FINAL WHERE society = '{s}'"
)


def test_fork_copies_history_then_continues_live(broker: str, tmp_path: Path, society_name: str):
    settings = make_settings(broker, tmp_path, agents=250)
    with running_stack(settings, society_name) as stack:
        run_ticks(stack, 30)
        old = {tuple(r) for r in sql(stack, EVENTS_SQL.format(s=society_name))}
    origin = datetime.fromisoformat(settings.sim_start)
    at = origin + timedelta(seconds=settings.tick_seconds * 17.5)  # rounded up to the tick 18 boundary
    fork = society_name + "f"
    point, copied = run_fork(
        settings, source=society_name, target=fork, at=at, seed=None, ticks=12, duration=None
    )
    assert point.tick == 18
    boundary = point.at_us
    with running_stack(settings, fork + "q", agents=False) as stack:  # any sink serves the shared ClickHouse
        new = {tuple(r) for r in sql(stack, EVENTS_SQL.format(s=fork))}
    old_before = {e for e in old if e[3] < boundary}
    new_before = {e for e in new if e[3] < boundary}
    new_after = {e for e in new if e[3] >= boundary}
    assert copied == len(old_before) > 0
    assert new_before == old_before  # the history is the old society's, event for event
    assert new_after  # and the society went on
    assert max(e[3] for e in new_after) >= boundary + 11 * settings.tick_seconds * 1e6
    # same seed and the same rebuilt feeds: the fork continues exactly as the old society did
    old_next = {e for e in old if boundary <= e[3] < boundary + 12 * settings.tick_seconds * 1e6}
    assert new_after == old_next
