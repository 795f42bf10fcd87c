"""An author registers at its first act in time, under that act's name (else its id) and with that act's
description (else the first description of a later act); every later act under another name is noted, in
time order, in the file it is in. The acts are made out of time order on purpose (a comment dated before
the post it is on, which the builder emits after every post), and the import is run by the builder alone
and with its worker processes. Expected values are written out by hand from the records below.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from molt_society.importers import import_path, import_stream, makers
from molt_society.schemas import events as E
from molt_society.schemas.wire import decode_event

RENAMED = "agent id seen with another name (first name kept)"


def _at(minute: int) -> str:
    return f"2026-01-30T17:{minute:02d}:00+00:00"


def _post(pid: str, minute: int, author: dict[str, str]) -> dict[str, Any]:
    return {
        "id": pid,
        "title": "t",
        "content": "c",
        "created_at": _at(minute),
        "submolt": "s",
        "author": author,
    }


def _comment(cid: str, pid: str, minute: int, author: dict[str, str]) -> dict[str, Any]:
    return {"id": cid, "post_id": pid, "content": "c", "created_at": _at(minute), "author": author}


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    posts = [
        _post("p1", 10, {"id": "a1", "name": "alpha"}),
        _post("p2", 0, {"id": "b1", "name": "beta", "description": "first words"}),
        _post("p3", 1, {"id": "c1"}),
        _post("p4", 2, {"id": "d1", "name": "delta"}),
    ]
    comments = [
        _comment("k1", "p1", 5, {"id": "a1", "name": "gamma"}),  # a1's first act: before its post
        _comment("k2", "p1", 20, {"id": "a1", "name": "alpha", "description": "later words"}),
        _comment("k3", "p1", 30, {"id": "a1", "name": "gamma", "description": "even later"}),
        _comment("k4", "p2", 40, {"id": "b1", "name": "beta", "description": "other words"}),
        _comment("k5", "p3", 41, {"id": "c1", "name": "cee"}),
        _comment("k6", "p3", 42, {"id": "c1", "name": "cee"}),
        _comment("k7", "p4", 50, {"id": "d1", "name": "dee"}),
    ]
    (tmp_path / "posts.json").write_text(json.dumps(posts))
    (tmp_path / "comments.json").write_text(json.dumps(comments))
    return tmp_path


def _check(registered: dict[str, E.AgentRegistered], report: dict[str, Any]) -> None:
    a1, b1, c1 = registered["a1"], registered["b1"], registered["c1"]
    assert (a1.occurred_at.minute, a1.body.name, a1.body.persona) == (5, "gamma", "later words")
    assert (b1.occurred_at.minute, b1.body.name, b1.body.persona) == (0, "beta", "first words")
    assert (c1.occurred_at.minute, c1.body.name, c1.body.persona) == (1, "c1", None)
    assert (registered["d1"].occurred_at.minute, registered["d1"].body.name) == (2, "delta")
    files = {f["file"]: f for f in report["files"]}
    on_posts = files["posts.json"]["notes"][RENAMED]
    assert on_posts["count"] == 1  # p1, as alpha
    assert on_posts["examples"][0].endswith("a1: alpha")
    on_comments = files["comments.json"]["notes"][RENAMED]
    assert on_comments["count"] == 4  # k2 (alpha), k5 and k6 (cee, against the id c1), k7 (dee)
    assert [e.rsplit(": ", 2)[-2:] for e in on_comments["examples"]] == [
        ["a1", "alpha"],
        ["c1", "cee"],
        ["c1", "cee"],
    ]


def _registered(events: Iterator[E.Event]) -> dict[str, E.AgentRegistered]:
    return {e.actor: e for e in events if isinstance(e, E.AgentRegistered)}


def test_first_acts_names_and_descriptions_by_the_builder_alone(dump: Path) -> None:
    result = import_path(dump, "authors")
    _check(_registered(iter(result.events)), result.report.to_dict())


def test_first_acts_names_and_descriptions_with_workers(dump: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(makers, "MIN_RECORDS", 0)
    stream = import_stream(dump, "authors")
    try:
        _check(_registered(decode_event(p, max_bytes=1 << 20) for p in stream.spill), stream.report.to_dict())
    finally:
        stream.close()
