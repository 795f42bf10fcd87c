"""Hostile archives given to ``society replay``: one readable line naming the file and the line, never a
traceback, and never a line held whole when it is longer than any event may be."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from click.testing import CliRunner

from molt_society.replay.archive import MAX_LINE_BYTES, ArchiveError, read_jsonl_docs
from molt_society.society.cli import main

HEADER = b'{"archive": {"society": "s", "events": 1, "version": 1}}\n'
EVENT = b'{"event_id": "x", "occurred_at": "2026-01-28T00:00:00Z"}\n'


def _read(path: Path) -> int:
    _, docs = read_jsonl_docs(path)
    return sum(1 for _ in docs)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"archive": {"society": 5, "events": 1}}\n' + EVENT, "the header's 'society' has the wrong type"),
        (b'{"archive": {"events": 1, "bogus": 2}}\n' + EVENT, "line 1 is not an archive header"),
        (b'{"archive": [1, 2]}\n' + EVENT, "line 1 is not an archive header"),
        (b'{"archive": {"society": "s", "events": 1, "version": 9}}\n', "archive format version 9"),
        (HEADER + EVENT + b"{not json\n", "line 3 is not JSON"),
        (HEADER + b"[1, 2]\n", "line 2 is not a JSON object"),
        (HEADER + b"x" * (MAX_LINE_BYTES + 10) + b"\n", "line 2 is longer than 2 MiB"),
    ],
)  # fmt: skip
def test_each_hostile_archive_is_one_error_naming_the_line(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(content)
    with pytest.raises(ArchiveError, match=says) as err:
        _read(path)
    assert str(path) in str(err.value)


def test_a_gzip_bomb_line_is_refused_within_its_bound(tmp_path: Path) -> None:
    """256 MiB of one line compresses to a few hundred KB; it is refused after MAX_LINE_BYTES."""
    import resource

    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb") as f:
        f.write(HEADER)
        chunk = b"a" * (1 << 20)
        for _ in range(256):
            f.write(chunk)
    assert path.stat().st_size < 2 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ArchiveError, match="line 2 is longer than"):
        _read(path)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) < 64 << 10  # KiB: < 64 MiB


def test_a_broken_gzip_and_a_bad_line_are_one_line_from_the_cli(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(HEADER + b"{not json\n")
    for path, says in ((broken, "cannot be read"), (bad, "line 2 is not JSON")):
        res = CliRunner().invoke(main, ["replay", str(path), "--no-dashboard"])
        assert res.exit_code == 1, res.output
        assert says in res.output
        assert "Traceback" not in res.output
