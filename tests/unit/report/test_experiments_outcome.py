"""report.experiments.outcome: an experiment's effects, its JSON and HTML, from rows in a real chDB.

Every test writes ``experiments``, ``metrics`` and ``events`` rows into a fresh chDB directory by INSERT
(the ``experiments`` DDL as the runner's issue states it) and builds the result through the project's
reader (``warehouse.open_reader``: a read-only session). Expected values are computed here from the rows
inserted, with plain Python.
"""

from __future__ import annotations

import json
import math
import uuid
import zlib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from molt_society.report.experiments.data import DIAGNOSTICS, bind
from molt_society.report.experiments.outcome import (
    RESULT_HTML,
    RESULT_JSON,
    NoResult,
    build_result,
    result_json,
    write_result,
)
from molt_society.report.experiments.page import render_result_html
from molt_society.runtime.settings import Settings
from molt_society.warehouse import open_reader
from molt_society.warehouse.client import connect
from molt_society.warehouse.schema import ensure_schema

FORK = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
RESAMPLES = 2_000  # enough for the known answers here, and quick


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Settings, Any]]:
    settings = Settings(clickhouse_url=f"chdb://{tmp_path / 'ch'}", state_dir=tmp_path / "state")
    client = connect(settings.clickhouse_url)
    ensure_schema(client)
    try:
        yield settings, client
    finally:
        client.close()


def add_run(client: Any, experiment: str, arm: str, seed: int, society: str, *, control: bool,
            status: str = "done", version: int = 2, common: bool = False) -> None:  # fmt: skip
    """``common``: the arm runs the simulation seed every arm runs for ``seed`` (common random numbers);
    otherwise a seed of its own (independent replications)."""
    run_seed = 1000 + seed if common else (1000 + seed + 100 * zlib.crc32(arm.encode())) % 2**32
    client.insert(
        "experiments",
        [
            [
                experiment,
                arm,
                seed,
                society,
                int(control),
                run_seed,
                "base",
                200,
                FORK,
                30,
                status,
                5000,
                1,
                "ab" * 32,
                FORK,
                FORK + 30 * HOUR,
                12.5,
                version,
            ]
        ],
        column_names=[
            "experiment",
            "arm",
            "seed",
            "society",
            "control",
            "run_seed",
            "base_society",
            "fork_tick",
            "fork_at",
            "ticks",
            "status",
            "history_events",
            "history_verified",
            "spec_sha256",
            "started_at",
            "finished_at",
            "wall_seconds",
            "version",
        ],
    )


def add_metric(client: Any, society: str, metric: str, dim: str, values: Sequence[float | None],
               start: datetime = FORK) -> None:  # fmt: skip
    """One row per window (hours from ``start``); a None value leaves that window without a row."""
    rows = [
        [
            uuid.uuid4(),
            society,
            metric,
            start + i * HOUR,
            start + (i + 1) * HOUR,
            dim,
            float(v),
            datetime.now(UTC),
            "t",
            0,
            i,
        ]
        for i, v in enumerate(values)
        if v is not None
    ]
    client.insert(
        "metrics",
        rows,
        column_names=[
            "metric_id",
            "society",
            "metric",
            "window_start",
            "window_end",
            "dim",
            "value",
            "emitted_at",
            "_topic",
            "_partition",
            "_offset",
        ],
    )


def add_events(client: Any, society: str, events: Sequence[tuple[str, str, str, datetime]],
               targets: Sequence[tuple[str, str]] = ()) -> None:  # fmt: skip
    """Events (type, actor, post_id, occurred_at); ``targets`` (target_type, target_id) per event if given."""
    rows = []
    for i, (etype, actor, post_id, at) in enumerate(events):
        ttype, tid = targets[i] if targets else ("", "")
        rows.append([uuid.uuid4(), society, etype, 1, actor, at, post_id, ttype, tid, "{}", "t", 0, i])
    client.insert(
        "events",
        rows,
        column_names=[
            "event_id",
            "society",
            "type",
            "schema_version",
            "actor",
            "occurred_at",
            "post_id",
            "target_type",
            "target_id",
            "body",
            "_topic",
            "_partition",
            "_offset",
        ],
    )


