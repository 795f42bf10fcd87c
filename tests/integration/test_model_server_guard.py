"""The local model server (real llama-cpp-python, real SmolLM2) checks Host and Origin like every endpoint
of the stack: a rebound DNS name, a foreign page and a non-JSON body are refused, and no CORS grant is
sent; the stack's own requests are served."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from molt_society.runtime.settings import Settings
from molt_society.society.model_server import LocalModelServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _request(
    port: int, method: str, path: str, headers: dict[str, str], body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_the_model_server_refuses_rebound_hosts_and_foreign_pages(tmp_path: Path) -> None:
    server = LocalModelServer.from_settings(Settings(state_dir=tmp_path), tmp_path / "model.log").start()
    port = server.port
    own = f"127.0.0.1:{port}"
    try:
        chat = json.dumps(
            {"model": server.alias, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        ).encode()
        evil = "http://evil.example"
        # the stack's own requests
        status, _, body = _request(port, "GET", "/v1/models", {"Host": own})
        assert status == 200, body
        status, _, body = _request(
            port, "POST", "/v1/chat/completions", {"Host": own, "Content-Type": "application/json"}, chat
        )
        assert status == 200, body
        assert json.loads(body)["choices"]
        # DNS rebinding: a page on evil.example whose name now points at 127.0.0.1
        for path in ("/v1/models", "/docs", "/openapi.json"):
            status, headers, body = _request(port, "GET", path, {"Host": f"rebind.evil.example:{port}"})
            assert status == 403, (path, body)
            assert "access-control-allow-origin" not in headers
        status, _, _ = _request(
            port, "POST", "/v1/chat/completions",
            {"Host": "rebind.evil.example", "Origin": evil, "Content-Type": "application/json"}, chat,
        )  # fmt: skip
        assert status == 403
        # a foreign page through the right Host (CSRF), its preflight, and a "simple" text/plain POST
        status, headers, _ = _request(port, "GET", "/v1/models", {"Host": own, "Origin": evil})
        assert status == 403
        assert "access-control-allow-origin" not in headers
        status, headers, _ = _request(
            port, "OPTIONS", "/v1/chat/completions",
            {"Host": own, "Origin": evil, "Access-Control-Request-Method": "POST"},
        )  # fmt: skip
        assert status == 403
        assert "access-control-allow-credentials" not in headers
        status, _, _ = _request(
            port, "POST", "/v1/chat/completions", {"Host": own, "Content-Type": "text/plain"}, chat
        )
        assert status == 415
    finally:
        server.stop()
