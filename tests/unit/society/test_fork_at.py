"""``society run --from OLD --at X``: X is a tick number or a zoned ISO 8601 time; anything else is a
usage error of one line, not a traceback."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from molt_society.runtime.settings import Settings
from molt_society.schemas.control import to_us
from molt_society.society.cli import main
from molt_society.society.fork import fork_point


def test_a_tick_number_forks_at_the_start_of_that_tick() -> None:
    s = Settings(sim_start="2026-01-28T00:00:00+00:00", tick_seconds=300.0)
    point = fork_point(s, 150, end_us=None)
    assert point.tick == 150
    start = datetime(2026, 1, 28, tzinfo=UTC) + timedelta(seconds=150 * 300)
    assert point.at_us == int(start.timestamp() * 1_000_000)
    # the same tick given as its event time
    assert fork_point(s, start, end_us=None) == point
    assert fork_point(s, 0, end_us=None).tick == 1  # tick 0 is genesis: the first forkable tick is 1


def test_an_unreadable_time_is_one_line_and_exit_2() -> None:
    runner = CliRunner()
    for at in ("yesterday", "2026-13-01T00:00:00Z", "1.5"):
        res = runner.invoke(main, ["run", "--from", "nosuch", "--at", at, "--ticks", "1", "--no-dashboard"])
        assert res.exit_code == 2, (at, res.output)
        assert "is not an ISO 8601 time" in res.output, res.output
        assert "Traceback" not in res.output
    res = runner.invoke(main, ["run", "--from", "nosuch", "--at", "2026-01-28T00:00:00", "--ticks", "1"])
    assert res.exit_code == 2
    assert "has no time zone" in res.output


def test_a_bad_society_name_is_a_usage_error_before_anything_runs(tmp_path: object) -> None:
    runner = CliRunner()
    for bad in ("../x", "a/b", "x;rm", ".hidden", "", "x" * 200):
        for argv in (
            ["run", "--society", bad, "--ticks", "1", "--no-dashboard"],
            ["run", "--from", bad, "--ticks", "1", "--no-dashboard"],
            ["run", "--resume", bad, "--no-dashboard"],
            ["replay", "--society", bad, "nosuch.jsonl"],
            ["export", bad, "--out", "x.jsonl"],
            ["report", bad],
        ):
            res = runner.invoke(main, argv)
            assert res.exit_code == 2, (argv, res.output)
            assert "invalid society name" in res.output, (argv, res.output)
            assert "Traceback" not in res.output


def test_a_fork_after_the_old_society_s_end_is_a_usage_error() -> None:
    """``society run --from demo --at 200`` of a society that ran 30 ticks forked with 170 ticks that
    never ran; it is an error naming the end."""
    from molt_society.society.fork import ForkError

    s = Settings(tick_seconds=300.0)
    origin = to_us(datetime.fromisoformat(s.sim_start))
    end_us = origin + 30 * 300 * 1_000_000 - 1  # inside tick 29: the default fork is at tick 30
    assert fork_point(s, None, end_us).tick == 30
    assert fork_point(s, 30, end_us).tick == 30
    with pytest.raises(ForkError, match=r"--at 200 is after the old society's end \(tick 30"):
        fork_point(s, 200, end_us)
    with pytest.raises(ForkError, match="no recorded end"):
        fork_point(s, None, None)
