"""The running sink's HTTP endpoints, as a client sees them (the embedded chDB belongs to the sink).

- ``POST /query`` with ``{"sql": ...}`` runs one read through the sink's read-only session
  (``warehouse.guard``), never on the thread or session that inserts.
- Answers are JSON encoded by ``dumps_json`` (datetimes ISO 8601 UTC, UUIDs as strings, bytes decoded),
  which the dashboard uses for its own answers too.
- ``POST /internal/embeddings`` stores the report's sentence embeddings; it needs the bearer secret the
  sink wrote to ``<state_dir>/<society>/sink.token`` (mode 0600, readable by the user only).

Requests carry ``Content-Type: application/json`` and the loopback ``Host`` the sink expects.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from molt_society.warehouse.result import QueryError, Refused, Result

TOKEN_FILE = "sink.token"  # noqa: S105 (the name of the file that holds the secret)
STATE_FILE = "sink.json"


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    return str(value)


def dumps_json(value: Any) -> bytes:
    """JSON of query results: datetimes ISO 8601 (UTC with Z), UUIDs as strings, bytes decoded, NaN null."""
    return orjson.dumps(
        value,
        default=_json_default,
        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_SERIALIZE_NUMPY,
    )


def running_sink_url(state_dir: Path, society: str | None = None, store: Path | None = None) -> str | None:
    """URL of a live sink under ``state_dir`` (``society``'s first, then any), if one answers; with
    ``store`` (a chDB directory), only a sink that serves that store (a sink of another store answers
    from another record)."""
    own = [state_dir / society / STATE_FILE] if society else []
    want = str(store.resolve()) if store is not None else None
    for path in [*own, *sorted(p for p in state_dir.glob(f"*/{STATE_FILE}") if p not in own)]:
        try:
            doc = json.loads(path.read_text())
            if want is not None and doc.get("store") != want:
                continue
            url = str(doc["url"])
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return url
        except (OSError, ValueError, KeyError):
            continue
    return None


def _post(url: str, doc: object, timeout: float, token: str | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=json.dumps(doc).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        try:
            parsed = json.loads(body)
            msg, refused = parsed.get("error", body), bool(parsed.get("refused"))
        except (ValueError, AttributeError):
            msg, refused = body, False
        raise (Refused if refused else QueryError)(str(msg)) from None
    except urllib.error.URLError as exc:
        raise QueryError(f"the sink at {url} did not answer ({exc.reason})") from None


def query_http(url: str, sql: str, timeout: float = 60.0) -> Result:
    """``sql`` through the sink's ``/query`` (read-only)."""
    doc = _post(f"{url}/query", {"sql": sql}, timeout)
    return Result(list(doc["columns"]), [list(r) for r in doc["rows"]])


def read_token(state_dir: Path, society: str) -> str:
    """The sink's internal secret (only the user who runs the sink can read the file)."""
    path = state_dir / society / TOKEN_FILE
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise QueryError(f"cannot read the sink's secret {path}: {exc.strerror}") from None


def store_embeddings_http(
    url: str, token: str, model: str, hashes: Sequence[int], vectors: Sequence[Sequence[float]]
) -> int:
    """Store embeddings through the sink's authenticated internal endpoint; returns the rows stored."""
    rows = [[int(h), [float(x) for x in v]] for h, v in zip(hashes, vectors, strict=True)]
    doc = _post(f"{url}/internal/embeddings", {"model": model, "rows": rows}, 600.0, token=token)
    return int(doc["rows"])
