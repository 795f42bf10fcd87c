"""``society list`` names the societies a store holds, and ``society report`` of a name the store does not
hold is an error naming them (issue 29: it wrote an empty report and exited 0)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from stored_events import open_chdb, store_events

from molt_society.runtime.settings import get_settings
from molt_society.schemas.events import PostCreated, PostCreatedBody
from molt_society.schemas.ids import uuid7
from molt_society.society.cli import main

T0 = datetime(2026, 1, 28, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    ch = tmp_path / "ch"
    client = open_chdb(str(ch))
    events = []
    for society, n in (("alpha", 3), ("beta", 2)):
        for i in range(n):
            t = T0 + timedelta(hours=i)
            body = PostCreatedBody(post_id=f"{society}{i}", submolt="general", title="t", content="c")
            events.append(
                PostCreated(event_id=uuid7(t), society=society, actor="a", occurred_at=t, body=body)
            )
    store_events(client, events)
    monkeypatch.setenv("CLICKHOUSE_URL", f"chdb://{ch}")
    monkeypatch.setenv("SOCIETY_STATE_DIR", str(tmp_path / "state"))
    get_settings.cache_clear()
    yield ch
    client.close()
    get_settings.cache_clear()


def test_list_names_each_society_with_its_events_and_span(store: Path) -> None:
    res = CliRunner().invoke(main, ["list"])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.output.splitlines() if "alpha" in line or "beta" in line]
    assert len(lines) == 2
    assert "3" in lines[0]
    assert "2026-01-28 02:00:00" in lines[0]
    assert "2" in lines[1]
    assert "2026-01-28 01:00:00" in lines[1]


def test_a_report_of_a_society_the_store_does_not_hold_names_those_it_does(store: Path) -> None:
    res = CliRunner().invoke(main, ["report", "gamma", "--only", "activity"])
    assert res.exit_code == 1
    assert "holds no society 'gamma'" in res.output
    assert "alpha (3 events)" in res.output
    assert "beta (2 events)" in res.output


def test_a_report_to_a_file_prints_its_progress_as_lines(store: Path, tmp_path: Path) -> None:
    """Output that is not a terminal gets a timestamped line per step (no spinner that prints nothing)."""
    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        main, ["report", "alpha", "--only", "activity", "--no-embeddings", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    stamped = [line for line in lines if re.match(r"\d\d:\d\d:\d\d alpha: ", line)]
    assert any(line.endswith("alpha: starting") for line in stamped)
    assert any(re.search(r"alpha: Activity: \d+\.\d s$", line) for line in stamped)
    assert out.exists()
