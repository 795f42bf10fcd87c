"""What every HTTP endpoint of the project (the sink, the dashboard, the local model server) checks before
it answers.

- ``Host`` must name this machine's loopback interface (``127.0.0.1``, ``localhost``, ``[::1]``) or a
  name in ``SOCIETY_ALLOWED_HOSTS``, with the endpoint's own port: a page on another site that rebinds its
  DNS name to 127.0.0.1 sends its own name and is refused (DNS rebinding).
- ``Origin``, when a browser sends one, must be this endpoint's own origin: a page elsewhere cannot use
  the endpoints from a user's browser (CSRF), not even with a "simple" ``text/plain`` request.
- A request with a body must be ``application/json``, which a cross-origin page cannot send without a
  preflight that these endpoints never grant.

``check_bind`` refuses a non-loopback listening address unless ``SOCIETY_ALLOW_REMOTE`` is set, and warns
when it is.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiohttp import web

from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, allow_remote: bool, what: str) -> None:
    """Refuse to listen on a non-loopback ``host`` unless allowed; warn when allowed."""
    if is_loopback(host):
        return
    if not allow_remote:
        raise ValueError(
            f"the {what} would listen on {host}, which is not a loopback address: anyone who can reach it "
            "could read the society; set SOCIETY_ALLOW_REMOTE=true (and SOCIETY_ALLOWED_HOSTS) to do so"
        )
    log.warning("web.listening_beyond_loopback", what=what, host=host)
    print(f"WARNING: the {what} listens on {host}, beyond this machine's loopback interface", flush=True)


def _split_host(value: str) -> tuple[str, int | None]:
    """``host[:port]`` (IPv6 in brackets) as (host, port); port None when absent."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[: end + 1], value[end + 1 :]
    else:
        host, _, rest = value.partition(":")
        rest = ":" + rest if rest else ""
    if rest.startswith(":") and rest[1:].isdigit():
        return host, int(rest[1:])
    return host, None if not rest else -1


def refusal(
    method: str, headers: Mapping[str, str], own_port: int | None, extra: frozenset[str] = frozenset()
) -> tuple[int, str] | None:
    """The status and reason to refuse a request with (the checks of the module docstring), None to serve
    it. ``headers``: names in lower case; ``own_port``: the port the endpoint is bound to."""

    def host_ok(name: str, p: int | None) -> bool:
        return (is_loopback(name) or name in extra) and p is not None and p == own_port

    host_header = headers.get("host", "")
    name, p = _split_host(host_header)
    if p is None:
        p = 80  # a Host without a port means the scheme's default
    if not host_ok(name, p):
        return 403, f"Host {host_header!r} is not this endpoint (loopback names and its port only)"
    origin = headers.get("origin")
    if origin is not None:
        scheme, _, rest = origin.partition("://")
        o_name, o_port = _split_host(rest)
        if o_port is None:
            o_port = 443 if scheme == "https" else 80
        if scheme != "http" or not host_ok(o_name, o_port):
            return 403, f"Origin {origin!r} is not this endpoint's own origin"
    has_body = headers.get("content-length", "0").strip() not in ("", "0") or "transfer-encoding" in headers
    if method not in ("GET", "HEAD", "OPTIONS") or has_body:
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return 415, f"a request with a body must be application/json, not {ctype or 'untyped'}"
    if method == "OPTIONS":
        return 403, "cross-origin requests are not served"
    return None


def guard(
    port: Callable[[], int | None], extra_hosts: Iterable[str] = ()
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """An aiohttp middleware applying ``refusal``; ``port()`` is the bound port."""
    extra = frozenset(h.strip().lower() for h in extra_hosts if h.strip())

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if request.can_read_body and "content-length" not in headers:
            headers["transfer-encoding"] = "chunked"
        refused = refusal(request.method, headers, port(), extra)
        if refused is not None:
            return _refuse(*refused)
        return await handler(request)

    return middleware


Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


class GuardedASGI:
    """``refusal`` in front of an ASGI app (the local model server: llama-cpp-python's own server answers
    any Host and grants every Origin CORS with credentials)."""

    def __init__(self, app: ASGIApp, port: int, extra_hosts: Iterable[str] = ()) -> None:
        self.app, self.port = app, port
        self.extra = frozenset(h.strip().lower() for h in extra_hosts if h.strip())

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope.get("type") == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            refused = refusal(str(scope.get("method", "GET")), headers, self.port, self.extra)
            if refused is not None:
                status, body = refused[0], _refusal_body(*refused)
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body)),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _refusal_body(status: int, message: str) -> bytes:
    """The JSON body of a refusal (logged): what every guarded endpoint answers."""
    import orjson

    log.warning("web.refused", status=status, reason=message)
    return orjson.dumps({"error": message, "refused": True})


def _refuse(status: int, message: str) -> web.Response:
    return web.Response(status=status, body=_refusal_body(status, message), content_type="application/json")