def scalar_experiment(client: Any, name: str, arms: dict[str, list[float]], control: str = "control",
                      common: bool = False) -> None:  # fmt: skip
    """Arms x seeds societies whose active_agents has the given mean (3 windows: v-1, v, v+1)."""
    for arm, means in arms.items():
        for seed, v in enumerate(means):
            society = f"{name}.{arm}.s{seed}"
            add_run(client, name, arm, seed, society, control=arm == control, common=common)
            add_metric(client, society, "active_agents", "", [v - 1, v, v + 1])


def build(settings: Settings, name: str) -> dict[str, Any]:
    reader = open_reader(settings)
    try:
        return build_result(reader, name, resamples=RESAMPLES, series_resamples=500)
    finally:
        reader.close()


def entry(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return next(m for m in doc["metrics"] if m["key"] == key)


def test_a_shift_of_ten_is_significant_and_identical_arms_are_not(stack: tuple[Settings, Any]) -> None:
    settings, client = stack
    control = [1.0, 2.0, 3.0, 4.0, 5.0]
    scalar_experiment(client, "shift", {"control": control, "plus10": [v + 10 for v in control],
                                        "same": list(control)})  # fmt: skip
    client.close()
    doc = build(settings, "shift")
    e = entry(doc, "active_agents")
    arms = {a["arm"]: a for a in e["arms"]}
    assert [a["arm"] for a in e["arms"]] == ["control", "plus10", "same"]
    assert arms["control"]["mean"] == pytest.approx(3.0)
    assert arms["control"]["n"] == 5
    assert arms["control"]["ci_low"] < 3.0 < arms["control"]["ci_high"]
    effects = {x["arm"]: x for x in e["effects"]}
    plus = effects["plus10"]
    assert plus["difference"] == pytest.approx(10.0)
    assert plus["significant"]
    assert plus["significant_unadjusted"]
    assert (
        0 < plus["familywise_ci_low"] <= plus["ci_low"] < 10 < plus["ci_high"] <= plus["familywise_ci_high"]
    )
    # Hedges' g: d = 10 / sd(1..5) = 10 / sqrt(2.5), times J(8) = Gamma(4) / (2 Gamma(3.5))
    j8 = math.gamma(4) / (math.sqrt(4) * math.gamma(3.5))
    assert plus["hedges_g"] == pytest.approx(j8 * 10 / math.sqrt(2.5), rel=1e-9)
    same = effects["same"]
    assert same["difference"] == pytest.approx(0.0)
    assert same["ci_low"] <= 0 <= same["ci_high"]
    assert not same["significant"]
    assert not same["significant_unadjusted"]
    assert same["hedges_g"] == pytest.approx(0.0)


def test_the_familywise_interval_is_wider_and_names_its_m(stack: tuple[Settings, Any]) -> None:
    settings, client = stack
    scalar_experiment(client, "fw", {"control": [1.0, 2.5, 3.0, 4.5, 5.0], "a": [2.0, 3.0, 4.5, 5.0, 6.5],
                                     "b": [0.5, 1.0, 2.5, 4.0, 4.5]})  # fmt: skip
    client.close()
    doc = build(settings, "fw")
    c = doc["correction"]
    n_metrics = len(doc["metrics"])
    assert c["method"] == "bonferroni"
    assert c["treated_arms"] == 2
    assert c["metrics"] == n_metrics
    assert c["m"] == n_metrics * 2
    assert c["familywise_confidence"] == pytest.approx(1 - 0.05 / c["m"])
    assert "A/A" in c["note"]
    for x in entry(doc, "active_agents")["effects"]:
        assert x["familywise_ci_high"] - x["familywise_ci_low"] > x["ci_high"] - x["ci_low"]
        assert x["familywise_ci_low"] <= x["ci_low"]
        assert x["ci_high"] <= x["familywise_ci_high"]


def test_the_same_data_gives_byte_identical_json(stack: tuple[Settings, Any]) -> None:
    settings, client = stack
    scalar_experiment(client, "det", {"control": [1.1, 2.3, 2.9], "t": [1.7, 2.2, 3.8]})
    add_metric(client, "det.t.s0", "pagerank_top_share", "top1", [0.1, 1 / 3, None])
    client.close()
    first, second = result_json(build(settings, "det")), result_json(build(settings, "det"))
    assert first == second
    doc = json.loads(first)
    assert list(doc) == sorted(doc)
    assert entry(doc, "pagerank_top_share{top1}")["values"]["t"]["0"] == pytest.approx((0.1 + 1 / 3) / 2)


def test_malicious_names_are_data_in_sql_and_escaped_in_html(
    stack: tuple[Settings, Any], tmp_path: Path
) -> None:
    settings, client = stack
    evil_arm = "<script>alert('arm')</script>"
    evil_society = "x' OR 1=1 --<img src=x onerror=alert(1)>"
    evil_experiment = "e'); DROP TABLE metrics; --<b>"
    add_run(client, evil_experiment, "control", 0, "c0", control=True)
    add_run(client, evil_experiment, "control", 1, "c1", control=True)
    add_run(client, evil_experiment, evil_arm, 0, evil_society, control=False)
    add_run(client, evil_experiment, evil_arm, 1, evil_society + "2", control=False)
    for society, v in (("c0", 1.0), ("c1", 2.0), (evil_society, 5.0), (evil_society + "2", 6.0)):
        add_metric(client, society, "events_total", "", [v, v])
    client.close()
    html_path, json_path = write_result(settings, evil_experiment, tmp_path / "out")
    assert (html_path.name, json_path.name) == (RESULT_HTML, RESULT_JSON)
    doc = json.loads(json_path.read_bytes())
    assert doc["experiment"] == evil_experiment
    assert entry(doc, "events_total")["values"][evil_arm] == {"0": 5.0, "1": 6.0}  # the names found the rows
    html = html_path.read_text()
    for raw in (evil_arm, evil_society, evil_experiment, "<script", "<img", "<b>"):
        assert raw not in html
    assert "&lt;script&gt;alert(&#x27;arm&#x27;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script" not in render_result_html(doc)


def test_bind_sends_only_hex_for_strings_and_round_trips(stack: tuple[Settings, Any]) -> None:
    _settings, client = stack
    value = "a'b\\c\"; DROP TABLE events; -- {x:String} ☃"
    sql = bind(
        "SELECT {v:String} AS v, {n:Int64} AS n, {l:Array(String)} AS l", {"v": value, "n": -3, "l": [value]}
    )
    assert value not in sql
    assert "DROP" not in sql
    assert client.query(sql).result_rows == [(value, -3, [value])]
    with pytest.raises(KeyError):
        bind("SELECT {missing:String}", {})
    with pytest.raises(TypeError):
        bind("SELECT {n:Int64}", {"n": "1; DROP"})


def test_no_finished_society_or_no_control_is_an_error(stack: tuple[Settings, Any]) -> None:
    settings, client = stack
    add_run(client, "half", "control", 0, "h0", control=True, status="started")
    add_run(client, "noctl", "a", 0, "n0", control=False)
    client.close()
    with pytest.raises(NoResult, match="no finished society"):
        build(settings, "half")
    with pytest.raises(NoResult, match="0 control arms"):
        build(settings, "noctl")


def _post_fork_events(tag: str, fork: datetime) -> list[tuple[str, str, str, datetime]]:
    """Posts, comments and votes before and after the fork; comment counts per post differ by ``tag``."""
    before, after = fork - 2 * HOUR, fork + HOUR
    ev: list[tuple[str, str, str, datetime]] = [("post_created", "old", f"p{i}", before) for i in range(150)]
    ev += [("comment_created", "old", "p0", before)] * 40  # pre-fork: must not count
    n_posts = 130 if tag == "a" else 115
    ev += [("post_created", f"ag{i % 13}", f"q{i}", after) for i in range(n_posts)]
    # post-fork comments: q0 gets 30 (or 9), q1 gets 7, p5 (an old post) 4, q2..q111 one each: 113 posts
    big = 30 if tag == "a" else 9
    for post, n in [("q0", big), ("q1", 7), ("p5", 4)] + [(f"q{i}", 1) for i in range(2, 112)]:
        ev += [("comment_created", f"ag{(k * 7) % 17}", post, after) for k in range(n)]
    ev += [("vote_cast", f"ag{k % 5}", "q0", after) for k in range(25)]
    ev += [("vote_cast", "experiment", "q0", after)] * 50  # not an agent
    return ev


def test_metric_means_and_diagnostics_match_a_direct_computation(stack: tuple[Settings, Any]) -> None:
    settings, client = stack
    name = "real"
    series: dict[str, list[float | None]] = {
        "real.control.s0": [4.0, 6.0, 11.0, None],
        "real.control.s1": [5.0, 7.0, 8.0, 9.0],
        "real.moderated.s0": [2.0, 3.0, None, 4.0],
        "real.moderated.s1": [1.0, 1.0, 2.0, 3.0],
    }
    for society, values in series.items():
        arm, seed_number = society.split(".")[1], int(society[-1])
        add_run(client, name, arm, seed_number, society, control=arm == "control")
        add_metric(client, society, "mean_depth", "all", values)
        add_metric(client, society, "mean_depth", "all", [500.0, 500.0], start=FORK - 2 * HOUR)  # pre-fork
        add_metric(client, society, "events_total", "", [10.0, 10.0, 10.0, 10.0])
        add_metric(client, society, "thread_comments", "p1", [3.0, 4.0, 5.0, 6.0])  # per thread: skipped
        add_metric(client, society, "thread_comments_powerlaw", "alpha", [2.5, 2.7, None, None])
        add_metric(client, society, "thread_comments_powerlaw", "xmin", [1.0, 2.0, None, None])
    # removals only in one moderated society: the others count 0 in each of their windows
    add_metric(client, "real.moderated.s0", "removed", "post", [2.0, None, None, 1.0])
    for society in series:
        events = _post_fork_events("a" if society.endswith("s0") else "b", FORK)
        add_events(client, society, events)
    add_events(client, "real.moderated.s1",
               [("content_removed", "moderator", "q0", FORK + HOUR)] * 2
               + [("content_removed", "moderator", "q1", FORK + HOUR),
                  ("content_removed", "moderator", "p0", FORK - HOUR)],
               targets=[("post", "q0"), ("post", "q0"), ("comment", "c9"), ("post", "p0")])  # fmt: skip
    client.close()
    doc = build(settings, name)

    depth = entry(doc, "mean_depth{all}")
    for society, values in series.items():
        arm, seed = society.split(".")[1], society[-1]
        defined = [v for v in values if v is not None]
        assert depth["values"][arm][seed] == pytest.approx(sum(defined) / len(defined), rel=1e-12)
    control_means = [sum(v for v in series[f"real.control.s{s}"] if v is not None)
                     / sum(v is not None for v in series[f"real.control.s{s}"]) for s in (0, 1)]  # fmt: skip
    assert depth["arms"][0]["mean"] == pytest.approx(sum(control_means) / 2, rel=1e-12)
    removed = entry(doc, "removed{post}")["values"]
    assert removed == {"control": {"0": 0.0, "1": 0.0}, "moderated": {"0": 0.75, "1": 0.0}}
    keys = {m["key"] for m in doc["metrics"]}
    assert "thread_comments_powerlaw{alpha}" in keys
    assert not any(k.startswith("thread_comments{") or k.endswith("{xmin}") for k in keys)

    # the series: windows at 0, 1, 2, 3 h after the fork; control's third window is the mean of 11 and 8
    s = depth["series"]
    assert s["offsets_s"] == [0.0, 3600.0, 7200.0, 10800.0]
    assert s["bands"]["control"]["mean"] == pytest.approx([4.5, 6.5, 9.5, 9.0])
    assert s["bands"]["moderated"]["mean"] == pytest.approx([1.5, 2.0, 2.0, 3.5])

    for society in series:
        arm, seed = society.split(".")[1], society[-1]
        tag = "a" if seed == "0" else "b"
        ev = _post_fork_events(tag, FORK)
        post_fork = [e for e in ev if e[3] >= FORK]
        per_post: dict[str, int] = {}
        for t, _, post, _ in post_fork:
            if t == "comment_created":
                per_post[post] = per_post.get(post, 0) + 1
        k = math.ceil(len(per_post) / 100)
        top_share = sum(sorted(per_post.values(), reverse=True)[:k]) / sum(per_post.values())
        per_actor: dict[str, int] = {}
        for t, actor, _, _ in post_fork:
            if actor != "experiment" and t in ("post_created", "comment_created", "vote_cast"):
                per_actor[actor] = per_actor.get(actor, 0) + 1
        actions = sorted(per_actor.values(), reverse=True)
        posts = sum(t == "post_created" for t, *_ in post_fork)
        comments = sum(t == "comment_created" for t, *_ in post_fork)
        assert entry(doc, "top1pct_posts_comment_share")["values"][arm][seed] == pytest.approx(top_share)
        assert entry(doc, "top10_agents_action_share")["values"][arm][seed] == pytest.approx(
            sum(actions[:10]) / sum(actions)
        )
        assert entry(doc, "comments_per_post")["values"][arm][seed] == pytest.approx(comments / posts)
    assert entry(doc, "removed_posts")["values"]["moderated"] == {"0": 0.0, "1": 1.0}  # q0 once; p0 pre-fork
    assert entry(doc, "removed_comments")["values"]["moderated"] == {"0": 0.0, "1": 1.0}
    assert {x["society"]: x["windows"] for x in doc["societies"]}["real.control.s0"] == 4


def test_the_page_has_a_table_and_a_banded_chart_per_streaming_metric(stack: tuple[Settings, Any]) -> None:
    settings, client = stack
    scalar_experiment(client, "page", {"control": [1.0, 2.0, 3.0], "t": [4.0, 5.0, 7.0]})
    client.close()
    html = render_result_html(build(settings, "page"))
    assert html.count('<table class="data effects">') == len(DIAGNOSTICS) + 1  # and active_agents
    assert html.count("<svg") == 1
    assert html.count('class="mark band"') == 2  # one band per arm
    assert "Content-Security-Policy" in html
    assert "<script" not in html
    assert "A/A experiment" in html


def test_common_seeds_pair_the_differences_by_seed(stack: tuple[Settings, Any]) -> None:
    """Arms that ran the same seeds (common random numbers) are compared seed by seed: a shift of about 1
    on values spread over 1..8 is clear paired (the per-seed differences hardly vary) and lost unpaired."""
    settings, client = stack
    control = [1.0, 5.0, 2.0, 8.0, 3.0]
    shift = [1.0, 1.2, 0.9, 1.1, 1.0]
    treated = [c + d for c, d in zip(control, shift, strict=True)]
    scalar_experiment(client, "paired", {"control": control, "shifted": treated}, common=True)
    scalar_experiment(client, "unpaired", {"control": control, "shifted": treated}, common=False)
    client.close()
    paired, unpaired = build(settings, "paired"), build(settings, "unpaired")
    assert paired["bootstrap"]["paired"] is True
    assert unpaired["bootstrap"]["paired"] is False
    p = entry(paired, "active_agents")["effects"][0]
    u = entry(unpaired, "active_agents")["effects"][0]
    assert p["difference"] == pytest.approx(sum(shift) / 5)
    assert u["difference"] == pytest.approx(sum(shift) / 5)
    assert p["significant_unadjusted"]
    assert min(shift) - 0.01 <= p["ci_low"] < p["ci_high"] <= max(shift) + 0.01  # within the differences
    assert not u["significant_unadjusted"]
    assert u["ci_low"] < 0 < u["ci_high"]


def test_a_ban_at_a_fork_inside_a_window_is_counted(stack: tuple[Settings, Any]) -> None:
    """Issue 29: a fork at 16:40 with hourly windows put the 10 bans of the fork tick in the window that
    started at 16:00, and the result (windows starting at or after the fork) showed banned 0 [0, 0]. The
    window holding the fork now counts whole; its part before the fork is the base's in every arm."""
    settings, client = stack
    start = FORK - timedelta(minutes=40)  # windows 11:20-12:20, 12:20-13:20, ...; the fork at 12:00
    for seed in range(5):
        for arm, bans in (("control", 0.0), ("moderated", 10.0)):
            society = f"ban.{arm}.s{seed}"
            add_run(client, "ban", arm, seed, society, control=arm == "control", common=True)
            add_metric(client, society, "banned", "", [bans, 0.0, 0.0], start=start)
            add_metric(client, society, "active_agents", "", [50.0, 50.0 + seed, 50.0], start=start)
            # a window that ended at the fork is the base's alone: never counted
            add_metric(client, society, "banned", "", [99.0], start=FORK - HOUR)  # 11:00-12:00
    client.close()
    doc = build(settings, "ban")
    e = entry(doc, "banned")
    arms = {a["arm"]: a for a in e["arms"]}
    assert arms["moderated"]["mean"] == pytest.approx(10 / 3)  # 10 bans over the 3 windows since the fork
    assert arms["control"]["mean"] == pytest.approx(0.0)
    effect = next(x for x in e["effects"] if x["arm"] == "moderated")
    assert effect["difference"] == pytest.approx(10 / 3)
    assert effect["ci_low"] > 0
    assert e["series"]["offsets_s"][0] == pytest.approx(-40 * 60)
