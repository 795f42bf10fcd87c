"""Opening ClickHouse: the embedded chDB engine or a server, by URL. The only caller of ``get_client``.

chDB note: the embedded engine (``chdb:///path``) allows ONE engine per process, and another process
cannot open the same data directory while it is in use. Whatever else needs the data while the sink runs
(the CLI, a dashboard) must ask the sink's HTTP endpoint, or use a ClickHouse server. All calls on a chDB
client must come from one thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import clickhouse_connect


def connect(url: str) -> Any:
    """A clickhouse-connect client for ``url``.

    ``chdb:///abs/path`` opens the embedded engine on that directory (created if missing);
    ``http(s)://user:pass@host:port/db`` connects to a server. Datetimes come back timezone-aware (UTC).
    Call it, and use the client, from one thread only (chDB requirement; harmless for a server).
    """
    if url.startswith("chdb:"):
        location = url.removeprefix("chdb://")
        if location and location != "memory" and not location.startswith(("memory/", ":memory:")):
            Path(location).mkdir(parents=True, exist_ok=True)
    elif not url.startswith(("http://", "https://")):
        raise ValueError(f"unsupported ClickHouse URL {url!r}: use chdb:///path or http(s)://host:port/db")
    return clickhouse_connect.get_client(dsn=url, tz_mode="aware")
