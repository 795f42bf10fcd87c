"""The web dashboard in real headless Chromium against a real stack (Tansu broker, chDB, workers)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from stack_helpers import ARTIFACTS, browser_page, make_settings, run_ticks, running_stack, sql

from molt_society.algorithms.feeds import hot_score
from molt_society.runtime import kafka
from molt_society.runtime.brokers import start_broker
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.schemas import events as E
from molt_society.schemas.ids import uuid7
from molt_society.schemas.topics import Role, topic_name
from molt_society.schemas.wire import encode_event

pytestmark = pytest.mark.integration

ALL_PANELS = ["activity", "threads", "cascades", "influence", "content", "health"]
ALL_OK = (
    "() => { const ps = [...document.querySelectorAll('[data-panel]')];"
    " return ps.length === 6 && ps.every(p => p.dataset.state === 'ok'); }"
)


def _seq(page: Any) -> int:
    return int(page.evaluate("() => Number(document.body.dataset.seq || 0)"))


def _wait_new_snapshots(page: Any, n: int = 2, timeout_ms: int = 30_000) -> None:
    target = _seq(page) + n
    page.wait_for_function(f"() => Number(document.body.dataset.seq || 0) >= {target}", timeout=timeout_ms)


def _kpi(page: Any, name: str) -> str:
    return str(page.get_attribute(f"[data-kpi={name}]", "data-value"))


class Clock(threading.Thread):
    """Drives the society's clock in the background, keeping what it returned or raised."""

    def __init__(self, stack: Any, ticks: int) -> None:
        super().__init__(daemon=True)
        self.stack, self.ticks = stack, ticks
        self.error: BaseException | None = None
        self.finished_at: float | None = None

    def run(self) -> None:
        try:
            run_ticks(self.stack, self.ticks)
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished_at = time.monotonic()


