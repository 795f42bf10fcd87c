"""Records a consumer tailing a partition never gets while other producers append (``runtime.contiguous``).

Each round starts a local broker, three producer processes (linger 5, 0 and 1 ms, as the stack's producers
differ) that append ``--records`` small records each, with headers, to a topic of 4 partitions, and two
consumers in this process tailing it meanwhile: a plain one and one whose fetches go through
``Contiguous``. Every acknowledged (partition, offset) must reach both; the round prints how many did not.
Tansu 0.6.0 sometimes answers a fetch at the end of a partition with a batch after the one asked for, so the
plain consumer moves past records that are in the log; the guarded one fetches again from the first offset
missing.

    python -m molt_society.bench.tail_gaps [--rounds 5] [--records 30000] [--broker tansu|kafka]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import NewTopic

from molt_society.runtime import kafka
from molt_society.runtime.brokers import start_broker
from molt_society.runtime.contiguous import Contiguous
from molt_society.runtime.settings import get_settings

TOPIC = "tail-gaps"
PARTITIONS = 4

PRODUCER = r"""
import asyncio, json, random, sys
from molt_society.runtime import kafka

async def main(bootstrap, seed, n, linger):
    p = kafka.producer(bootstrap, "small", linger_ms=linger)
    await p.start()
    rng = random.Random(seed)
    futures = []
    for i in range(n):
        value = b"x" * rng.randrange(0, 400)
        key = str(rng.randrange(50)).encode()
        futures.append(await p.send(sys.argv[5], value, key=key, headers=[("h", b"y" * 40)]))
        if i % 200 == 0:
            await asyncio.sleep(0.01)
    acked = []
    for f in futures:
        md = await f
        acked.append([md.partition, md.offset])
    await p.stop()
    print(json.dumps(acked))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
"""


async def _tail(consumer: AIOKafkaConsumer, guard: Contiguous | None, got: set[tuple[int, int]]) -> None:
    while True:
        fetched = await consumer.getmany(timeout_ms=100)
        for tp, records in fetched.items():
            kept = guard.records(tp, records) if guard is not None else records
            got.update((r.partition, r.offset) for r in kept)


async def _consumer(bootstrap: str) -> AIOKafkaConsumer:
    c = kafka.consumer(bootstrap, "reader", max_poll_records=10_000, fetch_max_wait_ms=20)
    await c.start()
    tps = [TopicPartition(TOPIC, q) for q in range(PARTITIONS)]
    c.assign(tps)
    await c.seek_to_beginning(*tps)
    return c


async def one_round(bootstrap: str, broker: str, records: int, seed: int) -> dict[str, Any]:
    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([TOPIC])
        await asyncio.sleep(1.0)
    except Exception:
        pass
    await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    await admin.close()
    plain, guarded = await _consumer(bootstrap), await _consumer(bootstrap)
    guard = Contiguous(guarded, "bench")
    got_plain: set[tuple[int, int]] = set()
    got_guarded: set[tuple[int, int]] = set()
    tails = [
        asyncio.create_task(_tail(plain, None, got_plain)),
        asyncio.create_task(_tail(guarded, guard, got_guarded)),
    ]
    began = time.monotonic()
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            PRODUCER,
            bootstrap,
            str(seed * 3 + j),
            str(records),
            str(linger),
            TOPIC,
            stdout=subprocess.PIPE,
            env={**os.environ, "SOCIETY_BROKER": broker},  # its producer: idempotent on Kafka only
        )
        for j, linger in enumerate((5, 0, 1))
    ]
    outs = await asyncio.gather(*(p.communicate() for p in procs))
    for proc, (out, _) in zip(procs, outs, strict=True):
        if proc.returncode != 0 or not out.strip():
            raise RuntimeError(
                f"a producer process failed (exit {proc.returncode}); its output: {out[-2000:]!r}"
            )
    # its last line: the acknowledged (partition, offset) pairs (log lines may come before)
    acked = {(int(p), int(o)) for out, _ in outs for p, o in json.loads(out.splitlines()[-1])}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (acked <= got_guarded and len(got_plain) >= len(acked)):
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # the plain consumer's last fetches
    for t in tails:
        t.cancel()
    await asyncio.gather(*tails, return_exceptions=True)
    await plain.stop()
    await guarded.stop()
    return {
        "acked": len(acked),
        "plain_missing": len(acked - got_plain),
        "guarded_missing": len(acked - got_guarded),
        "refetches": guard.refetches,
        "gaps_closed": guard.gaps_closed,
        "seconds": round(time.monotonic() - began, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=30_000, help="records per producer process")
    ap.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    a = ap.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="tail-gaps-") as tmp:
        broker = start_broker(get_settings().model_copy(update={"broker": a.broker}), Path(tmp))
        try:
            for k in range(a.rounds):
                r = asyncio.run(one_round(broker.bootstrap, a.broker, a.records, k))
                failed += r["guarded_missing"] > 0
                print(
                    f"round {k + 1}/{a.rounds}: {r['acked']:,} acknowledged; never fetched: plain consumer "
                    f"{r['plain_missing']:,}, guarded {r['guarded_missing']:,} ({r['refetches']} fetches "
                    f"again, {r['gaps_closed']} gaps closed); {r['seconds']} s",
                    flush=True,
                )
        finally:
            broker.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
