"""The society's ClickHouse schema: the sink's tables and the studies' diagnostics as views (``*.sql`` here).

Applied by the sink at start (``ensure_schema``, idempotent), and by whatever opens an empty warehouse
(the report on a fresh chDB directory, the tests).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

_STATEMENT_END = re.compile(r";[ \t]*$", re.MULTILINE)

SCHEMA_FILES = (
    "tables.sql",
    "diagnostics.sql",
    "molt_dynamics.sql",
    "superminds.sql",
    "patterns.sql",
    "experiments.sql",
)
"""Applied in this order: the sink's tables and views, then the studies' diagnostics as views."""


def schema_statements() -> list[str]:
    """The statements of ``SCHEMA_FILES``, in order, without the ones that are only comments."""
    statements = []
    for name in SCHEMA_FILES:
        text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
        for chunk in _STATEMENT_END.split(text):
            code = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("--"))
            if code.strip():
                statements.append(chunk.strip())
    return statements


RENAMED_METRICS = {
    "cascade_size_powerlaw": "thread_comments_powerlaw",
    "cascade_participants_powerlaw": "thread_participants_powerlaw",
}
"""Streaming metrics stored under an older name (issue 14): the power-law fits of comments and participants
per thread, which are not the Molt Dynamics cascades."""


def ensure_schema(client: Any) -> None:
    """Create the sink's tables and views if they do not exist (idempotent), and rename old metric rows."""
    for statement in schema_statements():
        client.command(statement)
    rename_old_metrics(client)


def rename_old_metrics(client: Any) -> int:
    """Rewrite rows stored under an old metric name (``RENAMED_METRICS``) to the new name, then delete them.

    The copy keeps ``metric_id``, window and offsets, so the sink's resume point and deduplication are
    unchanged, and a copy made twice (a crash between the two statements) is one row under ``FINAL``.
    Nothing runs when no old row is stored: no mutation is queued at every start. Returns the rows renamed.
    """
    old = ", ".join(f"'{name}'" for name in RENAMED_METRICS)  # constants of this module, not input
    found = int(client.command(f"SELECT count() FROM metrics WHERE metric IN ({old})") or 0)
    if found == 0:
        return 0
    cases = " ".join(f"WHEN '{a}' THEN '{b}'" for a, b in RENAMED_METRICS.items())
    new_name = f"CASE metric {cases} END"
    client.command(
        "INSERT INTO metrics (metric_id, society, metric, window_start, window_end, dim, value, emitted_at, "
        "_topic, _partition, _offset, _inserted_at) "
        f"SELECT metric_id, society, {new_name}, window_start, window_end, dim, value, emitted_at, "
        f"_topic, _partition, _offset, _inserted_at FROM metrics WHERE metric IN ({old})"
    )
    client.command(f"ALTER TABLE metrics DELETE WHERE metric IN ({old}) SETTINGS mutations_sync = 2")
    log.info("schema.metrics_renamed", rows=found, names=RENAMED_METRICS)
    return found
