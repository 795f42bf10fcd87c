"""Non-positive counts and durations are refused by the CLI with one line naming the option, before
anything starts (issue 29: `society run --ticks -5` ran forever, `--agents 0` crash-looped a worker)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from molt_society.society.cli import main


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["run", "--ticks", "-5"], "--ticks"),
        (["run", "--ticks", "0"], "--ticks"),
        (["run", "--agents", "0"], "--agents"),
        (["run", "--duration", "0"], "--duration"),
        (["run", "--tick-seconds", "-1"], "--tick-seconds"),
        (["run", "--stream-workers", "0"], "--stream-workers"),
        (["run", "--llm-agents", "-1"], "--llm-agents"),
        (["clock", "--society", "s", "--ticks", "0"], "--ticks"),
        (["calibrate", "--agents", "0"], "--agents"),
    ],
)
def test_a_non_positive_value_is_one_line_naming_the_option(args: list[str], option: str) -> None:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2
    assert f"Invalid value for '{option}'" in res.output
    assert "Traceback" not in res.output
