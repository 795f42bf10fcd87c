"""A sink's claim on the embedded chDB directory (``warehouse.claim``) and the readers that step aside."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from molt_society.dashboard.sources import ClickHouseSource
from molt_society.runtime.settings import Settings
from molt_society.warehouse import QueryError
from molt_society.warehouse.claim import claim_path, claimed_by, drop_claim, write_claim


def _claim_of(path: Path, pid: int) -> None:
    claim_path(path).write_text(f'{{"pid": {pid}, "society": "s"}}')


@pytest.fixture
def fake_sink() -> Iterator[subprocess.Popen[bytes]]:
    """A live process whose command line names the sink module (what ``claimed_by`` recognises)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "molt_society.sinks"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 30
    # until the child has exec'd, /proc shows the forking test's own command line
    while b"molt_society.sinks" not in cmdline.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_live_sinks_claim_is_seen_and_a_dead_ones_is_not(
    tmp_path: Path, fake_sink: subprocess.Popen[bytes]
):
    ch = tmp_path / "ch"
    assert claimed_by(ch) is None  # no claim file
    _claim_of(ch, fake_sink.pid)
    assert claimed_by(ch) == fake_sink.pid
    fake_sink.kill()
    fake_sink.wait()
    assert claimed_by(ch) is None  # the claimant is gone


def test_a_claim_whose_pid_is_not_a_sink_counts_as_none(tmp_path: Path):
    ch = tmp_path / "ch"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _claim_of(ch, other.pid)
        assert claimed_by(ch) is None
    finally:
        other.kill()
        other.wait()


def test_a_process_writes_and_drops_only_its_own_claim(tmp_path: Path, fake_sink: subprocess.Popen[bytes]):
    ch = tmp_path / "nested" / "ch"
    write_claim(ch, "demo")
    assert claim_path(ch).exists()
    assert claimed_by(ch) is None  # this process's own claim does not keep it out
    drop_claim(ch)
    assert not claim_path(ch).exists()
    _claim_of(ch, fake_sink.pid)
    drop_claim(ch)  # another process's claim stays
    assert claimed_by(ch) == fake_sink.pid
    assert os.getpid() != fake_sink.pid


@pytest.mark.parametrize("content", ["", "not json", '{"pid": "7"}', '{"pid": -1}', '{"society": "s"}'])
def test_an_unreadable_claim_counts_as_none(tmp_path: Path, content: str):
    ch = tmp_path / "ch"
    claim_path(ch).write_text(content)
    assert claimed_by(ch) is None


def test_the_dashboard_does_not_open_a_claimed_directory(tmp_path: Path, fake_sink: subprocess.Popen[bytes]):
    ch = tmp_path / "ch"
    settings = Settings(clickhouse_url=f"chdb://{ch}", state_dir=tmp_path / "state")
    _claim_of(ch, fake_sink.pid)

    async def go(sql: str) -> object:
        src = ClickHouseSource(settings, "s")
        try:
            return await src.query(sql)
        finally:
            await src.close()

    with pytest.raises(QueryError, match=f"a sink \\(pid {fake_sink.pid}\\) is opening the chDB directory"):
        asyncio.run(go("SELECT 1"))
    assert not ch.exists()  # chDB was never started on it
    fake_sink.kill()
    fake_sink.wait()
    assert asyncio.run(go("SELECT 1")).rows == [[1]]  # type: ignore[attr-defined]


def test_a_reader_waits_for_the_claiming_sink_instead_of_taking_the_directory(
    tmp_path: Path, fake_sink: subprocess.Popen[bytes]
):
    import threading
    import time

    from molt_society.warehouse import SessionReader, open_reader

    ch = tmp_path / "ch"
    ch.mkdir()  # a store exists (a reader never creates one)
    settings = Settings(clickhouse_url=f"chdb://{ch}", state_dir=tmp_path / "state")
    _claim_of(ch, fake_sink.pid)
    threading.Timer(1.0, fake_sink.kill).start()  # the "sink" fails to start: its claim ends with it
    began = time.monotonic()
    reader = open_reader(settings, "s")
    try:
        assert time.monotonic() - began >= 0.9  # it waited for the claim to end
        assert isinstance(reader, SessionReader)
        assert reader.query("SELECT 2").rows == [[2]]
    finally:
        reader.close()
