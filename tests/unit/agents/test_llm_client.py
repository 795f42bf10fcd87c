"""The chat client's retries, bounds and back-pressure, against a local HTTP server on loopback.

The server here stands in for the network behaviour of a model server (errors, slowness, absence); the
model itself is exercised against the real llama-cpp-python server in the integration tests.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from aiohttp import web
from loopback_chat import serve_chat

from molt_society.agents.llm_client import ChatClient

pytestmark = pytest.mark.timeout(60)


def _answer(text: str = '{"action": "nothing"}') -> dict[str, Any]:
    return {
        "model": "/path/to/model.gguf",
        "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7},
    }


def test_retries_5xx_then_reports_tokens_and_attempts() -> None:
    calls: dict[str, Any] = {"n": 0, "auth": ""}

    async def handler(request: web.Request) -> web.Response:
        calls["n"] += 1
        calls["auth"] = request.headers.get("Authorization", "")
        calls["body"] = await request.json()
        if calls["n"] < 3:
            return web.Response(status=503, text="loading model")
        return web.json_response(_answer())

    async def go() -> None:
        runner, url = await serve_chat(handler)
        try:
            async with ChatClient(url, "sk-test", backoff_s=0.01) as client:
                call = await client.complete(
                    "smollm2", [{"role": "user", "content": "hi"}], json_schema={"type": "object"}
                )
        finally:
            await runner.cleanup()
        assert (call.outcome, call.attempts, call.model) == ("ok", 3, "smollm2")
        assert (call.prompt_tokens, call.completion_tokens) == (42, 7)
        assert call.text == '{"action": "nothing"}'
        assert calls["auth"] == "Bearer sk-test"
        assert calls["body"]["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
        assert calls["body"]["model"] == "smollm2"

    asyncio.run(go())


def test_client_errors_are_not_retried() -> None:
    calls = {"n": 0}

    async def handler(request: web.Request) -> web.Response:
        calls["n"] += 1
        return web.Response(status=400, text="bad model name")

    async def go() -> None:
        runner, url = await serve_chat(handler)
        try:
            async with ChatClient(url, backoff_s=0.01) as client:
                call = await client.complete("nope", [{"role": "user", "content": "hi"}])
        finally:
            await runner.cleanup()
        assert (call.outcome, call.attempts, calls["n"]) == ("http_error", 1, 1)
        assert call.error is not None
        assert "HTTP 400" in call.error

    asyncio.run(go())


def test_absent_server_gives_up_after_the_bound() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def go() -> None:
        async with ChatClient(f"http://127.0.0.1:{port}/v1", max_attempts=3, backoff_s=0.01) as client:
            call = await client.complete("m", [{"role": "user", "content": "hi"}])
        assert (call.outcome, call.attempts, call.text) == ("unavailable", 3, "")

    asyncio.run(go())


def test_slow_server_times_out_and_bad_json_is_a_bad_response() -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(2)
        return web.json_response(_answer())

    async def garbage(request: web.Request) -> web.Response:
        return web.Response(status=200, text="<html>not json</html>")

    async def go() -> None:
        runner, url = await serve_chat(slow)
        try:
            async with ChatClient(url, timeout_s=0.2, max_attempts=2, backoff_s=0.01) as client:
                call = await client.complete("m", [{"role": "user", "content": "hi"}])
        finally:
            await runner.cleanup()
        assert (call.outcome, call.attempts) == ("timeout", 2)
        runner, url = await serve_chat(garbage)
        try:
            async with ChatClient(url, backoff_s=0.01) as client:
                call = await client.complete("m", [{"role": "user", "content": "hi"}])
        finally:
            await runner.cleanup()
        assert (call.outcome, call.attempts) == ("bad_response", 1)

    asyncio.run(go())


def test_concurrency_is_bounded_and_callers_wait() -> None:
    state = {"now": 0, "peak": 0, "served": 0}

    async def handler(request: web.Request) -> web.Response:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.05)
        state["now"] -= 1
        state["served"] += 1
        return web.json_response(_answer())

    async def go() -> None:
        runner, url = await serve_chat(handler)
        try:
            async with ChatClient(url, concurrency=3) as client:
                calls = await asyncio.gather(
                    *(client.complete("m", [{"role": "user", "content": str(i)}]) for i in range(20))
                )
        finally:
            await runner.cleanup()
        assert all(c.outcome == "ok" for c in calls)
        assert state["served"] == 20
        assert state["peak"] == 3

    asyncio.run(go())
