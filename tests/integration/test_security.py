"""The record cannot be changed from outside: every request an attacker on this machine (or a web page
in the user's browser) can send to the sink and the dashboard is refused, and the record is unchanged.

Real broker, real chDB, a running society with its sink and dashboard. Each attack goes to the sink's
``POST /query`` as a local process would (JSON, loopback Host) and as a cross-origin page would
(``text/plain``, a foreign Origin, a rebound Host), and through ``society sql``; the record's row counts
and checksums (``security_cases.FINGERPRINT_SQL``) are equal before and after, no file was written, and
the sink still stores what the society does next.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from security_cases import ATTACKS, FINGERPRINT_SQL, TABLES_SQL, WRITTEN
from stack_helpers import make_settings, run_ticks, running_stack, sql

from molt_society.bench.processes import status_kib
from molt_society.society.drive import drive_clock
from molt_society.society.stack import settings_env

pytestmark = pytest.mark.integration


def _request(
    url: str, body: bytes | None, headers: dict[str, str], method: str | None = None
) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = {"raw": raw[:200].decode(errors="replace")}
    return status, doc if isinstance(doc, dict) else {"value": doc}


def _count_refused(log: Path) -> int:
    """Requests the sink's guard refused, from its log (``web.refused``)."""
    try:
        return sum(1 for line in log.read_text(errors="replace").splitlines() if '"web.refused"' in line)
    except OSError:
        return 0


PAGE = """<!doctype html><meta charset="utf-8"><title>a page elsewhere</title><body><script>
(async () => {
  const sink = SINK, attacks = ATTACKS;
  let tried = 0;
  for (const sql of attacks) {
    const body = JSON.stringify({sql: sql, readonly: false});
    // a "simple" request: no preflight, the browser sends it (the answer is opaque to the page)
    try { await fetch(sink + "/query", {method: "POST", mode: "no-cors", body: body,
                                         headers: {"Content-Type": "text/plain"}}); } catch (e) {}
    // a JSON request needs a preflight, which the sink refuses
    try { await fetch(sink + "/query", {method: "POST", body: body,
                                         headers: {"Content-Type": "application/json"}}); } catch (e) {}
    tried += 1;
  }
  window.__tried = tried;
})();
</script></body>"""


def _attack_from_a_page(sink: str, attacks: list[str]) -> int:
    """Serve ``PAGE`` from another loopback port and open it in headless Chromium; returns how many
    attacks the page tried."""
    import http.server

    from stack_helpers import browser_page

    html = PAGE.replace("SINK", json.dumps(sink)).replace("ATTACKS", json.dumps(attacks)).encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with browser_page() as page:
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
            page.wait_for_function("window.__tried !== undefined", timeout=60_000)
            return int(page.evaluate("window.__tried"))
    finally:
        server.shutdown()


