"""Apache Kafka (KRaft) as the local broker: fetched from Maven Central, started as a child process.

``SOCIETY_BROKER=kafka`` picks it instead of Tansu (``runtime.broker``). The distribution is the pinned
``org.apache.kafka:kafka_2.13`` with its runtime dependencies and a log4j binding, copied by Maven
(``mvn dependency:copy-dependencies``, checksums verified: ``--strict-checksums``) into a cache folder,
``~/.cache/molt-society/kafka-<version>`` unless ``SOCIETY_KAFKA_HOME`` names another;
``python -m molt_society.runtime.apache_kafka fetch`` (run by ``make setup``) fills it once.

One node is broker and controller at once, on two free loopback ports, with its log directory in the
run's state folder (formatted on first use, kept afterwards: topics survive a restart of the broker).
Settings are sized for a 2-core machine: two network and two I/O threads, a 512 MiB heap, 16 MiB
segments, no delay before a group's first rebalance. Records are kept until the society's trimmer deletes
what every reader has passed (``society.trim``, DeleteRecords, on by default with this broker); no
retention by age or size, which could delete what a stopped reader still needs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from molt_society.runtime.broker import broker_silence, child_preexec, free_port, stop_process, wait_for_port
from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.25.3"
_MAIN_JAR = f"kafka_2.13-{KAFKA_VERSION}.jar"

_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>molt-society</groupId>
  <artifactId>local-kafka</artifactId>
  <version>{KAFKA_VERSION}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""

_LOG4J = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
"""


class KafkaMissing(RuntimeError):
    """The Kafka distribution is not in its cache folder."""


def kafka_home() -> Path:
    """The cache folder of the pinned distribution (``SOCIETY_KAFKA_HOME`` overrides)."""
    given = os.environ.get("SOCIETY_KAFKA_HOME")
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "molt-society" / f"kafka-{KAFKA_VERSION}"


def libs_dir(home: Path | None = None) -> Path:
    """The folder of the distribution's jars; raises ``KafkaMissing`` with the command that fetches it."""
    libs = (home or kafka_home()) / "libs"
    if not (libs / _MAIN_JAR).is_file():
        raise KafkaMissing(
            f"Apache Kafka {KAFKA_VERSION} is not in {libs}: run `python -m molt_society.runtime.apache_kafka"
            " fetch` (make setup does) or pick the other broker with SOCIETY_BROKER=tansu"
        )
    return libs


