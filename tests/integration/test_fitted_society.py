"""A society fitted to real MoltBook data runs on the real stack exactly as it runs offline.

``society calibrate --fit`` on 400 posts of the real crawl (a short fit), then the fitted society on the
local broker, stream workers, agent workers and sink: every event the agents emitted is stored once,
nothing is dead-lettered (the fitted text stays within the event contract's bounds), and the stored
events are those of the same fitted society run in one process without Kafka (``agents.offline``).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from stack_helpers import (
    CRAWL_ARCHIVE,
    emitted_event_ids,
    make_settings,
    needs_crawl,
    offline_ids,
    run_ticks,
    running_stack,
    sql,
)

from molt_society.agents.behaviour import load_behaviour
from molt_society.society.cli import main

pytestmark = needs_crawl()
POSTS = 400
TICKS = 48


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fit")
    dump = root / "posts"
    dump.mkdir()
    with tarfile.open(CRAWL_ARCHIVE) as tar:
        taken = 0
        for member in tar:
            if member.isfile() and member.name.endswith(".json"):
                member.name = Path(member.name).name
                tar.extract(member, dump, filter="data")
                taken += 1
                if taken == POSTS:
                    break
    out = root / "fitted.toml"
    result = CliRunner().invoke(
        main,
        ["calibrate", "--fit", str(dump), "--out", str(out), "--activity-evals", "20", "--evals", "2"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "in band" in result.output or "outside" in result.output
    return out


def test_the_fitted_file_records_its_dump_and_every_moment(fitted: Path) -> None:
    b = load_behaviour(fitted)
    assert b.population is not None
    assert b.text_model_path() is not None
    assert b.text_model_path().is_file()  # type: ignore[union-attr]
    fit = b.fit or {}
    assert fit["posts"] == POSTS
    rows = {r["key"]: r for r in fit["moments"]}
    assert {"top_level_share", "reciprocity", "first_comment_median_s"} <= set(rows)
    assert all(isinstance(r["in_band"], bool) for r in rows.values())


def test_a_fitted_society_runs_on_the_stack_as_offline(
    fitted: Path, broker: str, tmp_path: Path, society_name: str
) -> None:
    b = load_behaviour(fitted)
    assert b.population is not None
    settings = make_settings(
        broker,
        tmp_path,
        behaviour_file=fitted,
        agents=b.population.agents,
        tick_seconds=3600.0,  # rates are per hour: any tick length runs the fitted society
        sim_start=b.population.start,
        window_seconds=3600.0,
        feed_size=b.population.feed_size or 15,
    )
    with running_stack(settings, society_name) as stack:
        run_ticks(stack, TICKS)
        stored = [
            r[0]
            for r in sql(stack, f"SELECT toString(event_id) FROM events WHERE society = '{society_name}'")
        ]
        dead = sql(stack, f"SELECT count() FROM dead_letters WHERE society = '{society_name}'")[0][0]
        texts = sql(
            stack,
            f"SELECT count(), countIf(type = 'comment_created') FROM events WHERE society = '{society_name}' "
            "AND type IN ('post_created', 'comment_created')",
        )[0]
    emitted = emitted_event_ids(broker, society_name)
    assert dead == 0
    assert len(stored) == len(set(stored))
    assert set(stored) == set(emitted)
    assert int(texts[0]) > 0
    assert offline_ids(settings, society_name, TICKS) == set(stored)