def test_dashboard_shows_a_live_society_and_every_figure_matches_its_sql(
    broker: str, tmp_path: Path, society_name: str
):
    s = society_name
    settings = make_settings(
        broker,
        tmp_path,
        agents=300,
        mode="realtime",
        tick_seconds=1.0,
        window_seconds=3.0,
        dashboard_port=0,
        dashboard_refresh_seconds=1.0,
    )
    with running_stack(settings, s, dashboard=True) as stack:
        url = stack.dashboard_url(timeout=60)
        assert url, "the stack's dashboard did not start"
        clock = Clock(stack, 40)
        clock.start()
        with browser_page() as page:
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            # Every panel renders with data while the society runs.
            page.wait_for_function(ALL_OK, timeout=120_000)
            assert page.locator("#conn").inner_text() == "dashboard connected"
            assert page.locator("#state").inner_text() == "running"
            assert page.locator("#broker").inner_text() == "broker ok"
            first = _kpi(page, "events")
            # A figure changes while the society runs.
            page.wait_for_function(
                f"() => document.querySelector('[data-kpi=events]').dataset.value !== {json.dumps(first)}",
                timeout=60_000,
            )
            changed_at = time.monotonic()
            clock.join(timeout=300)
            assert clock.error is None, clock.error
            assert clock.finished_at is not None
            assert changed_at < clock.finished_at
            _wait_new_snapshots(page, 2)

            # The drained society: the page's figures equal independent SQL over the raw tables.
            n_events = sql(stack, f"SELECT count() FROM events FINAL WHERE society = '{s}'")[0][0]
            assert int(_kpi(page, "events")) == n_events
            for name in ALL_PANELS:
                assert page.get_attribute(f"[data-panel={name}]", "data-state") == "ok", name

            batch_depths = sql(
                stack,
                f"SELECT max_depth, count() FROM threads WHERE society = '{s}' GROUP BY max_depth "
                "ORDER BY max_depth",
            )
            bars = page.eval_on_selector_all(
                "[data-part=depth-chart] rect.bar",
                "els => els.map(e => e.querySelector('title').textContent)",
            )
            assert bars == [f"{d}: {n}" for d, n in batch_depths]

            leaders = page.eval_on_selector_all(
                "[data-part=leaders] tbody tr", "rs => rs.map(r => r.children[1].textContent)"
            )
            expected_leaders = [
                r[0].split(":", 1)[1]
                for r in sql(
                    stack,
                    "SELECT dim FROM metrics FINAL WHERE society = '{s}' AND metric = 'pagerank_leader' "
                    "AND window_start = (SELECT max(window_start) FROM metrics FINAL "
                    "WHERE society = '{s}' AND metric = 'pagerank_leader') ORDER BY dim".replace("{s}", s),
                )
            ]
            assert leaders == expected_leaders
            assert leaders

            # Hot posts: Reddit's hot rank recomputed here in Python from the threads view.
            posts = sql(
                stack,
                "SELECT post_id, toUnixTimestamp64Micro(created_at), score FROM threads "
                f"WHERE society = '{s}'",
            )
            ranked = sorted(posts, key=lambda r: (-_hot(r[2], r[1]), r[0]))[:8]
            shown = page.eval_on_selector_all("ol.hot > li", "els => els.map(e => e.dataset.post)")
            assert shown == [r[0] for r in ranked]

            # The cascade chart is drawn from exactly the rows of the SQL the panel shows.
            page.click("#panel-cascades .sql-btn")
            shown_sql = page.inner_text("#panel-cascades .sql pre")
            api = json.loads(page.evaluate("() => fetch('/api/panels').then(r => r.text())"))
            cascades = next(p for p in api["panels"] if p["id"] == "cascades")
            assert shown_sql.strip() == cascades["queries"][0]["sql"].strip()
            ccdf_rows = sql(stack, shown_sql)
            dots = page.eval_on_selector_all("[data-part=ccdf-chart] circle", "els => els.length")
            assert dots == len(ccdf_rows) > 0
            assert page.locator("[data-part=ccdf-chart] path[data-series^='power law']").count() == 1

            # Health: lag from the broker, numbers not placeholders.
            for group in ("streams", "sink", "agents"):
                assert int(_kpi(page, f"lag_{group}")) >= 0

            # The clock stopped and the stack still runs: the rate counts to now (0, not the last rate),
            # and the page says that nothing is stored any more (within seconds, not never).
            page.wait_for_function(
                "() => document.querySelector('[data-kpi=rate]').dataset.value === '0'"
                " && !document.querySelector('#banner').hidden",
                timeout=60_000,
            )
            assert "Nothing stored for" in page.inner_text("#banner")
            assert page.locator("#state").inner_text() == "running, nothing stored lately"
            active = sql(
                stack,
                f"SELECT uniqExactIf(actor, type IN ('post_created', 'comment_created', 'vote_cast')) "
                f"FROM events FINAL WHERE society = '{s}'",
            )[0][0]
            assert int(_kpi(page, "agents")) == active  # the report's "active agents (ever)"

            page.click("ol.hot > li:first-child summary")
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            assert errors == [], errors
            stats = page.evaluate("() => window.__dashboard")
            assert stats["errors"] == 0
            assert stats["snapshots"] >= 3


def _hot(score: int, created_us: int) -> float:
    return hot_score(int(score), int(created_us))


AT = datetime(2026, 1, 28, 12, 0, tzinfo=UTC)
HOSTILE = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "<svg onload=\"window.__pwned = 'svg'\"></svg>",
    "\"><iframe src=javascript:window.__pwned='iframe'></iframe>",
    "<a href=\"javascript:window.__pwned='a'\">click</a> &lt;b&gt;bold&lt;/b&gt;",
]


