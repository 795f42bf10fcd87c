"""The read-only access layer on chDB with no sink: every attack refused, the record unchanged."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from security_cases import ATTACKS, FINGERPRINT_SQL, TABLES_SQL, WRITTEN
from stored_events import store_events

from molt_society.runtime.settings import Settings
from molt_society.warehouse import QueryError, ReadLimits, Refused, SessionReader, open_reader
from molt_society.warehouse.client import connect
from molt_society.warehouse.guard import ReadOnlySession
from molt_society.warehouse.schema import ensure_schema


def _events() -> list:  # type: ignore[type-arg]
    from datetime import UTC, datetime

    from molt_society.agents.behaviour import load_behaviour
    from molt_society.agents.offline import simulate

    return simulate(
        seed=3, agents=60, ticks=30, behaviour=load_behaviour(), start=datetime(2026, 1, 28, tzinfo=UTC)
    ).events


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"chdb://{tmp_path_factory.mktemp('wh') / 'ch'}"
    client = connect(url)
    ensure_schema(client)
    store_events(client, _events())
    client.close()
    return url


def test_every_attack_is_refused_and_the_record_is_unchanged(stored: str) -> None:
    for path in WRITTEN:
        path.unlink(missing_ok=True)
    reader = SessionReader(stored, limits=ReadLimits(max_execution_time=10))
    try:
        before = reader.query(FINGERPRINT_SQL).rows
        tables = reader.query(TABLES_SQL).rows
        assert ["events"] in tables
        assert dict((r[0], r[1]) for r in before)["events"] > 0  # there is a record to protect
        outcomes = {}
        for name, sql in ATTACKS.items():
            with pytest.raises(QueryError) as err:
                reader.query(sql)
            outcomes[name] = (type(err.value).__name__, str(err.value))
            assert str(err.value), name
        after = reader.query(FINGERPRINT_SQL).rows
        assert reader.query(TABLES_SQL).rows == tables
    finally:
        reader.close()
    assert after == before
    assert [p for p in WRITTEN if p.exists()] == []
    # The refusals that ClickHouse's protections decide name what they refused.
    assert "DROP" in outcomes["drop"][1]
    assert outcomes["drop"][0] == "Refused"
    assert "file()" in outcomes["file_passwd"][1]
    assert outcomes["file_passwd"][0] == "Refused"
    assert "url()" in outcomes["url"][1]
    assert "INTO OUTFILE" in outcomes["into_outfile"][1]
    assert "SET" in outcomes["set"][1]
    assert "cannot change settings" in outcomes["settings_clause"][1]
    assert "Multi-statements" in outcomes["multi_statement"][1]
    assert "KILL" in outcomes["kill"][1]
    # what read-only mode lets through is refused by the syntax tree, naming what reached out
    for name in ("file_scalar_environ", "file_scalar_in_lambda", "file_scalar_in_where"):
        assert outcomes[name][0] == "Refused", outcomes[name]
        assert "file()" in outcomes[name][1], outcomes[name]
    for name in ("system_processes", "system_in_subquery", "in_system_table", "information_schema"):
        assert outcomes[name][0] == "Refused", outcomes[name]
        assert "not one of the society's tables" in outcomes[name][1], outcomes[name]
    assert "merge()" in outcomes["merge_system"][1]
    assert "TOO_MANY_BYTES" in outcomes["huge_result"][1] or "Limit for result" in outcomes["huge_result"][1]


def test_the_society_reader_can_still_use_what_it_needs(stored: str) -> None:
    """Refusing other databases leaves the society's tables, CTEs, qualified names of its own database,
    generators, aliases with dots and SHOW TABLES / DESCRIBE / EXISTS of its own tables alone."""
    reader = SessionReader(stored, limits=ReadLimits(max_execution_time=10))
    try:
        db = reader.query("SELECT currentDatabase()").rows[0][0]
        n = reader.query("SELECT count() FROM events").rows[0][0]
        assert reader.query(f"SELECT count() FROM {db}.events").rows == [[n]]
        assert reader.query("WITH t AS (SELECT type FROM events) SELECT count() FROM t").rows == [[n]]
        assert reader.query("SELECT count() FROM events AS e WHERE e.type != ''").rows == [[n]]
        assert reader.query("SELECT sum(number) FROM numbers(4)").rows == [[6]]
        assert reader.query("SELECT number FROM system.numbers LIMIT 3").rows == [[0], [1], [2]]
        assert reader.query("SELECT * FROM system.one").rows == [[0]]
        assert reader.query(f"EXISTS TABLE {db}.events").rows == [[1]]
        assert reader.query("SHOW TABLES LIKE 'event%'").rows
        assert reader.query(f"SHOW CREATE TABLE {db}.events").rows
        assert reader.query("SELECT upper(dim) FROM metrics LIMIT 1").rows is not None
        # the schema's parameterised view by its bare name; every adoption at share 1,000,000
        whole = reader.query("SELECT count() FROM cascade_adoptions").rows
        assert (
            reader.query("SELECT count() FROM cascade_adoptions_sample(meme_share = 1000000)").rows == whole
        )
        assert reader.query("SELECT count() FROM clone_pairs_at(min_jaccard = 0)").rows == (
            reader.query("SELECT count() FROM clone_pairs").rows
        )
        with pytest.raises(Refused, match="table function"):
            reader.query("SELECT count() FROM system.cascade_adoptions_sample(meme_share = 1)")
        with pytest.raises(Refused, match="table function"):
            reader.query("SELECT * FROM merge('system', 'processes')")
    finally:
        reader.close()


def test_the_reports_limits_join_and_group_on_disk_beyond_their_memory(stored: str) -> None:
    """With spill_bytes a JOIN whose right side outgrows it still answers (grace hash, on disk) and gives
    what the unbounded session gives."""
    sql = (
        "SELECT count(), sum(a.number + b.n) FROM numbers(300000) AS a "
        "INNER JOIN (SELECT number AS n, repeat('x', 200) AS pad FROM numbers(300000)) AS b ON a.number = b.n"
    )
    free = SessionReader(stored, limits=ReadLimits(max_execution_time=60, max_memory_usage=1 << 31))
    tight = SessionReader(
        stored,
        limits=ReadLimits(max_execution_time=60, max_memory_usage=48 << 20, spill_bytes=8 << 20),
    )
    try:
        want = free.query(sql).rows
        assert want[0][0] == 300_000
        assert tight.query(sql).rows == want
    finally:
        free.close()
        tight.close()


def test_reads_work_and_return_a_dataframe(stored: str, tmp_path: Path) -> None:
    settings = Settings(clickhouse_url=stored, state_dir=tmp_path / "state")
    reader = open_reader(settings)
    try:
        assert isinstance(reader, SessionReader)
        res = reader.query("SELECT type, count() AS n FROM events GROUP BY type ORDER BY type")
        df = reader.df("SELECT type, count() AS n FROM events GROUP BY type ORDER BY type")
        assert list(df.columns) == ["type", "n"]
        assert df.values.tolist() == res.rows
        # the views of the schema are readable, and so are SHOW, DESCRIBE, EXPLAIN, WITH
        assert reader.query("SELECT count() FROM threads").rows[0][0] > 0
        assert ["events"] in reader.query("SHOW TABLES").rows
        assert reader.query("DESCRIBE TABLE events").rows[0][0] == "event_id"
        assert reader.query("WITH 2 AS x SELECT x * 21").rows == [[42]]
        assert reader.query("EXPLAIN SELECT 1").rows
    finally:
        reader.close()


def test_limits_stop_a_runaway_query(stored: str) -> None:
    reader = SessionReader(stored, limits=ReadLimits(max_execution_time=1, max_result_rows=1000))
    try:
        with pytest.raises(QueryError, match=r"TIMEOUT_EXCEEDED|Timeout exceeded"):
            reader.query("SELECT sum(number) FROM system.numbers")
        with pytest.raises(QueryError, match=r"TOO_MANY_ROWS|Limit for result"):
            reader.query("SELECT number FROM system.numbers LIMIT 5000")
    finally:
        reader.close()


def test_a_reader_session_never_changes_the_writer(stored: str) -> None:
    """chDB keeps SET per handle: the read-only session of one handle leaves another handle writable,
    even while a slow read runs on another thread."""
    writer = connect(stored)
    reader = ReadOnlySession(connect(stored), embedded=True, limits=ReadLimits(max_execution_time=2))
    try:
        with pytest.raises(Refused):
            reader.query("SET max_threads = 1")
        failures: list[str] = []

        def slow() -> None:
            try:
                reader.query("SELECT sum(number) FROM system.numbers")
            except QueryError as exc:
                failures.append(str(exc))

        thread = threading.Thread(target=slow)
        thread.start()
        before = writer.query("SELECT count() FROM dead_letters").result_rows[0][0]
        writer.command(
            "INSERT INTO dead_letters (society, code, reason, value, _topic, _partition, _offset) "
            "VALUES ('x', 'c', 'r', 'v', 't', 0, 1)"
        )
        after = writer.query("SELECT count() FROM dead_letters").result_rows[0][0]
        settings = dict(
            writer.query(
                "SELECT name, value FROM system.settings WHERE name IN "
                "('readonly', 'max_threads', 'max_execution_time')"
            ).result_rows
        )
        thread.join()
    finally:
        reader.close()
        writer.close()
    assert after == before + 1
    assert settings["readonly"] == "0"
    assert settings["max_execution_time"] == "0"
    assert failures
    assert "imeout" in failures[0]


def test_a_read_stopped_mid_stream_leaves_nothing_for_the_next_one(stored: str) -> None:
    """chDB left the rest of a result stopped by ``max_result_bytes`` on the handle, and the next query
    got those rows instead of its own answer; the session clears the handle after a failed read."""
    reader = SessionReader(stored, limits=ReadLimits(max_execution_time=10, max_result_bytes=1 << 20))
    try:
        for _ in range(2):
            with pytest.raises(QueryError, match=r"TOO_MANY_ROWS_OR_BYTES|Limit for result"):
                reader.query("SELECT randomPrintableASCII(4000) FROM numbers(100000)")
            assert reader.query("SELECT 'mine'").rows == [["mine"]]
            assert reader.query("SELECT count() FROM events").rows[0][0] > 0
    finally:
        reader.close()