def _host(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[0]


def test_the_record_cannot_be_read_around_forged_or_destroyed(broker: str, tmp_path: Path, society_name: str):
    for path in WRITTEN:
        path.unlink(missing_ok=True)
    settings = make_settings(broker, tmp_path, agents=150, query_timeout_seconds=10.0)
    with running_stack(settings, society_name, dashboard=True) as stack:
        run_ticks(stack, 6)
        sink = stack.sink_url()
        dash = stack.dashboard_url()
        assert dash is not None
        before = sql(stack, FINGERPRINT_SQL)
        tables = sql(stack, TABLES_SQL)
        assert dict((r[0], r[1]) for r in before)["events"] > 0
        local = {"Content-Type": "application/json", "Host": _host(sink)}
        browser_like = {
            "Content-Type": "text/plain",
            "Origin": "http://evil.example",
            "Host": _host(sink),
        }
        rebound = {
            "Content-Type": "application/json",
            "Host": "evil.example",
            "Origin": "http://evil.example",
        }
        sink_pid = next(c.process.pid for c in stack.children if c.role == "sinks")
        rss_before = status_kib(sink_pid, "VmRSS")
        assert rss_before is not None
        for name, attack in ATTACKS.items():
            body = json.dumps({"sql": attack}).encode()
            status, doc = _request(f"{sink}/query", body, local)
            assert status in (400, 403), (name, status, doc)
            assert doc.get("error"), name
            for headers in (browser_like, rebound):
                status, doc = _request(f"{sink}/query", body, headers)
                assert status in (403, 415), (name, headers, status, doc)
            # the old escape hatch: a flag in the body
            status, doc = _request(
                f"{sink}/query", json.dumps({"sql": attack, "readonly": False}).encode(), local
            )
            assert status == 400, (name, doc)
            assert "readonly" in doc["error"], (name, doc)
        # no read grew the process that holds the record past its bound (a 4 GB result made it 9 GB)
        peak = status_kib(sink_pid, "VmHWM")
        assert peak is not None
        grown = peak - rss_before
        assert grown < 1536 << 10, f"the sink grew by {grown >> 10} MiB"
        # refusals decided by ClickHouse's protections say what they refused
        _, doc = _request(f"{sink}/query", json.dumps({"sql": ATTACKS["file_passwd"]}).encode(), local)
        assert doc.get("refused") is True
        assert "file()" in doc["error"]
        _, doc = _request(f"{sink}/query", json.dumps({"sql": ATTACKS["drop"]}).encode(), local)
        assert doc.get("refused") is True
        assert "DROP" in doc["error"]
        # oversize body, wrong content type, the internal write path without (or with a wrong) secret
        status, _ = _request(
            f"{sink}/query", json.dumps({"sql": "SELECT 1 --" + "x" * (2 << 20)}).encode(), local
        )
        assert status == 413
        status, _ = _request(
            f"{sink}/query", b'{"sql": "SELECT 1"}', {"Host": _host(sink), "Content-Type": "text/plain"}
        )
        assert status == 415
        emb = json.dumps({"model": "m", "rows": [[1, [0.5, 0.5]]]}).encode()
        status, _ = _request(f"{sink}/internal/embeddings", emb, local)
        assert status == 401
        status, _ = _request(f"{sink}/internal/embeddings", emb, {**local, "Authorization": "Bearer guess"})
        assert status == 401
        token_file = settings.state_dir / society_name / "sink.token"
        assert token_file.stat().st_mode & 0o077 == 0  # only the user can read the secret
        # ... and no read can: file() is refused however it is called
        for read in (f"SELECT file('{token_file}')", f"SELECT length(file('{token_file}')) > 0"):
            status, doc = _request(f"{sink}/query", json.dumps({"sql": read}).encode(), local)
            assert status in (400, 403), doc
            assert doc.get("refused") is True, doc
            assert "file()" in doc["error"], doc
        # the dashboard: every route refuses a rebound Host or a foreign Origin, and bodies not JSON
        for route in ("/", "/api/panels", "/api/snapshot", "/healthz", "/static/app.js"):
            status, _ = _request(f"{dash.rstrip('/')}{route}", None, {"Host": "evil.example"})
            assert status == 403, route
            status, _ = _request(
                f"{dash.rstrip('/')}{route}", None, {"Host": _host(dash), "Origin": "http://evil.example"}
            )
            assert status == 403, route
        status, _ = _request(f"{dash.rstrip('/')}/api/panels", None, {"Host": _host(dash)})
        assert status == 200
        status, _ = _request(
            f"{dash.rstrip('/')}/api/panels",
            b"x",
            {"Host": _host(dash), "Content-Type": "text/plain"},
            "POST",
        )
        assert status == 415
        # society sql, the CLI a user (or a script) runs: refused with a message, exit 2
        env = settings_env(settings)
        for name in ("drop", "set", "file_passwd", "file_scalar_environ", "into_outfile", "multi_statement"):
            proc = subprocess.run(
                [sys.executable, "-m", "molt_society.society.cli", "sql", ATTACKS[name]],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
            assert "refused" in proc.stdout or "failed" in proc.stdout, (name, proc.stdout)
        # a real browser: a page on another origin of this machine tries the attacks on the sink
        refused_before = _count_refused(settings.state_dir / society_name / "sinks-0.log")
        tried = _attack_from_a_page(sink, [ATTACKS[n] for n in ("drop", "insert_forged", "truncate", "set")])
        refused_by_guard = _count_refused(settings.state_dir / society_name / "sinks-0.log") - refused_before
        unchanged = sql(stack, FINGERPRINT_SQL)
        assert sql(stack, TABLES_SQL) == tables

        # a slow query holds the read-only session while the society goes on: its inserts do not wait
        def health() -> dict[str, Any]:
            doc: dict[str, Any] = json.loads(urllib.request.urlopen(f"{sink}/health", timeout=10).read())
            return doc

        slow: list[Any] = []
        slow_sql = json.dumps({"sql": "SELECT sum(number) FROM system.numbers"}).encode()
        thread = threading.Thread(target=lambda: slow.append(_request(f"{sink}/query", slow_sql, local)))
        rows_before = health()["rows"]["events"]
        thread.start()
        asyncio.run(
            drive_clock(settings, stack.bootstrap, society_name, ticks=12, duration=None, start_tick=7)
        )
        grew_while_slow = False
        while thread.is_alive() and not grew_while_slow:
            grew_while_slow = health()["rows"]["events"] > rows_before
            time.sleep(0.2)
        thread.join()
        final_health = health()
    assert tried == 4
    # every request the page could send reached the sink and was refused there (none was executed)
    assert refused_by_guard >= 8
    assert unchanged == before
    assert grew_while_slow, "no insert was stored while the slow query ran"
    assert slow
    assert slow[0][0] == 400
    assert "imeout" in slow[0][1]["error"]  # ClickHouse's max_execution_time ended it
    assert final_health["failing"] is None
    assert final_health["insert_errors"] == 0
    assert [p for p in WRITTEN if p.exists()] == []