def test_agent_written_text_is_shown_literally_and_runs_nothing(
    broker: str, tmp_path: Path, society_name: str
):
    s = society_name
    settings = make_settings(broker, tmp_path, dashboard_port=0, dashboard_refresh_seconds=1.0)
    title = " ".join(HOSTILE[:2])[:300]
    body = "\n".join(HOSTILE)
    reg = E.AgentRegistered(
        event_id=uuid7(AT), society=s, actor="mallory", occurred_at=AT, body={"name": HOSTILE[0]}
    )
    sub = E.SubmoltCreated(
        event_id=uuid7(AT), society=s, actor="mallory", occurred_at=AT, body={"submolt": "general"}
    )
    post = E.PostCreated(
        event_id=uuid7(AT),
        society=s,
        actor="mallory",
        occurred_at=AT,
        body={"post_id": "p1", "submolt": "general", "title": title, "content": body},
    )
    reply = E.CommentCreated(
        event_id=uuid7(AT),
        society=s,
        actor="trudy",
        occurred_at=AT,
        body={"comment_id": "c1", "post_id": "p1", "depth": 1, "content": HOSTILE[2] + HOSTILE[3]},
    )
    # A record that is dead-lettered with a reason quoting hostile input.
    bad = orjson.dumps({"event_id": HOSTILE[1], "type": "post_created", "society": s})

    async def produce() -> None:
        p = kafka.producer(broker, "control", keys=RecordKeys(settings.state_dir))
        await p.start()
        try:
            for ev in (reg, sub, post, reply):
                await p.send_and_wait(
                    topic_name(s, Role.ACTIONS), encode_event(ev), key=E.partition_key(ev).encode()
                )
            await p.send_and_wait(topic_name(s, Role.ACTIONS), bad, key=b"p1")
        finally:
            await p.stop()

    with running_stack(settings, s, agents=False, dashboard=True) as stack:
        url = stack.dashboard_url(timeout=60)
        assert url
        asyncio.run(produce())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            stored = sql(stack, f"SELECT count() FROM events WHERE society = '{s}'")[0][0]
            dead = sql(stack, f"SELECT count() FROM dead_letters WHERE society = '{s}'")[0][0]
            if stored >= 4 and dead >= 1:
                break
            time.sleep(0.3)
        assert (stored, dead) == (4, 1)
        with browser_page() as page:
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.add_init_script(
                "window.__violations = [];"
                "document.addEventListener('securitypolicyviolation',"
                " e => window.__violations.push(e.violatedDirective));"
            )
            page.goto(url)
            page.wait_for_function(
                "() => document.querySelectorAll('ol.hot > li').length === 1"
                " && document.querySelectorAll('[data-part=recent] tbody tr').length === 1",
                timeout=60_000,
            )
            page.click("ol.hot > li:first-child summary")
            assert page.inner_text("ol.hot summary .title") == title
            assert page.text_content("ol.hot .post-body") == body
            assert page.inner_text("ul.thread li .txt") == HOSTILE[2] + HOSTILE[3]
            reason = page.inner_text("[data-part=recent] tbody tr td:nth-child(3)")
            stored_reason = sql(stack, f"SELECT reason FROM dead_letters WHERE society = '{s}'")[0][0]
            assert reason == stored_reason
            _wait_new_snapshots(page, 2)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard-hostile-text.png"), full_page=True)
            # Nothing ran and no element came out of the text.
            assert page.evaluate("() => window.__pwned") is None
            assert dialogs == []
            injected = "#panels script, #panels img, #panels iframe, #panels a, #panels svg [onload]"
            assert page.locator(injected).count() == 0
            # The policy never had to block anything either: the text was never parsed as HTML.
            assert page.evaluate("() => window.__violations") == []


