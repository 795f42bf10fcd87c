"""The Host/Origin/Content-Type checks every HTTP endpoint applies (runtime.web_guard), on a real server."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from molt_society.runtime.web_guard import check_bind, guard


async def _ok(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def _exchange(requests: list[tuple[str, str, dict[str, str], bytes | None]]) -> list[int]:
    async def go() -> list[int]:
        ports: list[int] = []
        app = web.Application(middlewares=[guard(lambda: ports[0] if ports else None, ["society.lan"])])
        app.router.add_get("/x", _ok)
        app.router.add_post("/x", _ok)
        server = TestServer(app, host="127.0.0.1")
        client = TestClient(server)
        await client.start_server()
        ports.append(int(server.port or 0))
        out = []
        try:
            for method, host, headers, body in requests:
                h = {"Host": host.replace("PORT", str(ports[0])), **headers}
                h = {k: v.replace("PORT", str(ports[0])) for k, v in h.items()}
                resp = await client.request(method, "/x", headers=h, data=body)
                out.append(resp.status)
        finally:
            await client.close()
        return out

    return asyncio.run(go())


def test_hosts_origins_and_content_types() -> None:
    json_type = {"Content-Type": "application/json"}
    cases = [
        ("GET", "127.0.0.1:PORT", {}, None, 200),
        ("GET", "localhost:PORT", {}, None, 200),
        ("GET", "[::1]:PORT", {}, None, 200),
        ("GET", "society.lan:PORT", {}, None, 200),  # an allowed extra name
        ("GET", "evil.example:PORT", {}, None, 403),  # DNS rebinding: the attacker's own name
        ("GET", "evil.example", {}, None, 403),
        ("GET", "127.0.0.1:1", {}, None, 403),  # another port
        ("GET", "127.0.0.1", {}, None, 403),  # no port: port 80, not this endpoint
        ("GET", "127.0.0.1:PORT", {"Origin": "http://127.0.0.1:PORT"}, None, 200),
        ("GET", "127.0.0.1:PORT", {"Origin": "http://evil.example"}, None, 403),
        ("GET", "127.0.0.1:PORT", {"Origin": "null"}, None, 403),
        ("GET", "127.0.0.1:PORT", {"Origin": "https://127.0.0.1:PORT"}, None, 403),
        ("POST", "127.0.0.1:PORT", json_type, b"{}", 200),
        ("POST", "127.0.0.1:PORT", {"Content-Type": "text/plain"}, b"{}", 415),  # a "simple" CORS request
        ("POST", "127.0.0.1:PORT", {"Content-Type": "application/x-www-form-urlencoded"}, b"a=1", 415),
        ("POST", "127.0.0.1:PORT", {}, b"{}", 415),
        ("POST", "127.0.0.1:PORT", {**json_type, "Origin": "http://evil.example"}, b"{}", 403),
        ("OPTIONS", "127.0.0.1:PORT", {"Origin": "http://evil.example"}, None, 403),
    ]
    got = _exchange([(m, h, hd, b) for m, h, hd, b, _ in cases])
    assert got == [expected for *_, expected in cases]


def test_listening_beyond_loopback_needs_an_explicit_setting(capsys: pytest.CaptureFixture[str]) -> None:
    check_bind("127.0.0.1", allow_remote=False, what="dashboard")
    check_bind("::1", allow_remote=False, what="dashboard")
    with pytest.raises(ValueError, match="SOCIETY_ALLOW_REMOTE"):
        check_bind("0.0.0.0", allow_remote=False, what="dashboard")
    check_bind("0.0.0.0", allow_remote=True, what="dashboard")
    assert "WARNING" in capsys.readouterr().out
