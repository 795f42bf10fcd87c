"""A direct replay (``society replay --through direct``: the stream workers' state machines straight into
ClickHouse, no broker) stores what a replay through the real stack stores: the same events with the same
Kafka coordinates, the same metrics, the same dead letters; and a direct replay killed part way and run
again stores each row once.

The history: a generated MoltBook archive (observatory SQLite, 1,500 posts) imported, written as the
project's own JSON Lines archive with three bad records added (an event whose body fails validation, a
comment on a post that does not exist, a conflicting reuse of an event id), so that dead letters are
compared too.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest
from stack_helpers import make_settings

from molt_society.bench.archive_gen import generate
from molt_society.importers import import_path
from molt_society.replay import export_rows
from molt_society.replay.archive import ArchiveHeader
from molt_society.replay.export_layout import StoredSource
from molt_society.replay.export_sqlite import write_observatory
from molt_society.replay.progress import read_progress
from molt_society.replay.source import load_source
from molt_society.runtime.settings import Settings
from molt_society.schemas.wire import encode_event
from molt_society.society.replay_direct import DirectReplayError, replay_direct
from molt_society.society.replay_run import replay_source
from molt_society.warehouse.client import locked
from molt_society.warehouse.reader import open_reader

pytestmark = pytest.mark.integration

EVENT_COLUMNS = (
    "toString(event_id), type, schema_version, actor, occurred_at, causation_id, post_id, comment_id, "
    "parent_id, submolt, depth, target_type, target_id, vote, title, content, body, _partition, _offset"
)
METRIC_COLUMNS = "metric, window_start, window_end, dim, value, _partition, _offset"
DEAD_COLUMNS = "code, reason, origin_topic, origin_partition, origin_offset, key, value"


def _bad_records(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    post = next(d for d in docs if d["type"] == "post_created")
    comment = next(d for d in docs if d["type"] == "comment_created")
    at = comment["occurred_at"]
    invalid = {**post, "event_id": "0f5a3d2e-0000-4000-8000-000000000001", "body": {"title": 3}}
    orphan = {
        **comment,
        "event_id": "0f5a3d2e-0000-4000-8000-000000000003",
        "body": {**comment["body"], "post_id": "no-such-post", "comment_id": "c-orphan", "parent_id": None},
        "occurred_at": at,
    }
    conflict = {**post, "body": {**post["body"], "title": "another title"}}
    timeless = {**post, "event_id": "0f5a3d2e-0000-4000-8000-000000000004", "occurred_at": "last tuesday"}
    return [invalid, orphan, conflict, timeless]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("history")
    generate(folder, 1_500, 5, ["observatory-sqlite"])
    with load_source(folder / "observatory.sqlite") as source:
        docs = list(source.events)
    path = folder / "history.jsonl.gz"
    bad = _bad_records(docs)
    header = ArchiveHeader(society="generated", events=len(docs) + len(bad), window_seconds=3600.0)
    with gzip.open(path, "wb") as f:
        f.write(orjson.dumps({"archive": asdict(header)}) + b"\n")
        for doc in [*docs, *bad]:
            f.write(orjson.dumps(doc) + b"\n")
    return path


def _stored(settings: Settings, society: str) -> dict[str, Any]:
    reader = open_reader(settings, society)
    try:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in reader.query(sql.format(society=society)).rows]

        return {
            "events": rows(
                f"SELECT {EVENT_COLUMNS} FROM events FINAL WHERE society = '{{society}}' ORDER BY 1"
            ),
            "metrics": rows(
                f"SELECT {METRIC_COLUMNS} FROM metrics FINAL WHERE society = '{{society}}' "
                "ORDER BY metric, window_start, dim"
            ),
            "dead": rows(
                f"SELECT {DEAD_COLUMNS} FROM dead_letters FINAL WHERE society = '{{society}}' "
                "ORDER BY origin_partition, origin_offset, code"
            ),
            "rows": rows(
                "SELECT (SELECT count() FROM events WHERE society = '{society}'), "
                "(SELECT count() FROM metrics WHERE society = '{society}'), "
                "(SELECT count() FROM dead_letters WHERE society = '{society}')"
            )[0],
        }
    finally:
        reader.close()


def _same_but_the_name(a: dict[str, Any], b: dict[str, Any], a_name: str, b_name: str) -> None:
    assert a["events"] == b["events"]
    assert a["metrics"] == b["metrics"]

    def named(v: Any, old: str, new: str) -> str:  # the topics and the re-addressed record name it
        return str(v).replace(f"society.{old}.", f"society.{new}.").replace(f'"society":"{old}"', new)

    assert [tuple(named(v, a_name, "X") for v in r) for r in a["dead"]] == [
        tuple(named(v, b_name, "X") for v in r) for r in b["dead"]
    ]


@pytest.fixture(scope="module")
def both(
    broker: str, tmp_path_factory: pytest.TempPathFactory, history: Path
) -> tuple[Settings, dict[str, Any]]:
    """The history replayed through the stack (society ``via_stack``) and directly (``via_direct``), one
    store; what each stored."""
    tmp = tmp_path_factory.mktemp("both")
    settings = make_settings(broker, tmp, window_seconds=3600.0)
    with load_source(history) as source:
        stack_stats = replay_source(settings, source, society="via_stack", speed=None)
    with load_source(history) as source:
        direct_stats = replay_direct(settings, source, society="via_direct")
    assert (direct_stats.events, direct_stats.marks) == (stack_stats.events, stack_stats.marks)
    return settings, {name: _stored(settings, name) for name in ("via_stack", "via_direct")}


def test_a_direct_replay_stores_what_the_stack_stores(both: tuple[Settings, dict[str, Any]]) -> None:
    _, stored = both
    stack, direct = stored["via_stack"], stored["via_direct"]
    assert len(stack["events"]) > 5_000
    assert len(stack["metrics"]) > 1_000
    codes = sorted(r[0] for r in stack["dead"])
    assert len(codes) == 4, codes  # the four bad records, and nothing else
    assert any("occurred_at" in r[1] for r in stack["dead"])  # the one without a time: rejected, not a crash
    _same_but_the_name(stack, direct, "via_stack", "via_direct")
    # every row once, not only under FINAL (the direct replay's batches are whole inserts)
    assert direct["rows"] == (len(direct["events"]), len(direct["metrics"]), len(direct["dead"]))


def _cli_env(settings: Settings) -> dict[str, str]:
    env = {
        **os.environ,
        "CLICKHOUSE_URL": settings.clickhouse_url,
        "SOCIETY_STATE_DIR": str(settings.state_dir),
        "SOCIETY_PARTITIONS": str(settings.partitions),
        "SOCIETY_SHARDS": str(settings.shards),
        "SOCIETY_WINDOW_SECONDS": "3600",
    }
    env.pop("KAFKA_BOOTSTRAP", None)
    return env


def test_a_stored_society_exported_to_the_dump_layouts_imports_to_its_events(
    both: tuple[Settings, dict[str, Any]], history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``society export --format``, read from ClickHouse page by page: the society replayed from the
    generated observatory file, exported to either layout, imports to the events that file imports to."""
    settings, _ = both
    expected = sorted(encode_event(e) for e in import_path(history.parent / "observatory.sqlite", "x").events)
    monkeypatch.setattr(export_rows, "PAGE", 700)  # several pages of each type
    sqlite_out = tmp_path / "again.sqlite"
    summary = write_observatory(sqlite_out, StoredSource(settings, "via_direct"))
    assert summary.written["posts"] == 1_500
    assert not summary.not_exported
    assert sorted(encode_event(e) for e in import_path(sqlite_out, "x").events) == expected
    json_out = tmp_path / "posts_full.json.gz"
    cmd = [
        sys.executable,
        "-m",
        "molt_society.society.cli",
        "export",
        "via_direct",
        "--format",
        "moltbook-json",
    ]
    done = subprocess.run(
        [*cmd, "--out", str(json_out)], env=_cli_env(settings), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1,500 posts" in done.stdout
    assert "agent_followed events" in done.stdout
    from_json = import_path(json_out, "x").events
    posts_and_comments = {
        "post_created",
        "comment_created",
        "vote_tallied",
    }  # the layout has no agents listing
    assert sorted(encode_event(e) for e in from_json if e.type in posts_and_comments) == sorted(
        encode_event(e)
        for e in import_path(history.parent / "observatory.sqlite", "x").events
        if e.type in posts_and_comments
    )


def _gone(group: int, within: float = 60.0) -> None:
    """Wait until every process of the process group ``group`` has exited (a killed process on a loaded
    machine may take a moment to; a zombie counts as exited, though its last threads may still hold its
    files: ``_released``)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for proc in psutil.process_iter(["status"]):
            try:
                if os.getpgid(proc.pid) == group and proc.info["status"] != psutil.STATUS_ZOMBIE:
                    alive.append(proc.pid)
            except (ProcessLookupError, psutil.Error):
                continue
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes of group {group} still running {within:.0f} s after SIGKILL: {alive}")


def _released(status: Path, within: float = 60.0) -> None:
    """Wait until no process holds chDB's lock on the store (a killed process's leader is a zombie before
    its last thread has closed the files)."""
    deadline = time.monotonic() + within
    while locked(status) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not locked(status), f"{status} still locked {within:.0f} s after the replay was killed"


def test_a_killed_direct_replay_run_again_stores_each_row_once(
    both: tuple[Settings, dict[str, Any]], history: Path, tmp_path: Path
) -> None:
    settings, stored = both
    env = {
        **_cli_env(settings),
        "SOCIETY_REPLAY_DIRECT_BATCH": "500",  # many inserts, so that the kill falls between two
    }
    cmd = [sys.executable, "-m", "molt_society.society.cli", "replay", str(history), "--society", "killed"]
    cmd += ["--through", "direct", "--no-dashboard"]
    first = subprocess.Popen(
        cmd, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        progress = read_progress(settings.state_dir, "killed") or {}
        if progress.get("published", 0) >= 2_000:
            break
        time.sleep(0.05)
    assert first.poll() is None, "the replay ended before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)  # the command and its processes, at once
    first.wait(30)
    _gone(first.pid)  # its insert process holds the store's lock until it has exited
    assert settings.chdb_path is not None
    _released(settings.chdb_path / "status")
    before = _stored(settings, "killed")
    assert len(before["events"]) < len(stored["via_direct"]["events"])  # it was cut short
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    killed = _stored(settings, "killed")
    _same_but_the_name(stored["via_direct"], killed, "via_direct", "killed")
    assert killed["rows"] == (len(killed["events"]), len(killed["metrics"]), len(killed["dead"]))


def test_a_history_that_cannot_be_read_to_the_end_fails_the_replay_saying_so(
    both: tuple[Settings, dict[str, Any]], history: Path
) -> None:
    """The publication (a thread of the replaying process) fails on a sorted run cut short: the replay
    stops with that reason instead of waiting for state processes that get nothing more."""
    settings, _ = both
    with load_source(history) as source:
        runs = source.events.spill.seal()
        with runs[-1].open("ab") as f:
            f.write(b"\x00\x01cut")  # a record head cut short after the last record
        began = time.monotonic()
        with pytest.raises(DirectReplayError, match="failed reading the history: error"):
            replay_direct(settings, source, society="cut_short")
    assert time.monotonic() - began < 120  # said at once, not after the stall limit (300 s)