def test_dashboard_keeps_working_while_the_broker_is_unreachable(tmp_path: Path, society_name: str):
    s = society_name
    # a broker of its own to stop (SIGSTOP), of the kind this session's settings name: this process's
    # producers ask for what that broker has (idempotence on Kafka, none on Tansu)
    own = start_broker(Settings(), tmp_path)
    try:
        settings = make_settings(
            own.bootstrap, tmp_path, agents=200, dashboard_port=0, dashboard_refresh_seconds=1.0
        )
        with running_stack(settings, s, dashboard=True) as stack:
            url = stack.dashboard_url(timeout=60)
            assert url
            run_ticks(stack, 12)
            with browser_page() as page:
                page.goto(url)
                page.wait_for_function(ALL_OK, timeout=60_000)
                page.wait_for_function(
                    "() => document.querySelector('#broker').textContent === 'broker ok'", timeout=30_000
                )
                events = _kpi(page, "events")
                # (no clock runs here: the banner may already say that nothing is stored)
                assert "unreachable" not in page.inner_text("#banner")

                os.kill(own.pid, signal.SIGSTOP)  # the broker stops answering (nothing is lost)
                try:
                    # the banner may already be up saying that nothing is stored: wait for the broker's line
                    page.wait_for_function(
                        "() => !document.querySelector('#banner').hidden"
                        " && document.querySelector('#banner').textContent.includes('unreachable since')",
                        timeout=45_000,
                    )
                    banner = page.inner_text("#banner")
                    assert "unreachable since" in banner
                    assert own.bootstrap in banner
                    assert page.locator("#broker").inner_text() == "broker unreachable"
                    # The page keeps updating from ClickHouse while the broker is away.
                    _wait_new_snapshots(page, 3)
                    assert page.locator("#banner").is_visible()
                    assert _kpi(page, "events") == events
                    assert _kpi(page, "lag_sink") == ""  # unknown, not a stale number
                    for name in ALL_PANELS:
                        assert page.get_attribute(f"[data-panel={name}]", "data-state") == "ok", name
                finally:
                    os.kill(own.pid, signal.SIGCONT)
                page.wait_for_function(
                    "() => !document.querySelector('#banner').textContent.includes('unreachable')"
                    " && document.querySelector('#broker').textContent === 'broker ok'",
                    timeout=60_000,
                )
                assert _kpi(page, "lag_sink") != ""
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "dashboard-after-broker-outage.png"), full_page=True)
            assert stack.dead_children() == []
    finally:
        own.stop()


def test_a_standalone_dashboard_gives_chdb_to_a_sink_started_later(
    broker: str, tmp_path: Path, society_name: str
):
    """`society dashboard` first, `society run` second: the sink gets the chDB directory, the dashboard
    switches to reading through it."""
    import urllib.request

    from molt_society.society.stack import settings_env

    s = society_name
    settings = make_settings(broker, tmp_path, dashboard_port=0, dashboard_refresh_seconds=0.5)
    env = settings_env(settings, state_dir=settings.state_dir.resolve(), log_json=True)
    log = open(tmp_path / "dashboard.log", "wb")  # noqa: SIM115
    dash = subprocess.Popen(
        [sys.executable, "-m", "molt_society.dashboard", "--society", s],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        state = settings.state_dir / s / "dashboard.json"
        deadline = time.monotonic() + 60
        while not state.exists() and time.monotonic() < deadline:
            assert dash.poll() is None, (tmp_path / "dashboard.log").read_text()
            time.sleep(0.2)
        url = json.loads(state.read_text())["url"]

        def snapshot() -> dict[str, Any]:
            with urllib.request.urlopen(f"{url}api/snapshot", timeout=30) as r:
                return dict(json.loads(r.read()))

        assert snapshot()["clickhouse"]["url_kind"] == "direct"
        with running_stack(settings, s, agents=False) as stack:
            stack.sink_url(timeout=90)  # raises if the sink could not open chDB
            deadline = time.monotonic() + 30
            while snapshot()["clickhouse"]["url_kind"] != "sink" and time.monotonic() < deadline:
                time.sleep(0.5)
            assert snapshot()["clickhouse"]["url_kind"] == "sink"
            assert snapshot()["clickhouse"]["ok"] is True
            assert stack.dead_children() == []
    finally:
        dash.terminate()
        dash.wait(timeout=30)
        log.close()
