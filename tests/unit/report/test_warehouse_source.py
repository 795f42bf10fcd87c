"""The report's own read-only session on a stopped society has the report's limits, not a user query's."""

from __future__ import annotations

from pathlib import Path

import pytest

from molt_society.report.warehouse_source import ClientWarehouse, report_limits
from molt_society.runtime.settings import Settings
from molt_society.warehouse import Refused
from molt_society.warehouse.guard import ReadLimits


def test_report_session_gets_the_report_limits(tmp_path: Path) -> None:
    wh = ClientWarehouse.open(f"chdb://{tmp_path / 'ch'}")
    try:
        assert wh.reader is not None
        user = ReadLimits()
        assert wh.reader.limits.max_memory_usage > user.max_memory_usage
        assert wh.reader.limits.max_execution_time > user.max_execution_time
        # still read-only: a write is refused by the session
        with pytest.raises(Refused):
            wh.reader.run("DROP TABLE events")
        assert wh.query("SELECT count() FROM events").rows == [[0]]
    finally:
        wh.close()


def test_report_limits_follow_the_settings() -> None:
    s = Settings(report_query_timeout_seconds=120, report_query_max_memory_bytes=3 << 30)
    limits = report_limits(s)
    assert (limits.max_execution_time, limits.max_memory_usage) == (120, 3 << 30)


def test_the_report_session_spills_large_aggregations_to_disk(tmp_path: Path) -> None:
    """A whole-history GROUP BY of a large society goes on in temporary files past the setting (at 1.35M
    events the cascades' aggregation needed more than 8 GiB without), as ClickHouse itself reports; an
    outside query's session does not."""
    wh = ClientWarehouse.open(f"chdb://{tmp_path / 'ch'}")
    try:
        got = wh.query(
            "SELECT getSetting('max_bytes_before_external_group_by'), "
            "getSetting('max_bytes_before_external_sort'), getSetting('max_result_rows')"
        ).rows[0]
        spill = Settings().report_query_spill_bytes
        assert [int(v) for v in got] == [spill, spill, 1 << 40]
    finally:
        wh.close()
    assert "max_bytes_before_external_group_by" not in ReadLimits().settings()
