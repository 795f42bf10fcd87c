"""Which records the stack itself wrote: an HMAC per record from a per-society key.

Kafka lets any client on the machine write to any topic (the local brokers run without ACLs). So that no
record from outside can overwrite, pre-empt or stop the record, every record the stack's producers write to
a society topic carries the header ``society-sig``: ``b2:`` and the hex of BLAKE2b-256 keyed with the
society's key (BLAKE2's own MAC mode) over the topic's role, the record's key, value and other headers (so a
signed action cannot be replayed as an event, a mark cannot be moved to another offset, an event cannot
become a watermark). A signature without the ``b2:`` prefix is read as the earlier form, the hex of
HMAC-SHA256 over the same bytes, which outside producers may still write (it costs three times as much
to compute: 5.8 us against 1.9 us for a 600-byte record here, and every event is signed and checked
several times on its way to the store). Readers that build the record check it and dead-letter what fails
(code ``unauthenticated``):

- the stream workers: actions (events and watermarks), and the events, marks and snapshots they rebuild
  their state from;
- the sink: events and metrics.

The key is 32 random bytes in ``<state_dir>/<society>/society.key`` (mode 0600, made on first use and never
replaced): whoever can read it is one of the stack's producers. An outside producer that should be allowed
(a script of the society's owner) signs with ``RecordKeys(state_dir).headers(...)`` or with a producer of
``runtime.kafka.producer``, which signs every society topic's records.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

SIGNATURE_HEADER = "society-sig"
KEY_FILE = "society.key"
KEY_BYTES = 32
BLAKE2_PREFIX = b"b2:"
"""How a signature of the current form (keyed BLAKE2b-256) starts; without it, HMAC-SHA256 hex."""
UNAUTHENTICATED = "unauthenticated"
"""The dead-letter code of a record without a valid signature."""

Headers = Sequence[tuple[str, bytes]]


class KeyUnavailable(RuntimeError):
    """The society's key can neither be read nor made (a permissions or disk problem), said with the path."""


def topic_parts(topic: str) -> tuple[str, str] | None:
    """``(society, role)`` of a topic named ``society.<name>.<role>``; None for any other topic."""
    if not topic.startswith("society."):
        return None
    society, dot, role = topic[8:].rpartition(".")
    return (society, role) if dot and society and role else None


def _field(data: bytes | None) -> bytes:
    if data is None:
        return b"\xff\xff\xff\xff"
    return len(data).to_bytes(4, "big") + data


def signed_message(
    role: str, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes]]
) -> bytes:
    """What a signature covers: the role, key, value and every header but the signature, length-prefixed."""
    parts = [_field(role.encode()), _field(key), _field(value)]
    for name, data in headers:
        if name != SIGNATURE_HEADER:
            parts.append(_field(name.encode()))
            parts.append(_field(data))
    return b"".join(parts)


def _load_or_make(path: Path) -> bytes:
    """The key at ``path``, made (atomically, mode 0600) when there is none; never replaced."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise KeyUnavailable(f"cannot read the society's record key {path}: {exc.strerror}") from None
    if len(data) == KEY_BYTES:
        return data
    if data:
        raise KeyUnavailable(f"the society's record key {path} holds {len(data)} bytes, not {KEY_BYTES}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails if another process made it first: theirs is the key
        except FileExistsError:
            pass
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        data = path.read_bytes()
    except OSError as exc:
        raise KeyUnavailable(f"cannot make the society's record key {path}: {exc.strerror}") from None
    if len(data) != KEY_BYTES:
        raise KeyUnavailable(f"the society's record key {path} holds {len(data)} bytes, not {KEY_BYTES}")
    return data


class RecordKeys:
    """The record keys of the societies under one state folder: sign and check records of their topics."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self._keys: dict[str, bytes] = {}

    def key(self, society: str) -> bytes:
        """The society's key (read once, made on first use)."""
        k = self._keys.get(society)
        if k is None:
            if not society or "/" in society or society.startswith("."):
                raise KeyUnavailable(f"no record key for a society named {society!r}")
            k = self._keys[society] = _load_or_make(self.state_dir / society / KEY_FILE)
        return k

    def _keyed_message(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers
    ) -> tuple[bytes, bytes] | None:
        """The society's key and the bytes a signature of a record of ``topic`` covers; None for a topic of
        no society."""
        parts = topic_parts(topic)
        if parts is None:
            return None
        society, role = parts
        return self.key(society), signed_message(role, key, value, headers)

    def signature(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers = ()
    ) -> bytes | None:
        """The signature header's value for a record of ``topic``; None for a topic of no society."""
        keyed = self._keyed_message(topic, key, value, headers)
        if keyed is None:
            return None
        secret, message = keyed
        # hex: a header value outside clients can print (kcat -J writes header values into its JSON)
        return BLAKE2_PREFIX + hashlib.blake2b(message, key=secret, digest_size=32).hexdigest().encode()

    def legacy_signature(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers = ()
    ) -> bytes | None:
        """The earlier form of the signature (hex of HMAC-SHA256 over the same bytes), still accepted."""
        keyed = self._keyed_message(topic, key, value, headers)
        if keyed is None:
            return None
        secret, message = keyed
        return hmac.digest(secret, message, "sha256").hex().encode()

    def headers(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers | None = None
    ) -> list[tuple[str, bytes]]:
        """``headers`` (without any signature) plus the signature of the record, for ``topic``."""
        own = [(k, v) for k, v in headers or () if k != SIGNATURE_HEADER]
        sig = self.signature(topic, key, value, own)
        return own if sig is None else [*own, (SIGNATURE_HEADER, sig)]

    def problem(self, record: Any) -> str | None:
        """Why a consumed record (``topic``, ``key``, ``value``, ``headers``) is not the stack's own, as a
        sentence; None when its signature is valid."""
        raw = record.headers or ()
        headers = list(raw.items() if isinstance(raw, Mapping) else raw)  # Faust may hand a mapping
        sigs = [v for k, v in headers if k == SIGNATURE_HEADER]
        if not sigs:
            return (
                f"the record carries no {SIGNATURE_HEADER} header: only the society's own producers (holding "
                f"its key, {KEY_FILE}) may write to {record.topic}"
            )
        if len(sigs) > 1:
            return f"the record carries {len(sigs)} {SIGNATURE_HEADER} headers; a record of the stack has one"
        given = bytes(sigs[0])
        sign = self.signature if given.startswith(BLAKE2_PREFIX) else self.legacy_signature
        expected = sign(record.topic, record.key, record.value, headers)
        if expected is None or not hmac.compare_digest(expected, given):
            return (
                f"the record's {SIGNATURE_HEADER} does not match its contents under the society's key: it "
                f"was written or changed outside the stack"
            )
        return None
