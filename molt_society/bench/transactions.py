"""``python -m molt_society.bench.transactions``: what a transactional read-process-write costs on the local
Apache Kafka, against the stream worker's at-least-once loop.

The stream worker reads a batch of actions (``getmany``), validates it, publishes the accepted events and
commits the batch's offsets once every send is acknowledged (``streams/processor.py``): at least once, with
duplicates after a crash dropped by event id (its partition state) and by ClickHouse's insert tokens. With
Kafka transactions (aiokafka: ``transactional_id``, ``send_offsets_to_transaction``) the events of a batch
and its offsets commit together, so a ``read_committed`` reader never sees a batch twice.

Both loops here do the same work on the same records: ``--records`` JSON records of about 490 bytes on 4
partitions of an input topic, decoded, re-encoded and written to an output topic, offsets committed per
batch; one group consumer and one producer (acks=all, idempotent) in each. Printed: records/s of each
loop (first record read to last batch committed), the mean batch, and the time a ``read_committed`` reader
of the transactional output needs to see everything. One run each, on a fresh local Kafka; nothing written
to BENCHMARKS.md unless ``--write``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from aiokafka import TopicPartition
from aiokafka.admin import NewTopic

from molt_society.bench.machine import machine_line
from molt_society.bench.markdown import markers, md_table, publish
from molt_society.bench.processes import REPO
from molt_society.runtime import kafka
from molt_society.runtime.apache_kafka import KafkaBroker

BEGIN, END = markers("transactions")
PARTITIONS = 4


async def _topics(bootstrap: str, names: list[str]) -> None:
    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names])
    finally:
        await admin.close()


async def _fill(bootstrap: str, topic: str, n: int) -> None:
    p = kafka.producer(bootstrap, "bulk")
    await p.start()
    try:
        body = {"type": "comment_created", "actor": "a" * 36, "text": "x" * 300}
        for i in range(n):
            await p.send(topic, orjson.dumps({**body, "n": i}), partition=i % PARTITIONS)
        await p.flush()
    finally:
        await p.stop()


async def _loop(
    bootstrap: str,
    source: str,
    sink: str,
    group: str,
    n: int,
    transactional: bool,
    max_records: int | None = None,
) -> dict[str, Any]:
    c = kafka.consumer(bootstrap, "member", group=group, isolation_level="read_committed")
    c.subscribe([source])
    extra: dict[str, Any] = {"transactional_id": f"{group}-tx"} if transactional else {}
    p = kafka.producer(bootstrap, "bulk", enable_idempotence=True, **extra)
    await c.start()
    await p.start()
    seen = batches = 0
    began: float | None = None
    try:
        while seen < n:
            got = await c.getmany(timeout_ms=100, max_records=max_records)
            if not got:
                continue
            began = began or time.monotonic()
            offsets = {tp: records[-1].offset + 1 for tp, records in got.items()}
            if transactional:
                async with p.transaction():
                    for tp, records in got.items():
                        for r in records:
                            assert r.value is not None
                            await p.send(sink, orjson.dumps(orjson.loads(r.value)), partition=tp.partition)
                    await p.send_offsets_to_transaction(offsets, group)
            else:
                futures = [
                    await p.send(sink, orjson.dumps(orjson.loads(r.value or b"{}")), partition=tp.partition)
                    for tp, records in got.items()
                    for r in records
                ]
                await asyncio.gather(*futures)
                await c.commit(offsets)
            seen += sum(len(v) for v in got.values())
            batches += 1
        seconds = time.monotonic() - (began or time.monotonic())
    finally:
        await p.stop()
        await c.stop()
    return {"records": seen, "seconds": seconds, "rate": seen / seconds, "batches": batches}


async def _read_all(bootstrap: str, topic: str, n: int) -> float:
    c = kafka.consumer(bootstrap, "reader", isolation_level="read_committed")
    await c.start()
    began = time.monotonic()
    try:
        tps = [TopicPartition(topic, q) for q in range(PARTITIONS)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        seen = 0
        while seen < n:
            got = await c.getmany(timeout_ms=200)
            seen += sum(len(v) for v in got.values())
        return time.monotonic() - began
    finally:
        await c.stop()


BATCHES: tuple[int | None, ...] = (20, 200, None)
"""Records per batch (``getmany``'s ``max_records``): a live society's few per tick and partition, more,
and a backlog's whole fetch (None)."""


async def measure(bootstrap: str, n: int) -> list[dict[str, Any]]:
    await _topics(bootstrap, ["in"])
    await _fill(bootstrap, "in", n)
    rows: list[dict[str, Any]] = []
    for batch in BATCHES:
        m = n if batch is None else min(n, batch * 400)  # every loop reads its first m records
        tag = "all" if batch is None else str(batch)
        await _topics(bootstrap, [f"out-plain-{tag}", f"out-tx-{tag}"])
        plain = await _loop(bootstrap, "in", f"out-plain-{tag}", f"plain-{tag}", m, False, batch)
        tx = await _loop(bootstrap, "in", f"out-tx-{tag}", f"tx-{tag}", m, True, batch)
        tx["read_committed_s"] = await _read_all(bootstrap, f"out-tx-{tag}", tx["records"])
        rows.append({"batch": batch, "plain": plain, "tx": tx})
    return rows


def markdown(results: list[dict[str, Any]], n: int, command: str) -> str:
    rows = []
    for r in results:
        plain, tx = r["plain"], r["tx"]
        rows.append(
            [
                "whole fetch" if r["batch"] is None else f"at most {r['batch']}",
                f"{plain['records'] / plain['batches']:,.0f}",
                f"{plain['records']:,}",
                f"{plain['rate']:,.0f}",
                f"{tx['rate']:,.0f}",
                f"{tx['rate'] / plain['rate']:.2f}",
                f"{tx['read_committed_s']:.1f} s",
            ]
        )
    head = ["records per batch", "mean", "records", "at least once /s", "transactional /s", "ratio"]
    return "\n".join(
        [
            BEGIN,
            "## Transactions: what exactly-once read-process-write costs (issue 25)",
            "",
            f"Command: `{command}`; {machine_line(python=True)}; {time.strftime('%Y-%m-%d')}; local Apache "
            f"Kafka, up to {n:,} records of about 490 B on {PARTITIONS} partitions read, re-encoded and "
            "written by one group consumer and one idempotent producer (acks=all); at least once: the "
            "batch's sends acknowledged, then its offsets committed; transactional: the batch's sends and "
            "its offsets in one transaction (aiokafka). One run each.",
            "",
            md_table([*head, "read_committed reader of the output"], rows),
            END,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m molt_society.bench.transactions", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--write", action="store_true", help="put the table in BENCHMARKS.md")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="society-bench-tx-"))
    broker = KafkaBroker.start(work / "kafka", log_file=work / "broker.log")
    try:
        results = asyncio.run(measure(broker.bootstrap, args.records))
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    command = "python -m molt_society.bench.transactions " + " ".join(sys.argv[1:] if argv is None else argv)
    publish(markdown(results, args.records, command.strip()), REPO / "BENCHMARKS.md", args.write, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
