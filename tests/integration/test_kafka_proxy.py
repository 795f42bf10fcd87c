"""``runtime.kafka_proxy`` in front of each local broker, advertised by it: every request goes through the
proxy and is counted by API (real brokers, real clients).

Expected values come from what the test's clients did: ``N`` sequential ``send_and_wait`` calls are ``N``
Produce requests of one record each, answered each; the records read back through the proxy are the ones
sent; a broker advertising its own port instead would leave the proxy no Produce to count.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from stack_helpers import create_topic

from molt_society.runtime import kafka
from molt_society.runtime.apache_kafka import KafkaBroker
from molt_society.runtime.broker import LocalBroker, free_port, read_topic, wait_for_port
from molt_society.runtime.kafka_proxy import FIELDS

pytestmark = pytest.mark.integration

N = 25
TOPIC = "proxied"


async def _traffic(bootstrap: str, idempotent: bool) -> list[bytes]:
    await create_topic(bootstrap, TOPIC)
    producer = kafka.producer(bootstrap, "actions", enable_idempotence=idempotent)  # Tansu has none
    await producer.start()
    try:
        for i in range(N):
            await producer.send_and_wait(TOPIC, value=b"x" * 100 + str(i).encode())
    finally:
        await producer.stop()
    return [r.value for r in await read_topic(bootstrap, TOPIC)]


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
def test_every_request_goes_through_the_proxy_and_is_counted_by_api(tmp_path: Path, kind: str) -> None:
    listen = free_port()
    out = tmp_path / "requests.jsonl"
    broker: Any = None
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proxy = None
    try:
        port = free_port()
        argv = [sys.executable, "-m", "molt_society.runtime.kafka_proxy", "--listen", str(listen)]
        argv += ["--upstream", f"127.0.0.1:{port}", "--out", str(out)]
        if kind == "kafka":  # it asks whether it is ready through the address it advertises: proxy first
            proxy = subprocess.Popen(argv, env=env)
            wait_for_port("127.0.0.1", listen)
            broker = KafkaBroker.start(tmp_path / "kafka", tmp_path / "b.log", port, advertised_port=listen)
        else:
            broker = LocalBroker.start(tmp_path / "b.log", port, advertised_port=listen)
            proxy = subprocess.Popen(argv, env=env)
            wait_for_port("127.0.0.1", listen)
        values = asyncio.run(_traffic(f"127.0.0.1:{listen}", idempotent=kind == "kafka"))
    finally:
        if proxy is not None:
            proxy.send_signal(signal.SIGTERM)
            assert proxy.wait(timeout=20) == 0
        if broker is not None:
            broker.stop()

    assert sorted(values) == sorted(b"x" * 100 + str(i).encode() for i in range(N))
    last = orjson.loads(out.read_bytes().splitlines()[-1])
    assert tuple(last["fields"]) == FIELDS
    apis = {name: dict(zip(FIELDS, v, strict=True)) for name, v in last["apis"].items()}
    produce = apis["Produce"]
    assert produce["requests"] == N, produce
    assert produce["responses"] == N, produce
    assert produce["request_bytes"] > N * 100
    assert produce["seconds"] > 0
    fetched = apis["Fetch"]["response_bytes"]
    assert fetched > N * 100  # the records came back through the proxy
    for name in ("Metadata", "CreateTopics"):
        assert apis[name]["requests"] >= 1, apis
    assert all(v["responses"] <= v["requests"] for v in apis.values())
