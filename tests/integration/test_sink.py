"""The sink end to end: a real broker, the sink as a subprocess (``python -m molt_society.sinks``), real chDB.

What is checked: every produced event lands exactly once (the set of ids and ``count()`` without FINAL),
watermarks are not stored, metrics and dead letters land, the ``threads`` view matches the events, the
HTTP endpoint answers while the sink owns the engine, and a SIGKILL in the middle of the stream followed
by a restart neither loses nor duplicates a row.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, TypeVar

import orjson
import pytest

from molt_society.runtime import kafka
from molt_society.runtime.broker import ensure_topics
from molt_society.runtime.record_auth import RecordKeys
from molt_society.schemas.control import MetricEvent, metric_id, to_us, watermark
from molt_society.schemas.events import (
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
    SubmoltCreated,
    SubmoltCreatedBody,
    VoteCast,
    VoteCastBody,
    partition_key,
)
from molt_society.schemas.ids import uuid7
from molt_society.schemas.topics import (
    DLQ_CODE,
    DLQ_OFFSET,
    DLQ_PARTITION,
    DLQ_REASON,
    DLQ_TOPIC,
    HEADER_KIND,
    KIND_WATERMARK,
    Role,
    topic_name,
)
from molt_society.schemas.wire import encode_event
from molt_society.sinks.clickhouse import EVENT_COLUMNS, rows_for_events
from molt_society.warehouse.client import connect
from molt_society.warehouse.schema import ensure_schema

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
START = datetime(2026, 1, 28, tzinfo=UTC)
T = TypeVar("T")


# --- producing ---------------------------------------------------------------------------------------------


@dataclass
class Thread:
    author: str
    submolt: str
    comments: int = 0
    commenters: set[str] = field(default_factory=set)
    max_depth: int = 0
    score: int = 0


@dataclass
class Society:
    """Generated events plus what the threads view must say about them."""

    events: list[Event]
    threads: dict[str, Thread]


def make_events(society: str, n: int, seed: int) -> Society:
    """``n`` valid events: a submolt, then posts, comments (with reply chains) and votes on them."""
    rng = random.Random(seed)
    agents = [f"agent-{i}" for i in range(50)]
    events: list[Event] = []
    threads: dict[str, Thread] = {}
    comments: dict[str, list[tuple[str, int]]] = defaultdict(list)  # post -> [(comment_id, depth)]

    def env(i: int) -> dict[str, Any]:
        at = START + timedelta(seconds=i, microseconds=rng.randrange(1_000_000))
        return {
            "event_id": uuid7(at, rng),
            "society": society,
            "actor": rng.choice(agents),
            "occurred_at": at,
        }

    events.append(SubmoltCreated(**env(0), body=SubmoltCreatedBody(submolt="general", title="General")))
    for i in range(1, n):
        roll = rng.random()
        if not threads or roll < 0.2:
            post_id = f"p{i}"
            e = env(i)
            events.append(
                PostCreated(
                    **e, body=PostCreatedBody(post_id=post_id, submolt="general", title=f"t{i}", content="x")
                )
            )
            threads[post_id] = Thread(author=e["actor"], submolt="general")
        elif roll < 0.6:
            post_id = rng.choice(list(threads))
            parent = rng.choice(comments[post_id]) if comments[post_id] and rng.random() < 0.5 else None
            depth = parent[1] + 1 if parent else 1
            comment_id = f"c{i}"
            e = env(i)
            body = CommentCreatedBody(
                comment_id=comment_id,
                post_id=post_id,
                parent_id=parent[0] if parent else None,
                depth=depth,
                content="reply " * rng.randrange(1, 20),
            )
            events.append(CommentCreated(**e, causation_id=post_id, body=body))
            comments[post_id].append((comment_id, depth))
            t = threads[post_id]
            t.comments += 1
            t.commenters.add(e["actor"])
            t.max_depth = max(t.max_depth, depth)
        else:
            post_id = rng.choice(list(threads))
            value: Literal[1, -1] = rng.choice((1, -1))
            on_post = not comments[post_id] or rng.random() < 0.5
            target = post_id if on_post else rng.choice(comments[post_id])[0]
            vote = VoteCastBody(
                target_type="post" if on_post else "comment", target_id=target, post_id=post_id, value=value
            )
            events.append(VoteCast(**env(i), body=vote))
            if on_post:
                threads[post_id].score += value
    return Society(events, threads)


async def produce(
    keys: RecordKeys,
    bootstrap: str,
    society: str,
    events: list[Event],
    partitions: int,
    metrics: int = 0,
    dead_letters: int = 0,
    garbage: bytes | None = None,
) -> None:
    """Events with a watermark per partition every 1,000 events and at the end, then metrics, dead letters.

    ``garbage``, when given, goes to the events topic right after the first event (a contract violation the
    sink must file under dead_letters instead of blocking on it).
    """
    producer = kafka.producer(bootstrap, "small", keys=keys)
    await producer.start()
    try:
        events_topic = topic_name(society, Role.EVENTS)
        futures = []

        async def watermarks(tick: int, at: datetime) -> None:
            mark = watermark("test", ["test"], to_us(at), tick, to_us(START))
            for p in range(partitions):
                futures.append(
                    await producer.send(
                        events_topic, orjson.dumps(mark), partition=p, headers=[(HEADER_KIND, KIND_WATERMARK)]
                    )
                )

        for i, event in enumerate(events):
            futures.append(
                await producer.send(events_topic, encode_event(event), key=partition_key(event).encode())
            )
            if i == 0 and garbage is not None:
                futures.append(await producer.send(events_topic, garbage, key=b"garbage", partition=0))
            if i % 1000 == 999:
                await watermarks(i // 1000, event.occurred_at)
        await watermarks(len(events), START + timedelta(days=365))
        for i in range(metrics):
            start = START + timedelta(hours=i // 2)
            m: MetricEvent = {
                "metric_id": metric_id(society, "active_agents", to_us(start), f"d{i % 2}"),
                "society": society,
                "metric": "active_agents",
                "window_start_us": to_us(start),
                "window_end_us": to_us(start + timedelta(hours=1)),
                "dim": f"d{i % 2}",
                "value": float(i),
                "emitted_at": time.time(),
            }
            futures.append(
                await producer.send(topic_name(society, Role.METRICS), orjson.dumps(m), key=b"active")
            )
        for i in range(dead_letters):
            headers = [
                (DLQ_REASON, b"malformed JSON: unexpected end of input"),
                (DLQ_CODE, b"malformed_json"),
                (DLQ_TOPIC, topic_name(society, Role.ACTIONS).encode()),
                (DLQ_PARTITION, b"1"),
                (DLQ_OFFSET, str(100 + i).encode()),
            ]
            futures.append(
                await producer.send(
                    topic_name(society, Role.DEADLETTER), b'{"type": "post_cr\xff', key=b"p1", headers=headers
                )
            )
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


# --- the sink process --------------------------------------------------------------------------------------


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 0.2) -> T:
    """Poll ``probe`` until it returns something other than None/False, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last is not False:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")


