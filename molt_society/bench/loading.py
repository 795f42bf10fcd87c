"""A benchmark's society, stored through the local stack: fresh settings in a work directory, the dataset
produced into the stack until ClickHouse holds it, the work directory kept or removed afterwards.

Used by the benchmarks that measure what reads a stored society (``bench.dashboard``, ``bench.report``):
the events go the product's own way (stream processor, sink, embedded chDB), not straight into tables.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from molt_society.bench.producer import WHOLE, Part, spawn
from molt_society.runtime.settings import Settings, get_settings
from molt_society.schemas.topics import Role, topic_name
from molt_society.society.stack import LocalStack
from molt_society.warehouse.sink_http import query_http

err = Console(stderr=True)


def fresh_settings(tmp: Path, **update: Any) -> Settings:
    """This environment's settings on the local broker, chDB in ``tmp/clickhouse``, state in ``tmp/state``."""
    return get_settings().model_copy(
        update={
            "kafka_bootstrap": None,
            "clickhouse_url": f"chdb://{tmp / 'clickhouse'}",
            "state_dir": tmp / "state",
            **update,
        }
    )


def count(url: str, society: str) -> int:
    """Events of ``society`` stored, asked of the sink at ``url``."""
    return int(query_http(url, f"SELECT count() FROM events WHERE society = '{society}'").rows[0][0])


def load(stack: LocalStack, records: Path, want: int, part: Part = WHOLE) -> tuple[str, float]:
    """Start ``stack`` without agents, produce ``part`` of ``records`` into its society and wait until
    ``want`` events are stored; the sink's URL and when producing began."""
    society = stack.society
    stack.start(agents=False)
    url = stack.sink_url(timeout=120)
    began = time.time()
    proc = spawn(stack.bootstrap, topic_name(society, Role.ACTIONS), records, stack.settings.state_dir, part)
    while (n := count(url, society)) < want:
        if proc.poll() not in (None, 0) or stack.dead_children():
            raise RuntimeError(f"loading failed; see {stack.run_dir}")
        err.print(f"  stored {n:,}/{want:,}", end="\r")
        time.sleep(2)
    proc.wait()
    return url, began


def keep_or_remove(tmp: Path, keep: bool, society: str) -> None:
    """A benchmark's work dir: say where it is (``--keep``: chDB and state to look at) or remove it."""
    if keep:
        err.print(f"kept {tmp}: CLICKHOUSE_URL=chdb://{tmp / 'clickhouse'}, society {society}")
    else:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
