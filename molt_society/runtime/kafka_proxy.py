"""A recording proxy for the Kafka protocol: every request the stack sends its broker, by Kafka API.

``python -m molt_society.runtime.kafka_proxy --listen PORT --upstream HOST:PORT --out FILE`` forwards every
connection on ``127.0.0.1:PORT`` to the broker, frame by frame, and once a second appends to ``FILE`` one
JSON line with the totals so far per API: requests, request bytes, response bytes and the seconds between
forwarding a request and forwarding its answer (the broker's time plus the loopback's; for ``Fetch`` this
includes the wait a fetch asks for when there is no data, ``fetch.max.wait.ms``).

For every client to go through it, the broker must advertise the proxy's address (its metadata names the
address clients connect to after the bootstrap): ``KafkaBroker.start(advertised_port=...)`` and
``LocalBroker.start(advertised_port=...)`` do that. ``bench.kafka_requests`` runs a society so. Neither
broker has this built in: Apache Kafka's request metrics are JMX MBeans and its request log a DEBUG
logger with no per-API totals; Tansu has no request log.

The frames are Kafka's: a 4-byte big-endian size, then for a request ``api_key`` (int16),
``api_version`` (int16) and ``correlation_id`` (int32), and for a response ``correlation_id`` first
(https://kafka.apache.org/protocol#protocol_messages). A request the broker does not answer (a produce
with ``acks=0``) is counted without a time. Nothing is decoded beyond those headers, nothing is changed,
and a frame larger than ``MAX_FRAME`` closes the connection (the broker's own limit is far below it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

MAX_FRAME = 256 << 20
WRITE_EVERY_S = 1.0

# https://kafka.apache.org/protocol#protocol_api_keys (the ones a client of ours may send)
API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    47: "OffsetDelete",
    60: "DescribeCluster",
}


def api_name(key: int) -> str:
    return API_NAMES.get(key, f"api-{key}")


def request_header(frame: bytes) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` of a request frame (without its size prefix)."""
    if len(frame) < 8:
        raise ValueError(f"a request frame of {len(frame)} bytes has no header")
    key, version, correlation = struct.unpack_from(">hhi", frame)
    return key, version, correlation


def response_correlation(frame: bytes) -> int:
    """The correlation id of a response frame (without its size prefix)."""
    if len(frame) < 4:
        raise ValueError(f"a response frame of {len(frame)} bytes has no correlation id")
    (correlation,) = struct.unpack_from(">i", frame)
    return int(correlation)


@dataclass
class ApiTotals:
    requests: int = 0
    request_bytes: int = 0
    responses: int = 0
    response_bytes: int = 0
    seconds: float = 0.0

    def as_list(self) -> list[float]:
        seconds = round(self.seconds, 6)
        return [self.requests, self.request_bytes, self.responses, self.response_bytes, seconds]


FIELDS = ("requests", "request_bytes", "responses", "response_bytes", "seconds")


@dataclass
class Recorder:
    """Totals per API over every connection."""

    apis: dict[str, ApiTotals] = field(default_factory=dict)
    connections: int = 0

    def request(self, key: int, size: int) -> None:
        t = self.apis.setdefault(api_name(key), ApiTotals())
        t.requests += 1
        t.request_bytes += size + 4

    def response(self, key: int, size: int, seconds: float) -> None:
        t = self.apis.setdefault(api_name(key), ApiTotals())
        t.responses += 1
        t.response_bytes += size + 4
        t.seconds += seconds

    def line(self) -> bytes:
        doc = {
            "ts": time.time(),
            "connections": self.connections,
            "fields": FIELDS,
            "apis": {k: v.as_list() for k, v in sorted(self.apis.items())},
        }
        return orjson.dumps(doc) + b"\n"


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes")
    try:
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


class Proxy:
    """Forwards connections to ``upstream`` and records each request and response into ``recorder``."""

    def __init__(self, upstream: tuple[str, int], recorder: Recorder) -> None:
        self.upstream = upstream
        self.recorder = recorder

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            broker_r, broker_w = await asyncio.open_connection(*self.upstream)
        except OSError as exc:
            log.warning("proxy.upstream_refused", error=str(exc))
            client_w.close()
            return
        self.recorder.connections += 1
        # correlation id -> (api key, when forwarded); a connection's answers come in request order
        inflight: dict[int, tuple[int, float]] = {}
        pumps = [
            asyncio.create_task(self._requests(client_r, broker_w, inflight)),
            asyncio.create_task(self._responses(broker_r, client_w, inflight)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for p in pumps:
                p.cancel()
            for w in (client_w, broker_w):
                w.close()
            for p in pumps:
                with contextlib.suppress(BaseException):
                    await p

    async def _requests(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, inflight: dict[int, tuple[int, float]]
    ) -> None:
        while (frame := await _read_frame(src)) is not None:
            key, _version, correlation = request_header(frame)
            self.recorder.request(key, len(frame))
            inflight[correlation] = (key, time.perf_counter())
            dst.write(struct.pack(">i", len(frame)) + frame)
            await dst.drain()

    async def _responses(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, inflight: dict[int, tuple[int, float]]
    ) -> None:
        while (frame := await _read_frame(src)) is not None:
            sent = inflight.pop(response_correlation(frame), None)
            if sent is not None:
                self.recorder.response(sent[0], len(frame), time.perf_counter() - sent[1])
            dst.write(struct.pack(">i", len(frame)) + frame)
            await dst.drain()


async def serve(listen: int, upstream: tuple[str, int], out: Path, stop: asyncio.Event) -> None:
    """Proxy ``127.0.0.1:listen`` to ``upstream`` until ``stop``, appending the totals to ``out``."""
    recorder = Recorder()
    proxy = Proxy(upstream, recorder)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", listen)
    log.info("proxy.started", listen=listen, upstream=f"{upstream[0]}:{upstream[1]}", out=str(out))
    with out.open("ab") as f:
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), WRITE_EVERY_S)
                f.write(recorder.line())
                f.flush()
        finally:
            server.close()
            f.write(recorder.line())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m molt_society.runtime.kafka_proxy", description=__doc__)
    p.add_argument("--listen", type=int, required=True, help="port on 127.0.0.1 the clients connect to")
    p.add_argument("--upstream", required=True, help="the broker, HOST:PORT")
    p.add_argument("--out", type=Path, required=True, help="JSON lines of totals per API, one a second")
    args = p.parse_args(argv)
    host, _, port = str(args.upstream).rpartition(":")
    if not host or not port.isdigit():
        p.error(f"--upstream {args.upstream!r} is not HOST:PORT")

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(args.listen, (host, int(port)), args.out, stop)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
