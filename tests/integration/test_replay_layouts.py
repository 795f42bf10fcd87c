"""The community's archive layouts replayed through the real stack (broker, stream worker, sink, chDB):
the store holds exactly what the generated archive holds (posts, comments, authors, the deepest comment,
per the generator's manifest) and exactly the events the importer makes of it, each once.

``society replay`` runs ``load_source`` (the import sorted on disk) then ``replay_source``; this test calls
the same two. The 300,000-post version is ``python -m molt_society.bench.archive`` (BENCHMARKS.md).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from stack_helpers import make_settings

from molt_society.bench.archive import STORED_SQL
from molt_society.bench.archive_gen import generate
from molt_society.importers import import_path
from molt_society.replay.source import load_source
from molt_society.society.replay_run import replay_loading, replay_source
from molt_society.warehouse.reader import open_reader

pytestmark = pytest.mark.integration

FILES = {"observatory-sqlite": "observatory.sqlite", "posts-full-json": "posts_full.json"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    out = tmp_path_factory.mktemp("gen")
    return out, {m["layout"]: m for m in generate(out, 1_500, 3, sorted(FILES))}


@pytest.mark.parametrize("layout", sorted(FILES))
def test_a_layout_replays_exactly_what_it_holds(
    broker: str, tmp_path: Path, archive: tuple[Path, dict[str, dict[str, Any]]], layout: str
) -> None:
    folder, manifests = archive
    path = folder / FILES[layout]
    settings = make_settings(broker, tmp_path, window_seconds=3600.0)
    society = layout.replace("-", "_")
    if layout == "observatory-sqlite":
        with load_source(path) as source:
            assert source.events.spill.runs == 0 or len(source.events) > 200_000
            stats = replay_source(settings, source, society=society, speed=None)
    else:  # as ``society replay`` does a dump: the stack starts while the dump is imported
        with contextlib.ExitStack() as held:
            stats = replay_loading(
                settings,
                None,
                lambda: held.enter_context(load_source(path)),
                society=society,
                speed=None,
                early=True,
            )
    expected_ids = {str(e.event_id) for e in import_path(path, "x").events}
    assert stats.events == len(expected_ids)
    reader = open_reader(settings, society)
    try:
        row = reader.query(STORED_SQL.format(society=society)).rows[0]
        stored_ids = reader.query(
            f"SELECT toString(event_id), count() FROM events WHERE society = '{society}' GROUP BY event_id"
        ).rows
    finally:
        reader.close()
    m = manifests[layout]
    posts, comments, authors, deepest, agents, follows, events = (int(v) for v in row)
    assert (posts, comments, authors, deepest) == (
        m["posts"],
        m["comments"],
        m["authors"],
        m["deepest_comment"],
    )
    assert {r[0] for r in stored_ids} == expected_ids
    assert events == len(expected_ids)
    assert all(int(r[1]) == 1 for r in stored_ids)  # each event stored once, no FINAL needed
    if layout == "observatory-sqlite":
        assert (agents, follows) == (m["agents_listed"], m["follows"])