@dataclass
class SinkProcess:
    process: subprocess.Popen[bytes]
    state_file: Path
    log_file: Path
    url: str = ""

    def wait_ready(self, timeout: float = 60.0) -> str:
        def probe() -> str | None:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"sink exited with {self.process.returncode}:\n{self.log_file.read_text()}"
                )
            try:
                state = orjson.loads(self.state_file.read_bytes())
            except (FileNotFoundError, orjson.JSONDecodeError):
                return None
            return str(state["url"]) if state.get("pid") == self.process.pid else None

        self.url = wait_for("sink.json of the sink", probe, timeout, 0.05)
        return self.url

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/health", timeout=10) as resp:
            doc: dict[str, Any] = orjson.loads(resp.read())
            return doc

    def query(self, sql: str) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{self.url}/query", data=orjson.dumps({"sql": sql}), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            doc: dict[str, Any] = orjson.loads(resp.read())
            return doc

    def stop(self, timeout: float = 60.0) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)


@pytest.fixture
def keys(tmp_path: Path) -> RecordKeys:
    """The record keys of the sink's state folder: what the test produces is signed as the stack's."""
    return RecordKeys(tmp_path / "state")


@pytest.fixture
def start_sink(
    broker: str, society_name: str, chdb_url: str, tmp_path: Path
) -> Iterator[Callable[[dict[str, str]], SinkProcess]]:
    started: list[SinkProcess] = []

    def start(extra_env: dict[str, str]) -> SinkProcess:
        env = {
            **os.environ,
            "CLICKHOUSE_URL": chdb_url,
            "SOCIETY_STATE_DIR": str(tmp_path / "state"),
            "SOCIETY_LOG_JSON": "true",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            **extra_env,
        }
        log_file = tmp_path / f"sink-{len(started)}.log"
        with open(log_file, "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "molt_society.sinks",
                    "--society",
                    society_name,
                    "--bootstrap",
                    broker,
                ],
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        sink = SinkProcess(proc, tmp_path / "state" / society_name / "sink.json", log_file)
        started.append(sink)
        return sink

    yield start
    for sink in started:
        if sink.process.poll() is None:
            sink.process.kill()
            sink.process.wait()


