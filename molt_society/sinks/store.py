"""The sink's own ClickHouse client, on its one thread: the inserts, the resume queries, the embeddings.

chDB wants every call on a client from one thread, and an insert must never wait behind an outside query:
so everything the sink writes or needs for its resume runs here, one call at a time, while outside queries
have a thread and a read-only session of their own (``sinks.serving``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.warehouse.claim import drop_claim, write_claim
from molt_society.warehouse.client import StoreBusy, connect
from molt_society.warehouse.schema import ensure_schema

log = get_logger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

HELD_MESSAGES = ("Cannot lock file", "Unable to open the chdb engine")
"""How chDB reports a data directory held by another process (only as a failed start)."""


class DataFolderGone(RuntimeError):
    """The embedded ClickHouse's data folder was deleted or replaced under the running sink."""


class Store:
    """One ClickHouse client and the one thread that uses it."""

    def __init__(self, settings: Settings, society: str = "") -> None:
        self.settings = settings
        self.society = society
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clickhouse")
        self._client: Any = None
        self._folder: tuple[int, int] | None = None  # (device, inode) of the chDB folder at open

    def check_folder(self) -> None:
        """Raise ``DataFolderGone`` when the chDB folder opened is no longer there (deleted, moved or
        replaced): chDB then goes on accepting inserts into files nobody will find, and nothing else
        reports it. Nothing on a server."""
        path = self.settings.chdb_path
        if path is None or self._folder is None:
            return
        try:
            st = os.stat(path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            now = None
        if now != self._folder:
            raise DataFolderGone(
                f"ClickHouse's data folder {path} was {'deleted' if now is None else 'replaced'} while the "
                "sink ran: nothing written now would be kept, so nothing is written (the batch stays "
                "uncommitted in Kafka); restore the folder or point CLICKHOUSE_URL elsewhere"
            )

    async def run(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(client, *args, **kwargs)`` on the ClickHouse thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, lambda: fn(self._client, *args, **kwargs)
        )

    def _open(self) -> None:
        self._client = connect(self.settings.clickhouse_url)
        ensure_schema(self._client)
        if self.settings.chdb_path is not None:
            st = os.stat(self.settings.chdb_path)
            self._folder = (st.st_dev, st.st_ino)

    async def open(self, patience: float = 30.0) -> None:
        """Open ClickHouse and apply the schema; while another process holds the chDB directory only
        briefly (a dashboard reading a stored society releases it after each refresh), keep trying for
        ``patience`` seconds. The directory is claimed first (``warehouse.claim``): such readers then stop
        reopening it and wait for this sink's ``/query``."""
        deadline = time.monotonic() + patience
        if self.settings.chdb_path is not None:
            write_claim(self.settings.chdb_path, self.society)
        loop = asyncio.get_running_loop()
        while True:
            try:
                await loop.run_in_executor(self._executor, self._open)
                return
            except Exception as exc:
                # a directory held by another process: ``StoreBusy`` when the holder is known, else
                # chDB's failed start (the lock message goes to stderr); retried for a while either way
                held = isinstance(exc, StoreBusy) or any(m in str(exc) for m in HELD_MESSAGES)
                if self.settings.chdb_path is None or not held or time.monotonic() > deadline:
                    if self.settings.chdb_path is not None:
                        drop_claim(self.settings.chdb_path)
                    raise
                log.warning("sink.chdb_busy", path=str(self.settings.chdb_path), retry_in_s=0.5)
                await asyncio.sleep(0.5)

    async def close(self) -> None:
        """Close the client (on its thread) and end the thread."""

        def close(client: Any) -> None:
            if client is not None:
                client.close()
                self._client = None

        await self.run(close)
        self._executor.shutdown(wait=True)
        if self.settings.chdb_path is not None:
            drop_claim(self.settings.chdb_path)


def warm_up(client: Any) -> None:
    """One insert into a temporary table, on the insert thread, while the consumer joins its group: a
    process's first insert costs about 250 ms more than the next ones (chDB, measured), and it would
    otherwise be the first event's. Best effort: a failure only says so."""
    began = time.monotonic()
    try:
        client.command("CREATE TEMPORARY TABLE IF NOT EXISTS _sink_warm_up (x UInt8)")
        client.insert("_sink_warm_up", [[1]], column_names=["x"])
        client.command("DROP TEMPORARY TABLE IF EXISTS _sink_warm_up")
    except Exception as exc:
        log.info("sink.warm_up_skipped", error=repr(exc))
        return
    log.info("sink.warmed_up", seconds=round(time.monotonic() - began, 3))
