"""``python -m molt_society.bench.producer --bootstrap B --topic T --file F``: produce a record file at full
speed.

A separate process so that its peak RSS is the producer's own (the file is streamed in chunks) and so
that the benchmark process does not share its CPU time. aiokafka producer, ``acks=all``, ``linger_ms=5``,
1 MiB batches (the agent workers' settings); events are keyed (default partitioner), watermarks go to
their partition with the ``society-kind: watermark`` header. Prints one JSON line: wall-clock time of the
first send and of the last acknowledgement, and the counts.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from molt_society.bench.dataset import KIND_MARK, read_records
from molt_society.runtime import kafka
from molt_society.runtime.record_auth import RecordKeys

MAX_IN_FLIGHT = 100_000


@dataclass(frozen=True)
class Part:
    """Which events of a record file to produce, and how fast: after the first ``skip`` events (and the
    marks among them), at most ``limit`` events, at ``rate`` events/s (None: as fast as the broker takes
    them)."""

    skip: int = 0
    limit: int | None = None
    rate: float | None = None

    def args(self) -> list[str]:
        """The command-line options that select this part."""
        out = ["--skip", str(self.skip)]
        if self.limit is not None:
            out += ["--limit", str(self.limit)]
        if self.rate is not None:
            out += ["--rate", str(self.rate)]
        return out


WHOLE = Part()


def command(bootstrap: str, topic: str, path: Path, state_dir: Path, part: Part = WHOLE) -> list[str]:
    """The command of a producer process for ``part`` of the record file ``path``, signing with the keys
    of the state folder ``state_dir`` (the stack's: ``runtime.record_auth``)."""
    argv = [sys.executable, "-m", "molt_society.bench.producer", "--bootstrap", bootstrap, "--topic", topic]
    return [*argv, "--file", str(path), "--state-dir", str(state_dir), *part.args()]


def spawn(
    bootstrap: str, topic: str, path: Path, state_dir: Path, part: Part = WHOLE
) -> subprocess.Popen[bytes]:
    """Start a producer process (its JSON line on a stdout pipe)."""
    return subprocess.Popen(command(bootstrap, topic, path, state_dir, part), stdout=subprocess.PIPE)


async def produce(
    bootstrap: str, topic: str, path: Path, state_dir: Path, part: Part = WHOLE
) -> dict[str, Any]:
    """Produce ``part`` of the records of ``path``."""
    skip, limit, rate = part.skip, part.limit, part.rate
    producer = kafka.producer(bootstrap, "bulk", keys=RecordKeys(state_dir))
    await producer.start()
    headers = kafka.WATERMARK_HEADERS
    pending: deque[Awaitable[Any]] = deque()
    events = marks = 0
    first: float | None = None
    seen = 0
    try:
        for kind, partition, key, value in read_records(path):
            if kind != KIND_MARK:
                seen += 1
                if seen <= skip:
                    continue
                if limit is not None and events >= limit:
                    break
            elif seen < skip:
                continue
            if first is None:
                first = time.time()
            if rate is not None and kind != KIND_MARK and events % 100 == 0:
                ahead = first + events / rate - time.time()
                if ahead > 0:
                    await asyncio.sleep(ahead)
            if kind == KIND_MARK:
                fut = await producer.send(topic, value, partition=partition, headers=headers)
                marks += 1
            else:
                fut = await producer.send(topic, value, key=key)
                events += 1
            pending.append(fut)
            if len(pending) >= MAX_IN_FLIGHT:
                while len(pending) > MAX_IN_FLIGHT // 2:
                    await pending.popleft()
        await asyncio.gather(*pending)
        done = time.time()
    finally:
        await producer.stop()
    return {"first_send": first, "last_ack": done, "events": events, "marks": marks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m molt_society.bench.producer", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--file", required=True, type=Path)
    parser.add_argument("--state-dir", required=True, type=Path, help="the stack's state folder (its keys)")
    parser.add_argument("--skip", type=int, default=0, help="events to skip at the start of the file")
    parser.add_argument("--limit", type=int, default=None, help="events to produce at most")
    parser.add_argument("--rate", type=float, default=None, help="events per second (default: max)")
    args = parser.parse_args(argv)
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        part = Part(args.skip, args.limit, args.rate)
        result = runner.run(produce(args.bootstrap, args.topic, args.file, args.state_dir, part))
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
