"""The local broker the stack starts when ``KAFKA_BOOTSTRAP`` is unset: Tansu (``runtime.broker``) or
Apache Kafka (``runtime.apache_kafka``), as ``SOCIETY_BROKER`` says."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol

from molt_society.runtime.apache_kafka import KafkaBroker
from molt_society.runtime.broker import LocalBroker
from molt_society.runtime.settings import WhereSettings


class Broker(Protocol):
    """What the stack needs of a local broker child process."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def pid(self) -> int: ...

    def exited(self) -> int | None: ...

    def stop(self) -> None: ...


def start_broker(
    settings: WhereSettings, run_dir: Path, *, nice: int = 0, die_with_parent: bool = True
) -> Broker:
    """Start the local broker of ``settings.broker`` for the run in ``run_dir``: its output goes to
    ``broker.log`` there, and Apache Kafka keeps its log directory in ``kafka/``.

    A broker started here begins with no topics, as Tansu does: the society's topics live as long as its
    run (a later run, resume or rebuild of the same society makes its own from ClickHouse), and a Kafka
    log left by an earlier run is removed first. Within a run, a Kafka that dies is started again on its
    log (``KafkaBroker.respawn``), which keeps every topic."""
    log_file = run_dir / "broker.log"
    if settings.broker == "kafka":
        data = run_dir / "kafka"
        shutil.rmtree(data, ignore_errors=True)
        return KafkaBroker.start(data, log_file=log_file, nice=nice, die_with_parent=die_with_parent)
    return LocalBroker.start(log_file=log_file, nice=nice, die_with_parent=die_with_parent)
