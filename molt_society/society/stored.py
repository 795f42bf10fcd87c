"""Which societies a store holds, and the check that a new run does not write into one of them.

A society's rows are found by its name: a second ``society run --society X`` on a store that holds X
would write a new history on top of the old one (its sink finds the old rows at the new topics' offsets
and stops; what it had not stored is lost). ``check_new_society`` refuses that before anything starts,
naming the commands that keep the record, or deletes the old rows first when asked (``--replace``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from molt_society.runtime.settings import Settings
from molt_society.warehouse import quoted


class SocietyTaken(Exception):
    """The store already holds the society a new run would create."""


def stored_societies(wh: Any) -> list[tuple[str, int, Any, Any]]:
    """(name, events, first, last event time) of every society the store holds, by name."""
    rows = wh.query(
        "SELECT society, count(), min(occurred_at), max(occurred_at) FROM events FINAL "
        "GROUP BY society ORDER BY society"
    ).rows
    return [(str(r[0]), int(r[1]), r[2], r[3]) for r in rows]


def held_line(held: list[tuple[str, int, Any, Any]]) -> str:
    """One line naming the societies a store holds (``society list`` shows them in full)."""
    if not held:
        return "it holds none yet (run one: society run, or import one: society replay)"
    return "it holds: " + ", ".join(f"{n} ({e:,} events)" for n, e, _, _ in held) + " (society list)"


def stored_events(settings: Settings, society: str) -> int:
    """How many events of ``society`` the store of ``settings`` holds (through a running sink if one
    serves it)."""
    from molt_society.report.warehouse_source import open_warehouse
    from molt_society.warehouse.reader import NoStore

    try:
        wh = open_warehouse(settings)
    except NoStore:  # a store not created yet holds nothing
        return 0
    try:
        rows = wh.query(f"SELECT count() FROM events WHERE society = {quoted(society)}").rows
    finally:
        wh.close()
    return int(rows[0][0])


def check_new_society(settings: Settings, society: str, *, replace: bool) -> int:
    """Refuse (``SocietyTaken``) a new run of a society the store holds, or with ``replace`` delete its
    rows from every table first; the number of events deleted."""
    held = stored_events(settings, society)
    if not held:
        return 0
    if not replace:
        raise SocietyTaken(
            f"society {society!r} is already stored in {settings.clickhouse_url} ({held:,} events). "
            f"Finish its run with `society run --resume {society}` (add --ticks N to go N ticks further), "
            f"fork it under a new name with `society run --from {society} --at TICK --ticks N --society NEW`"
            ", or delete it and start again with --replace"
        )
    from molt_society.warehouse.client import connect
    from molt_society.warehouse.purge import purge_society
    from molt_society.warehouse.schema import ensure_schema

    client = connect(settings.clickhouse_url)
    try:
        ensure_schema(client)
        purge_society(client, society)
    finally:
        client.close()
    return held


def next_generation(settings: Settings, society: str) -> int:
    """The topic generation of a society run again after its rows were purged: one more than the last
    run's (as its configuration recorded it).

    A purge deletes the rows but not the tables' insert deduplication log, which remembers the sink's
    tokens (``topic:partition:first-last``); a rerun on the same topic names and offsets would have its
    inserts dropped as duplicates. Another generation qualifies the topic in the tokens and ``_topic``
    (``<topic>@g<n>``, ``sinks.resume.Generation``), so they never collide with an earlier run's. Without
    a recorded configuration (its state folder removed) the wall clock's seconds are the generation."""
    from molt_society.society.fork import config_path

    path = config_path(settings, society)
    try:
        return int(json.loads(path.read_text()).get("generation") or 0) + 1
    except (OSError, ValueError):
        return int(time.time())


def held_by(settings: Settings) -> str:
    """``held_line`` of the store of ``settings`` (a line for an error about a society it does not hold);
    says so when the store cannot be read."""
    from molt_society.report.warehouse_source import open_warehouse
    from molt_society.warehouse import QueryError

    try:
        wh = open_warehouse(settings)
        try:
            return held_line(stored_societies(wh))
        finally:
            wh.close()
    except QueryError as exc:
        return f"it cannot be read ({exc})"


def check_stored(settings: Settings, society: str) -> None:
    """Raise ``SocietyUnknown`` when the store of ``settings`` holds no event of ``society``."""
    if not stored_events(settings, society):
        raise SocietyUnknown(
            f"the store {settings.clickhouse_url} holds no society {society!r}; {held_by(settings)}"
        )


class SocietyUnknown(Exception):
    """The store holds no event of the society a command names."""