def fetch(home: Path | None = None, *, maven: str = "mvn") -> Path:
    """Copy the pinned distribution from Maven Central into ``home`` (once; a complete copy is kept).

    Maven resolves the dependencies and checks every download's checksum (``--strict-checksums``); the
    jars land in a temporary folder first and are moved into place whole, so an interrupted fetch leaves
    no half distribution that would pass for a complete one."""
    home = home or kafka_home()
    with contextlib.suppress(KafkaMissing):
        return libs_dir(home)
    if shutil.which(maven) is None:
        raise KafkaMissing(f"{maven} is not installed: Apache Kafka is fetched from Maven Central with Maven")
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home) as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(_POM)
        cmd = [
            maven,
            "-B",
            "-q",
            "--strict-checksums",
            "-f",
            str(work / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={work / 'libs'}",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not (work / "libs" / _MAIN_JAR).is_file():
            raise KafkaMissing(
                f"Maven could not fetch Apache Kafka {KAFKA_VERSION} (exit {done.returncode}):\n"
                + (done.stdout + done.stderr)[-2000:]
            )
        (work / "libs").rename(home / "libs")
    log.info("kafka.fetched", version=KAFKA_VERSION, home=str(home))
    return home / "libs"


@dataclass(frozen=True)
class Node:
    """One KRaft node's place in its cluster: its id, ports, the controller quorum and replication."""

    port: int
    controller_port: int
    node_id: int = 1
    voters: str = ""  # "1@127.0.0.1:p1,2@...": empty for a single node (itself)
    replication: int = 1  # of the internal topics (offsets, transactions)
    # the port clients are told to connect to, when not ``port``: a proxy in front (runtime.kafka_proxy)
    advertised_port: int | None = None

    @property
    def quorum(self) -> str:
        return self.voters or f"{self.node_id}@127.0.0.1:{self.controller_port}"


def server_properties(data_dir: Path, port: int, controller_port: int, node: Node | None = None) -> str:
    """A KRaft node, broker and controller, on loopback, sized for two cores (one node unless ``node``
    places it in a cluster: then its internal topics have ``node.replication`` replicas, two in sync)."""
    node = node or Node(port, controller_port)
    rf = node.replication
    isr = max(1, rf - 1)
    return "\n".join(
        [
            "process.roles=broker,controller",
            f"node.id={node.node_id}",
            f"controller.quorum.voters={node.quorum}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.advertised_port or port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={data_dir / 'log'}",
            "num.partitions=1",
            "num.network.threads=2",
            "num.io.threads=2",
            "background.threads=2",
            "num.recovery.threads.per.data.dir=1",
            "num.replica.fetchers=1",
            # DeleteRecords frees disk a whole segment at a time: 16 MiB segments bound a trimmed
            # partition's files to about two segments
            "log.segment.bytes=16777216",
            # no retention by age or size: records go when every reader has passed them (society.trim,
            # DeleteRecords); a time limit would delete what a slow or stopped reader still needs
            "log.retention.ms=-1",
            "log.retention.bytes=-1",
            "log.retention.check.interval.ms=60000",
            f"default.replication.factor={rf}",
            f"min.insync.replicas={isr}",
            f"offsets.topic.replication.factor={rf}",
            "offsets.topic.num.partitions=4",
            f"transaction.state.log.replication.factor={rf}",
            f"transaction.state.log.min.isr={isr}",
            "transaction.state.log.num.partitions=4",
            f"share.coordinator.state.topic.replication.factor={rf}",
            f"share.coordinator.state.topic.min.isr={isr}",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=true",
            "message.max.bytes=16777216",  # records up to 16 MiB reach the pipeline, which dead-letters
            "replica.fetch.max.bytes=16777216",
            "",
        ]
    )


def _silence(bootstrap: str) -> str | None:
    """``broker_silence`` from synchronous code, also where an event loop runs in this thread (then in a
    thread of its own: a caller starting a broker from a coroutine blocks its loop until it answers)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(broker_silence(bootstrap, timeout=2.0))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, broker_silence(bootstrap, timeout=2.0)).result()


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaMissing("java is not installed: Apache Kafka needs a Java runtime (OpenJDK 17 or later)")
    return java


def _jvm_args(libs: Path, config_dir: Path) -> list[str]:
    return [
        _java(),
        "-Xms128m",
        "-Xmx512m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={config_dir / 'log4j2.properties'}",
        "-cp",
        f"{libs}/*",
    ]


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, never starting with ``-``
    (which ``kafka-storage format -t`` would read as an option; Kafka's own ``Uuid.randomUuid`` draws
    again for the same reason)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def format_storage(libs: Path, config_dir: Path, cluster_id: str | None = None) -> None:
    """Format the node's log directory (KRaft needs a cluster id, the same on every node of a cluster)
    unless it holds a formatted log."""
    props = config_dir / "server.properties"
    meta = config_dir / "log" / "meta.properties"
    if meta.is_file():
        return
    cluster_id = cluster_id or new_cluster_id()
    cmd = [*_jvm_args(libs, config_dir), "kafka.tools.StorageTool", "format", "-t", cluster_id]
    done = subprocess.run([*cmd, "-c", str(props)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"formatting the Kafka log directory failed: {(done.stdout + done.stderr)[-1500:]}"
        )


@dataclass
class KafkaBroker:
    """An Apache Kafka child process (one KRaft node); the interface of ``runtime.broker.LocalBroker``."""

    process: subprocess.Popen[bytes]
    port: int
    controller_port: int
    data_dir: Path
    log_file: Path | None = None
    nice: int = 0
    node: Node | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(
        cls,
        data_dir: Path,
        log_file: Path | None = None,
        port: int | None = None,
        nice: int = 0,
        die_with_parent: bool = True,
        timeout: float = 60.0,
        advertised_port: int | None = None,
    ) -> KafkaBroker:
        """Start the node on ``port`` (a free one by default) with its log in ``data_dir``, formatted on
        first use; ready once it answers a request. With ``die_with_parent`` it gets SIGTERM when this
        process dies (``runtime.broker.child_preexec``: call from the main thread). With
        ``advertised_port`` its metadata sends clients there (a ``runtime.kafka_proxy`` in front of it,
        which must be listening before this is called: readiness is asked through it)."""
        port, controller = port or free_port(), free_port()
        node = Node(port, controller, advertised_port=advertised_port) if advertised_port else None
        broker = cls.spawn(data_dir, log_file, port, controller, nice, die_with_parent, node=node)
        try:
            wait_for_port("127.0.0.1", broker.port, timeout=timeout)
            broker._wait_answering(time.monotonic() + timeout)
        except (TimeoutError, RuntimeError):
            broker.stop()
            raise
        log.info(
            "broker.started", kind="kafka", bootstrap=broker.bootstrap, pid=broker.pid, data=str(data_dir)
        )
        return broker

    @classmethod
    def spawn(
        cls,
        data_dir: Path,
        log_file: Path | None,
        port: int,
        controller_port: int,
        nice: int = 0,
        die_with_parent: bool = True,
        node: Node | None = None,
        cluster_id: str | None = None,
    ) -> KafkaBroker:
        """Start the process and return at once (``start`` waits until it answers)."""
        libs = libs_dir()
        data_dir.mkdir(parents=True, exist_ok=True)
        props = server_properties(data_dir, port, controller_port, node)
        (data_dir / "server.properties").write_text(props)
        (data_dir / "log4j2.properties").write_text(_LOG4J)
        format_storage(libs, data_dir, cluster_id)
        out = open(log_file, "ab") if log_file else None  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [*_jvm_args(libs, data_dir), "kafka.Kafka", str(data_dir / "server.properties")],
                stdout=out if out is not None else subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                preexec_fn=child_preexec(nice, die_with_parent),
            )
        finally:
            if out is not None:
                out.close()
        return cls(proc, port, controller_port, data_dir, log_file, nice, node)

    def respawn(self) -> KafkaBroker:
        """The same node started again on its log directory and ports, after this process exited: the
        topics and every acknowledged record are still there, and clients reconnect to the same address.
        Returns at once; the node answers a few seconds later (``runtime.broker.broker_silence`` tells)."""
        if self.process.poll() is None:
            raise RuntimeError(f"the broker (pid {self.pid}) still runs")
        return self.spawn(
            self.data_dir, self.log_file, self.port, self.controller_port, self.nice, node=self.node
        )

    def wait_answering(self, timeout: float = 60.0) -> None:
        """Block until the node answers a request (RuntimeError if it exits meanwhile)."""
        wait_for_port("127.0.0.1", self.port, timeout=timeout)
        self._wait_answering(time.monotonic() + timeout)

    def _wait_answering(self, deadline: float) -> None:
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"Apache Kafka exited with status {self.process.returncode} while starting"
                )
            why = _silence(self.bootstrap)
            if why is None:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Apache Kafka on {self.bootstrap} does not answer: {why}")
            time.sleep(0.1)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exited(self) -> int | None:
        """The broker's exit status if it exited (negative: killed by that signal), else None."""
        return self.process.poll()

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown that closes the log cleanly), SIGKILL after 20 s."""
        stop_process(self.process, timeout=20)


@dataclass
class KafkaCluster:
    """``n`` KRaft nodes on loopback, each broker and controller (a quorum of ``n`` voters), with
    ``replication`` replicas of the internal topics and two in sync: what ``docker/compose.yaml``'s
    brokers run, here as child processes (``tests/integration/test_kafka_cluster.py``)."""

    nodes: list[KafkaBroker]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    @classmethod
    def start(cls, root: Path, n: int = 3, timeout: float = 90.0) -> KafkaCluster:
        ports = [(free_port(), free_port()) for _ in range(n)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
        cluster_id = new_cluster_id()
        nodes: list[KafkaBroker] = []
        try:
            for i, (port, controller) in enumerate(ports):
                node = Node(port, controller, i + 1, voters, replication=min(3, n))
                data = root / f"node-{i + 1}"
                log_file = root / f"node-{i + 1}.log"
                nodes.append(
                    KafkaBroker.spawn(data, log_file, port, controller, node=node, cluster_id=cluster_id)
                )
            for b in nodes:  # a quorum forms only once most voters run: start all, then wait
                b.wait_answering(timeout)
        except BaseException:
            for b in nodes:
                b.stop()
            raise
        log.info("kafka.cluster_started", bootstrap=",".join(b.bootstrap for b in nodes))
        return cls(nodes)

    def stop(self) -> None:
        for b in self.nodes:
            b.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m molt_society.runtime.apache_kafka")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help=f"copy Apache Kafka {KAFKA_VERSION} from Maven Central into its cache")
    sub.add_parser("where", help="print the folder of the distribution's jars")
    args = parser.parse_args(argv)
    try:
        libs = fetch() if args.command == "fetch" else libs_dir()
    except KafkaMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(libs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
