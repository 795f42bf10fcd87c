"""A client of one or several OpenAI-compatible chat APIs (llama-cpp-python's server, vLLM, Ollama, OpenAI).

Every call returns a :class:`ModelCall`, whatever happened: the completion text, the token counts the server
reported, the latency, the number of attempts and an outcome (``ok``, ``http_error``, ``unavailable``,
``timeout``, ``bad_response``), so that cost and latency become data and a failed call is never an
exception in an agent's tick.

Several servers: ``base_url`` may name several (``"http://a:8000/v1,http://b:8000/v1"`` or a list); they
serve the same models and share the calls (``agents.llm_pool``: least loaded first, a failing server
avoided, the retry of a failed attempt sent to another server when one has room).

Back-pressure: at most ``concurrency`` requests are in flight **per server**; further callers wait for a
slot on any server. A connection failure, a timeout, HTTP 429 or 5xx is retried after an exponential
backoff with jitter (``backoff_s`` doubling up to ``max_backoff_s``), at most ``max_attempts`` times in
all; the slot is released while waiting, so a slow or absent server holds no more than ``concurrency``
requests.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from molt_society.agents.llm_pool import Server, ServerPool

Outcome = Literal["ok", "http_error", "unavailable", "timeout", "bad_response"]
RETRIED_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class ModelCall:
    model: str
    outcome: Outcome
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float  # from the first attempt to the answer, waits included
    attempts: int
    error: str | None = None


class ChatClient:
    """See module docstring. Use as ``async with ChatClient(...) as client``."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        api_key: str | None = None,
        *,
        concurrency: int = 4,
        timeout_s: float = 60.0,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        self.pool = ServerPool(base_url, concurrency, backoff_s=backoff_s, max_backoff_s=max_backoff_s)
        self.base_url = self.pool.servers[0].url  # the first server (single-server callers)
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._session: aiohttp.ClientSession | None = None

    @property
    def in_flight(self) -> int:
        """Requests in flight, over every server."""
        return sum(s.in_flight for s in self.pool.servers)

    async def __aenter__(self) -> ChatClient:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        # no connection cap of the session's own (aiohttp's default is 100 in all): the pool is the bound
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
        self._session = aiohttp.ClientSession(headers=headers, connector=connector)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def complete(
        self,
        model: str,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 200,
        temperature: float = 0.7,
        json_schema: dict[str, object] | None = None,
        seed: int | None = None,
    ) -> ModelCall:
        """One chat completion. ``json_schema``: ask for a JSON object of that schema (``response_format``,
        constrained decoding on llama.cpp's server; other servers may ignore or refuse it). ``seed``: the
        sampling seed, for servers that honour it (the same prompt and seed give the same reply)."""
        assert self._session is not None, "use `async with ChatClient(...)`"
        payload: dict[str, Any] = {
            "model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
        }  # fmt: skip
        if json_schema is not None:
            payload["response_format"] = {"type": "json_object", "schema": json_schema}
        if seed is not None:
            payload["seed"] = seed
        started = time.perf_counter()
        outcome: Outcome = "unavailable"
        error = "no attempt"
        last: Server | None = None
        for attempt in range(1, self.max_attempts + 1):
            server = await self.pool.acquire(avoid=last)
            failed = False  # a cancelled attempt says nothing about the server
            try:
                outcome, error, doc = await self._post(server.url, payload)
                failed = outcome in ("unavailable", "timeout") or error.startswith("retry")
            finally:
                await self.pool.release(server, failed=failed)
            if outcome == "ok":
                return self._result(model, doc, started, attempt)
            if outcome == "bad_response" or (outcome == "http_error" and not error.startswith("retry")):
                break
            last = server
            if attempt < self.max_attempts:
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
                await asyncio.sleep(delay * (0.5 + random.random() / 2))  # jitter
        return ModelCall(model, outcome, "", 0, 0, _ms(started), attempt, error.removeprefix("retry: "))

    async def _post(self, base_url: str, payload: dict[str, Any]) -> tuple[Outcome, str, dict[str, Any]]:
        assert self._session is not None
        try:
            async with self._session.post(
                f"{base_url}/chat/completions",
                json=payload,
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            ) as resp:
                if resp.status != 200:
                    body = (await resp.text())[:200]
                    prefix = "retry: " if resp.status in RETRIED_STATUS else ""
                    return "http_error", f"{prefix}HTTP {resp.status}: {body}", {}
                try:
                    doc = await resp.json(content_type=None)
                except ValueError as exc:
                    return "bad_response", f"the server's answer is not JSON ({exc})", {}
                return "ok", "", doc if isinstance(doc, dict) else {}
        except TimeoutError:
            return "timeout", f"no answer within {self.timeout_s:g} s", {}
        except aiohttp.ClientError as exc:
            return "unavailable", f"{type(exc).__name__}: {exc}", {}

    @staticmethod
    def _result(model: str, doc: dict[str, Any], started: float, attempts: int) -> ModelCall:
        try:
            text = str(doc["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            return ModelCall(model, "bad_response", "", 0, 0, _ms(started), attempts, "no choices[0].message")
        usage = doc.get("usage") or {}
        return ModelCall(
            model=model,  # the name asked for (servers report paths or aliases)
            outcome="ok",
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_ms=_ms(started),
            attempts=attempts,
        )


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
