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


def test_a_new_run_of_a_stored_society_is_refused_before_anything_starts(store: Path) -> None:
    """A second ``society run --society alpha`` would write a new history over alpha's: refused, naming
    the commands that keep the record; nothing is deleted."""
    res = CliRunner().invoke(main, ["run", "--society", "alpha", "--ticks", "3", "--no-dashboard"])
    assert res.exit_code == 1
    assert "society 'alpha' is already stored" in res.output
    assert "(3 events)" in res.output
    assert "society run --resume alpha" in res.output
    assert "--replace" in res.output
    assert "alpha (3 events)" in CliRunner().invoke(main, ["report", "gamma"]).output


def test_replace_deletes_every_row_of_the_society_and_none_of_another(store: Path) -> None:
    from molt_society.society.stored import check_new_society, stored_events

    s = get_settings()
    assert check_new_society(s, "alpha", replace=True) == 3
    assert stored_events(s, "alpha") == 0
    assert stored_events(s, "beta") == 2
    assert check_new_society(s, "alpha", replace=False) == 0  # a name the store no longer holds is free


def test_the_next_generation_follows_the_recorded_one(store: Path) -> None:
    """A replaced society's topics get a new generation, so the purged rows' deduplication tokens
    (``topic:partition:first-last``) cannot drop the new run's inserts."""
    import json

    from molt_society.society.fork import config_path
    from molt_society.society.stored import next_generation

    s = get_settings()
    assert next_generation(s, "alpha") > 1_000_000_000  # no recorded run: the wall clock's seconds
    path = config_path(s, "alpha")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"generation": 4}))
    assert next_generation(s, "alpha") == 5


def test_export_and_dashboard_of_an_unknown_society_name_the_stored_ones(store: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["export", "gamma", "--out", str(tmp_path / "g.jsonl")])
    assert res.exit_code == 1
    assert "'gamma' has no events" in res.output
    assert "alpha (3 events), beta (2 events)" in res.output
    res = CliRunner().invoke(main, ["dashboard", "--society", "gamma", "--port", "0"])
    assert res.exit_code == 1
    assert "holds no society 'gamma'" in res.output
    assert "alpha (3 events)" in res.output


def test_sql_names_the_store_it_answered_from(store: Path) -> None:
    res = CliRunner().invoke(main, ["sql", "SELECT count() FROM events"])
    assert res.exit_code == 0, res.output
    assert f"1 row(s) from chdb://{store}" in res.output.replace("\n", "")


def test_a_stopped_run_is_advised_to_resume_not_to_fork() -> None:
    from molt_society.society.cli import _finish_advice

    assert _finish_advice("x", 300) == "Finish it (to tick 300) with: society run --resume x"
    assert "society run --resume x --ticks N" in _finish_advice("x", None)
    assert "--from" not in _finish_advice("x", None)


def test_a_reader_never_takes_the_answers_of_a_sink_serving_another_store(tmp_path: Path) -> None:
    """The CLI found any running sink in the state folder; a sink of another chDB directory answers from
    another record, so only the sink that serves the reader's store counts."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from molt_society.warehouse.sink_http import STATE_FILE, running_sink_url

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        state = tmp_path / "state"
        (state / "other").mkdir(parents=True)
        mine, theirs = tmp_path / "mine", tmp_path / "theirs"
        doc = {"pid": 1, "url": url, "store": str(theirs.resolve())}
        (state / "other" / STATE_FILE).write_text(json.dumps(doc))
        assert running_sink_url(state, None, mine) is None
        assert running_sink_url(state, None, theirs) == url
        assert running_sink_url(state, "other", None) == url  # a ClickHouse server: no store to match
    finally:
        server.shutdown()
