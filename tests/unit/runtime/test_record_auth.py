"""Record signatures (runtime.record_auth): what a signature covers, and the key file.

Expected outcomes come from what was changed: any change to the role, key, value or a header must fail the
check; an untouched record must pass; the key is made once and shared by every process.
"""

from __future__ import annotations

import multiprocessing
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from molt_society.runtime.record_auth import (
    KEY_BYTES,
    KEY_FILE,
    SIGNATURE_HEADER,
    KeyUnavailable,
    RecordKeys,
    topic_parts,
)

ACTIONS = "society.demo.actions"
EVENTS = "society.demo.events"


@dataclass(frozen=True)
class Rec:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def _signed(
    keys: RecordKeys, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]
) -> Rec:
    return Rec(topic, key, value, keys.headers(topic, key, value, headers))


def test_topic_parts() -> None:
    assert topic_parts("society.demo.events") == ("demo", "events")
    assert topic_parts("society.ex.control.s0.actions") == ("ex.control.s0", "actions")
    assert topic_parts("other.topic") is None
    assert topic_parts("society.events") is None


def test_a_signed_record_passes_and_every_change_fails(tmp_path: Path) -> None:
    keys = RecordKeys(tmp_path)
    rec = _signed(keys, ACTIONS, b"p1", b'{"a":1}', [("society-kind", b"watermark")])
    assert keys.problem(rec) is None
    sig = next(v for k, v in rec.headers if k == SIGNATURE_HEADER)
    changed = [
        replace(rec, value=b'{"a":2}'),
        replace(rec, key=b"p2"),
        replace(rec, key=None),
        replace(rec, topic=EVENTS),  # moved to another role of the same society
        replace(rec, topic="society.other.actions"),  # another society: another key
        replace(rec, headers=[(SIGNATURE_HEADER, sig)]),  # the watermark header dropped
        replace(rec, headers=[("society-kind", b"watermark"), ("x", b"y"), (SIGNATURE_HEADER, sig)]),
        replace(rec, headers=[("society-kind", b"watermark")]),  # no signature
        replace(rec, headers=[*rec.headers, (SIGNATURE_HEADER, sig)]),  # two
    ]
    for bad in changed:
        assert SIGNATURE_HEADER in (keys.problem(bad) or ""), bad


def test_another_key_does_not_sign_for_the_society(tmp_path: Path) -> None:
    mine, theirs = RecordKeys(tmp_path / "a"), RecordKeys(tmp_path / "b")
    forged = _signed(theirs, EVENTS, b"p1", b"{}", [])
    assert mine.problem(forged) is not None
    assert theirs.problem(forged) is None


def test_an_empty_key_and_no_key_differ(tmp_path: Path) -> None:
    keys = RecordKeys(tmp_path)
    rec = _signed(keys, EVENTS, b"", b"v", [])
    assert keys.problem(replace(rec, key=None)) is not None


def test_the_key_file_is_private_and_kept(tmp_path: Path) -> None:
    key = RecordKeys(tmp_path).key("demo")
    path = tmp_path / "demo" / KEY_FILE
    assert len(key) == KEY_BYTES
    assert path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert RecordKeys(tmp_path).key("demo") == key  # a second process reads the same key
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no temporary file left


def _key_of(state: str) -> bytes:
    return RecordKeys(Path(state)).key("demo")


def test_processes_racing_to_make_the_key_share_one(tmp_path: Path) -> None:
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        keys = pool.map(_key_of, [str(tmp_path)] * 12)
    assert len(set(keys)) == 1
    assert (tmp_path / "demo" / KEY_FILE).read_bytes() == keys[0]


def test_a_damaged_key_is_an_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / KEY_FILE).write_bytes(b"short")
    with pytest.raises(KeyUnavailable, match=r"society\.key holds 5 bytes"):
        RecordKeys(tmp_path).key("demo")


def test_no_key_for_a_name_outside_the_state_folder(tmp_path: Path) -> None:
    with pytest.raises(KeyUnavailable):
        RecordKeys(tmp_path).key("../x")


def _fields(*parts: bytes | None) -> bytes:
    """The length-prefixed message of a record, written out here from the documented layout."""
    out = b""
    for p in parts:
        out += b"\xff\xff\xff\xff" if p is None else len(p).to_bytes(4, "big") + p
    return out


def test_the_signature_is_keyed_blake2b_and_hmac_sha256_is_still_accepted(tmp_path: Path) -> None:
    import hashlib
    import hmac

    keys = RecordKeys(tmp_path)
    rec = _signed(keys, ACTIONS, b"p1", b'{"a":1}', [("society-kind", b"watermark")])
    secret = (tmp_path / "demo" / KEY_FILE).read_bytes()
    msg = _fields(b"actions", b"p1", b'{"a":1}', b"society-kind", b"watermark")
    sig = next(v for k, v in rec.headers if k == SIGNATURE_HEADER)
    assert sig == b"b2:" + hashlib.blake2b(msg, key=secret, digest_size=32).hexdigest().encode()
    legacy_sig = hmac.new(secret, msg, hashlib.sha256).hexdigest().encode()
    legacy = Rec(ACTIONS, b"p1", b'{"a":1}', [("society-kind", b"watermark"), (SIGNATURE_HEADER, legacy_sig)])
    assert keys.problem(legacy) is None
    tampered = replace(legacy, value=b'{"a":2}')
    assert SIGNATURE_HEADER in (keys.problem(tampered) or "")
    # the HMAC under the b2 prefix, or the BLAKE2 MAC without it, is no signature
    for wrong in (b"b2:" + legacy_sig, sig[3:]):
        bad = replace(legacy, headers=[("society-kind", b"watermark"), (SIGNATURE_HEADER, wrong)])
        assert SIGNATURE_HEADER in (keys.problem(bad) or "")