def stored(chdb_url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read by this process straight from the chDB directory (the sink must have exited)."""
    client = connect(chdb_url)
    try:
        return list(client.query(sql).result_rows)
    finally:
        client.close()


def flush_rates(log_file: Path) -> list[float]:
    rates = []
    for line in log_file.read_text().splitlines():
        if line.startswith("{") and '"sink.flushed"' in line:
            doc = orjson.loads(line)
            if doc.get("rows_per_s") and doc["rows"] >= 1000:
                rates.append(float(doc["rows_per_s"]))
    return rates


# --- the tests ---------------------------------------------------------------------------------------------


def test_all_events_exactly_once(
    broker: str,
    society_name: str,
    chdb_url: str,
    start_sink: Callable[[dict[str, str]], SinkProcess],
    keys: RecordKeys,
) -> None:
    n, n_metrics, n_dead = 3000, 6, 4
    soc = make_events(society_name, n, seed=1)
    asyncio.run(ensure_topics(broker, society_name, partitions=4, shards=2))
    asyncio.run(
        produce(keys, broker, society_name, soc.events, 4, n_metrics, n_dead, garbage=b"not an event")
    )

    sink = start_sink({})
    sink.wait_ready()

    def done() -> dict[str, Any] | None:
        h = sink.health()
        ok = h["rows"] == {"events": n, "metrics": n_metrics, "dead_letters": n_dead + 1} and h["caught_up"]
        return h if ok else None

    health = wait_for("all rows in /health", done, timeout=180)
    assert health["control_records"] == 4 * (n // 1000 + 1)
    assert health["rejected"] == 1
    assert health["p99_insert_ms"] is not None

    # The endpoint: JSON-safe values and readable errors, while the sink owns the engine.
    res = sink.query("SELECT event_id, occurred_at, society FROM events ORDER BY occurred_at LIMIT 1")
    assert res["columns"] == ["event_id", "occurred_at", "society"]
    assert res["types"][0] == "UUID"
    (event_id, occurred_at, soc_name), *_ = res["rows"]
    assert (uuid.UUID(event_id), soc_name) == (soc.events[0].event_id, society_name)
    assert occurred_at.endswith("Z")
    assert datetime.fromisoformat(occurred_at) == soc.events[0].occurred_at
    with pytest.raises(urllib.error.HTTPError) as err:
        sink.query("SELECT no_such_column FROM events")
    assert err.value.code == 400
    assert "no_such_column" in orjson.loads(err.value.read())["error"]
    with pytest.raises(urllib.error.HTTPError) as err:
        sink.query("DROP TABLE events")
    assert err.value.code == 403  # refused: only reads run through the endpoint
    assert "DROP" in orjson.loads(err.value.read())["error"]

    assert sink.stop() == 0
    assert not sink.state_file.exists()

    ids = {row[0] for row in stored(chdb_url, "SELECT event_id FROM events")}
    assert ids == {e.event_id for e in soc.events}
    assert stored(chdb_url, "SELECT count() FROM events") == [(n,)]
    assert stored(chdb_url, "SELECT count() FROM metrics FINAL") == [(n_metrics,)]
    assert stored(
        chdb_url, "SELECT code, origin_partition, value, count() FROM dead_letters GROUP BY ALL ORDER BY code"
    ) == [
        ("malformed_json", 1, '{"type": "post_cr\ufffd', n_dead),
        ("sink_undecodable", 0, "not an event", 1),
    ]
    latest = stored(chdb_url, "SELECT dim, value FROM metric_latest ORDER BY dim")
    assert latest == [("d0", float(n_metrics - 2)), ("d1", float(n_metrics - 1))]

    view = stored(
        chdb_url,
        "SELECT post_id, author, submolt, comments, participants, max_depth, score"
        " FROM threads ORDER BY post_id",
    )
    expected = sorted(
        (p, t.author, t.submolt, t.comments, len(t.commenters), t.max_depth, t.score)
        for p, t in soc.threads.items()
    )
    assert view == expected
    assert any(t.comments == 0 for t in soc.threads.values())


def test_sigkill_and_restart_no_loss_no_duplicates(
    broker: str,
    society_name: str,
    chdb_url: str,
    start_sink: Callable[[dict[str, str]], SinkProcess],
    keys: RecordKeys,
) -> None:
    n = 40_000
    soc = make_events(society_name, n, seed=2)
    asyncio.run(ensure_topics(broker, society_name, partitions=4, shards=2))
    asyncio.run(produce(keys, broker, society_name, soc.events, 4))
    small = {"SOCIETY_SINK_BATCH_ROWS": "2000"}

    first = start_sink(small)
    first.wait_ready()
    rows_at_kill = wait_for(
        "the first rows",
        lambda: first.health()["rows"]["events"] or None,
        timeout=180,
        interval=0.02,
    )
    first.process.send_signal(signal.SIGKILL)
    assert first.process.wait(timeout=30) == -signal.SIGKILL
    assert 0 < rows_at_kill < n, "the sink finished before it could be killed: nothing was tested"

    second = start_sink(small)
    second.wait_ready()

    def complete() -> int | None:
        res = second.query("SELECT uniqExact(event_id), count() FROM events")
        distinct, total = res["rows"][0]
        assert total == distinct, f"duplicate rows: {total} rows for {distinct} ids"
        return int(total) if distinct == n and second.health()["caught_up"] else None

    assert wait_for("all events via /query", complete, timeout=240, interval=0.5) == n
    health = second.health()
    assert health["rows"]["events"] <= n
    assert health["total_lag"] == 0
    assert second.stop() == 0

    ids = {row[0] for row in stored(chdb_url, "SELECT event_id FROM events")}
    assert ids == {e.event_id for e in soc.events}
    assert stored(chdb_url, "SELECT count() FROM events") == [(n,)]
    rates = flush_rates(first.log_file) + flush_rates(second.log_file)
    print(f"\nkilled after {rows_at_kill} rows; restarted sink inserted {health['rows']['events']}")
    print(
        f"insert rows/s per 2000-row flush: median {sorted(rates)[len(rates) // 2]:.0f}, max {max(rates):.0f}"
    )


def test_retried_batch_is_deduplicated(chdb_url: str) -> None:
    """The recipe's premise on this engine: the same token inserts once, another token inserts again."""
    soc = make_events("dedup", 50, seed=3)
    records = [
        SimpleNamespace(topic="society.dedup.events", partition=0, offset=i, key=None, value=v, headers=[])
        for i, v in enumerate(encode_event(e) for e in soc.events)
    ]
    rows = rows_for_events(records)
    client = connect(chdb_url)
    try:
        ensure_schema(client)
        ensure_schema(client)  # idempotent
        for token in ("society.dedup.events:0:0-49", "society.dedup.events:0:0-49", "other"):
            client.insert(
                "events", rows, column_names=EVENT_COLUMNS, settings={"insert_deduplication_token": token}
            )
        assert client.query("SELECT count() FROM events").result_rows == [(100,)]
        assert client.query("SELECT count() FROM events FINAL").result_rows == [(50,)]
    finally:
        client.close()


def test_refuses_to_resume_on_a_recreated_topic(
    broker: str,
    society_name: str,
    chdb_url: str,
    start_sink: Callable[[dict[str, str]], SinkProcess],
    keys: RecordKeys,
) -> None:
    """ClickHouse holds rows for offsets the topic now gives to other records (a broker that lost its
    topics): the sink must stop loudly, not skip the new records or deduplicate them away."""
    topic = topic_name(society_name, Role.EVENTS)
    old = make_events(society_name, 40, seed=4).events
    records = [
        SimpleNamespace(
            topic=topic, partition=i % 4, offset=i // 4, key=None, value=encode_event(e), headers=[]
        )
        for i, e in enumerate(old)
    ]
    client = connect(chdb_url)
    try:
        ensure_schema(client)
        client.insert("events", rows_for_events(records), column_names=EVENT_COLUMNS)
    finally:
        client.close()
    asyncio.run(ensure_topics(broker, society_name, partitions=4, shards=2))
    asyncio.run(produce(keys, broker, society_name, make_events(society_name, 200, seed=5).events, 4))

    sink = start_sink({})
    code = sink.process.wait(timeout=120)
    log = sink.log_file.read_text()
    assert code == 1, log
    assert "PartitionMismatch" in log
    assert stored(chdb_url, "SELECT count() FROM events") == [(len(old),)]


def _assigned_sink(
    broker: str, society_name: str, start_sink: Callable[[dict[str, str]], SinkProcess]
) -> SinkProcess:
    """A sink on the society's topics (4 partitions, 2 shards), ready and assigned all six of them."""
    asyncio.run(ensure_topics(broker, society_name, partitions=4, shards=2))
    sink = start_sink({})
    sink.wait_ready()
    wait_for("assignment", lambda: len(sink.health()["lag"]) == 6 or None, timeout=120)
    return sink


def test_failed_inserts_are_retried_not_skipped(
    broker: str,
    society_name: str,
    chdb_url: str,
    start_sink: Callable[[dict[str, str]], SinkProcess],
    keys: RecordKeys,
) -> None:
    """While ClickHouse cannot write the events table (its data directory made immutable: a real failure
    that even root hits), the sink retries the same batch, commits nothing and says it is failing in
    ``/health``; once it can write again every row is stored once."""
    n = 500
    soc = make_events(society_name, n, seed=6)
    sink = _assigned_sink(broker, society_name, start_sink)
    # the events table's directory: chDB's data/<database>/events links to it (system.tables, which names
    # it, is not open to readers)
    database = sink.query("SELECT currentDatabase()")["rows"][0][0]
    path = str((Path(chdb_url.removeprefix("chdb://")) / "data" / database / "events").resolve(strict=True))
    subprocess.run(["chattr", "+i", path], check=True)
    try:
        asyncio.run(produce(keys, broker, society_name, soc.events, 4))
        health = wait_for(
            "failed inserts", lambda: (h := sink.health())["insert_errors"] >= 3 and h, timeout=120
        )
    finally:
        subprocess.run(["chattr", "-i", path], check=True)
    assert health["rows"]["events"] == 0
    assert not any(k.startswith(topic_name(society_name, Role.EVENTS)) for k in health["committed"])
    assert health["failing"] is not None
    assert health["failing"]["attempts"] >= 3
    assert "Operation not permitted" in health["failing"]["error"]

    wait_for("all rows", lambda: (h := sink.health())["rows"]["events"] == n and h["caught_up"], timeout=120)
    assert sink.health()["failing"] is None
    assert sink.stop() == 0
    assert stored(chdb_url, "SELECT count(), uniqExact(event_id) FROM events") == [(n, n)]


def test_a_vanished_data_folder_is_said_at_once_and_nothing_is_lost(
    broker: str,
    society_name: str,
    chdb_url: str,
    start_sink: Callable[[dict[str, str]], SinkProcess],
    keys: RecordKeys,
) -> None:
    """ClickHouse's data folder moved away under the running sink: chDB would go on accepting inserts
    into files nobody finds. The sink says what happened in ``/health`` and commits nothing; with the
    folder back every row is stored once."""
    n = 300
    soc = make_events(society_name, n, seed=8)
    sink = _assigned_sink(broker, society_name, start_sink)
    folder = Path(chdb_url.removeprefix("chdb://"))
    moved = folder.with_name(folder.name + ".moved")
    folder.rename(moved)
    try:
        asyncio.run(produce(keys, broker, society_name, soc.events, 4))
        health = wait_for("failed inserts", lambda: (h := sink.health())["failing"] and h, timeout=120)
    finally:
        moved.rename(folder)
    assert health["rows"]["events"] == 0
    assert not any(k.startswith(topic_name(society_name, Role.EVENTS)) for k in health["committed"])
    assert f"data folder {folder} was deleted" in health["failing"]["error"]
    wait_for("all rows", lambda: (h := sink.health())["rows"]["events"] == n and h["caught_up"], timeout=120)
    assert sink.stop() == 0
    assert stored(chdb_url, "SELECT count(), uniqExact(event_id) FROM events") == [(n, n)]
