"""Fuzz: no single record on the actions topic can crash, stall or corrupt the pipeline (issue 13).

A fixed-seed corpus of more than 10,000 hostile records (random bytes, truncated and deeply nested JSON,
1 MB and 10 MB records, NaN/Infinity/1e999, wrong types, unknown types, forged actors and societies,
copies of valid events under their id with other bodies, keys or partitions, lone surrogates, NUL, huge
integers, malformed watermarks and watermarks of unknown producers; valid posts and watermarks that are
unsigned, signed with another key, or carry the society's signature of another record) is sent to a real
stack (broker, stream worker, sink, chDB) interleaved with 1,000 valid events, in rounds: a round's valid
events are stored before any hostile copy of them is sent. Byte-identical copies of valid events
(redeliveries) are sent too; they are duplicates, neither stored again nor dead-lettered, and are not
counted as hostile.

Then: every valid event is stored exactly once and nothing else is; every hostile record is dead-lettered
once, with the code its kind calls for and a readable reason (matched record by record through the origin
partition and offset); the 10 MB records are dead-lettered as their first MiB; no process restarted; the
stream worker's memory stayed bounded; windows still closed (metrics were computed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import murmur2
from stack_helpers import make_settings, running_stack, sql

from molt_society.runtime import kafka
from molt_society.runtime.record_auth import RecordKeys
from molt_society.schemas import control
from molt_society.schemas import events as E
from molt_society.schemas.ids import uuid7
from molt_society.schemas.topics import HEADER_KIND, KIND_WATERMARK, Role, topic_name
from molt_society.schemas.wire import encode_event
from molt_society.society.stack import LocalStack

pytestmark = pytest.mark.integration

SEED = 20_260_113
AT = datetime(2026, 1, 28, 12, 0, tzinfo=UTC)
PARTITIONS = 4
ROUNDS = 10
VALID = 1_000
HOSTILE_PER_ROUND = 1_000  # plus the large records and the watermarks of each round
REDELIVERIES_PER_ROUND = 30
MAX_RSS = 1.5 * 2**30
DLQ_PREFIX = 1 << 20
MARK = [(HEADER_KIND, KIND_WATERMARK)]
AUTH_CODES = frozenset({"unauthenticated"})
DECODE_CODES = frozenset({"malformed_json", "not_an_object", "invalid_fields", "unknown_type", "empty"})


@dataclass
class Hostile:
    value: bytes | None
    key: bytes | None
    codes: frozenset[str]  # the codes its kind may be dead-lettered with
    kind: str
    partition: int | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    signed: bool = True  # False: sent as is by a producer without the society's key (headers as given)


def right_partition(key: bytes) -> int:
    """Where Kafka's default partitioner puts ``key`` (what the producer does with no partition)."""
    return (murmur2(key) & 0x7FFFFFFF) % PARTITIONS


def key_of(ev: E.Event) -> bytes:
    return E.partition_key(ev).encode()


# ------------------------------------------------------------------------------------ valid society
class ValidSociety:
    """1,000 valid events of 8 agents: registrations, submolts, posts, comments, votes, tallies, calls."""

    def __init__(self, society: str, rng: random.Random) -> None:
        self.society = society
        self.rng = rng
        self.n = 0
        self.events: list[E.Event] = []
        self.agents = [f"agent-{i}" for i in range(8)]
        self.posts: list[str] = []
        self.comments: dict[str, list[tuple[str, int]]] = {}  # post -> [(comment id, depth)]
        self._genesis()
        while len(self.events) < VALID:
            self._act()

    def _at(self) -> datetime:
        return AT + timedelta(seconds=self.n)

    def _add(self, model: type[E._Envelope], actor: str, body: Any) -> None:
        at = self._at()
        ev = model(event_id=uuid7(at, self.rng), society=self.society, actor=actor, occurred_at=at, body=body)
        self.events.append(ev)  # type: ignore[arg-type]
        self.n += 1

    def _genesis(self) -> None:
        for a in self.agents:
            self._add(E.AgentRegistered, a, E.AgentRegisteredBody(name=a.title()))
        for sub in ("general", "crypto"):
            self._add(E.SubmoltCreated, "agent-0", E.SubmoltCreatedBody(submolt=sub, title=sub))
        for a in self.agents:
            self._add(E.AgentSubscribed, a, E.AgentSubscribedBody(submolt="general"))

    def _act(self) -> None:
        rng, actor = self.rng, self.rng.choice(self.agents)
        r = rng.random()
        if not self.posts or r < 0.2:
            pid = f"post-{self.n}"
            self.posts.append(pid)
            self.comments[pid] = []
            title = f"Post {self.n} ünïcode 🦀"
            body = E.PostCreatedBody(post_id=pid, submolt=rng.choice(("general", "crypto")), title=title)
            self._add(E.PostCreated, actor, body)
        elif r < 0.7:
            pid = rng.choice(self.posts)
            thread = self.comments[pid]
            parent = rng.choice(thread) if thread and rng.random() < 0.4 else None
            cid, depth = f"c-{self.n}", 1 if parent is None else parent[1] + 1
            thread.append((cid, depth))
            body = E.CommentCreatedBody(
                comment_id=cid,
                post_id=pid,
                parent_id=None if parent is None else parent[0],
                depth=depth,
                content=f"{actor} says {self.n}",
            )
            self._add(E.CommentCreated, actor, body)
        elif r < 0.95:
            pid = rng.choice(self.posts)
            target = rng.choice(self.comments[pid])[0] if self.comments[pid] and rng.random() < 0.5 else pid
            vote = E.VoteCastBody(
                target_type="post" if target == pid else "comment",
                target_id=target,
                post_id=pid,
                value=rng.choice((1, -1)),
            )
            self._add(E.VoteCast, actor, vote)
        elif r < 0.98:  # the largest counts the contract allows
            pid = rng.choice(self.posts)
            tally = E.VoteTalliedBody(
                target_type="post", target_id=pid, post_id=pid, upvotes=E.MAX_COUNT, downvotes=0
            )
            self._add(E.VoteTallied, "importer", tally)
        else:
            call = E.ModelCalledBody(
                model="m", outcome="ok", decision="post", latency_ms=12.5, prompt_tokens=9
            )
            self._add(E.ModelCalled, actor, call)


# --------------------------------------------------------------------------------- hostile corpus
def _json(doc: Any) -> bytes:
    return json.dumps(doc).encode()  # the stdlib: big integers and NaN pass through


def _mutations() -> list[tuple[str, Callable[[dict[str, Any]], Any], frozenset[str]]]:
    """Ways to break an event document: (kind, mutate(doc) -> new doc or raw bytes, expected codes)."""
    inv = frozenset({"invalid_fields"})

    def body(**kv: Any) -> Callable[[dict[str, Any]], Any]:
        return lambda d: {**d, "body": {**d["body"], **kv}}

    def env(**kv: Any) -> Callable[[dict[str, Any]], Any]:
        return lambda d: {**d, **kv}

    def literal(field_name: str, text: bytes) -> Callable[[dict[str, Any]], Any]:
        def go(d: dict[str, Any]) -> bytes:
            doc = {**d, "body": {**d["body"], field_name: "@@"}}
            return _json(doc).replace(b'"@@"', text)

        return go

    return [
        ("nan", literal("depth", b"NaN"), inv),
        ("infinity", literal("depth", b"Infinity"), inv),
        ("1e999", literal("depth", b"1e999"), inv),
        ("huge-int", literal("depth", b"1" + b"0" * 30), inv),
        ("huge-int-300-digits", literal("depth", b"9" * 300), inv),
        ("depth-string", body(depth="deep"), inv),
        ("depth-float", body(depth=1.5), inv),
        ("depth-bool", body(depth=True), inv),
        ("post-id-int", body(post_id=5), inv),
        ("post-id-slash", body(post_id="../../etc/passwd"), inv),
        ("body-list", env(body=[1, 2]), inv),
        ("body-missing", lambda d: {k: v for k, v in d.items() if k != "body"}, inv),
        ("unknown-body-field", body(colour="red"), inv),
        ("unknown-envelope-field", env(admin=True), inv),
        ("time-unix", env(occurred_at=1769558400), inv),
        ("time-naive", env(occurred_at="2026-01-28T12:00:00"), inv),
        ("time-1969", env(occurred_at="1969-12-31T23:59:59Z"), inv),
        ("time-year-1", env(occurred_at="0001-01-01T00:00:00+01:00"), inv),
        ("time-year-9999", env(occurred_at="9999-12-31T23:59:59-01:00"), inv),
        ("event-id-bad", env(event_id="not-a-uuid"), inv),
        ("schema-version-2**64", env(schema_version=2**64), inv),
        ("society-int", env(society=5), inv),
        ("actor-empty", env(actor=""), inv),
        ("actor-space", env(actor="has space"), inv),
        ("actor-too-long", env(actor="a" * 129), inv),
        ("actor-markup", env(actor="<script>alert(1)</script>"), inv),
        ("actor-null", env(actor=None), inv),
        ("actor-unicode", env(actor="ägent"), inv),
        ("type-unknown", env(type="post_deleted"), frozenset({"unknown_type"})),
        ("type-int", env(type=7), frozenset({"unknown_type"})),
        ("type-missing", lambda d: {k: v for k, v in d.items() if k != "type"}, frozenset({"unknown_type"})),
        ("type-long", env(type="x" * 3000), frozenset({"unknown_type"})),
        ("nul-escaped", body(content="before\u0000after"), inv),
        ("nul-raw", lambda d: _json(d).replace(b"says", b"sa\x00ys"), frozenset({"malformed_json"})),
        (
            "lone-surrogate",
            lambda d: _json(body(content="@@")(d)).replace(b"@@", b"\\ud800"),
            frozenset({"malformed_json"}),
        ),
        (
            "reversed-surrogates",
            lambda d: _json(body(content="@@")(d)).replace(b"@@", b"\\udc00\\ud800"),
            frozenset({"malformed_json"}),
        ),
        (
            "utf8-surrogate-bytes",
            lambda d: _json(body(content="@@")(d)).replace(b"@@", b"\xed\xa0\x80"),
            frozenset({"malformed_json"}),
        ),
        (
            "invalid-utf8",
            lambda d: _json(body(content="@@")(d)).replace(b"@@", b"\xff\xfe"),
            frozenset({"malformed_json"}),
        ),
        ("depth-zero", body(depth=0), inv),
        ("depth-10001", body(depth=10_001), inv),
        ("parent-mismatch", body(parent_id=None, depth=3), inv),
        ("content-too-long", body(content="x" * 40_001), inv),
    ]


def _tally_mutations() -> list[tuple[str, Callable[[dict[str, Any]], Any], frozenset[str]]]:
    inv = frozenset({"invalid_fields"})

    def body(**kv: Any) -> Callable[[dict[str, Any]], Any]:
        return lambda d: {**d, "body": {**d["body"], **kv}}

    return [
        ("upvotes-10**20", body(upvotes=10**20), inv),
        ("upvotes-2**53", body(upvotes=2**53), inv),
        ("downvotes-negative", body(downvotes=-1), inv),
        ("reported-2**63", body(reported_comments=2**63), inv),
        ("upvotes-string", body(upvotes="many"), inv),
    ]


def _call_mutations() -> list[tuple[str, Callable[[dict[str, Any]], Any], frozenset[str]]]:
    inv = frozenset({"invalid_fields"})

    def raw_latency(text: bytes) -> Callable[[dict[str, Any]], Any]:
        return lambda d: _json({**d, "body": {**d["body"], "latency_ms": "@@"}}).replace(b'"@@"', text)

    return [
        ("latency-1e999", raw_latency(b"1e999"), inv),
        ("latency-nan", raw_latency(b"NaN"), inv),
        ("latency-inf", raw_latency(b"-Infinity"), inv),
        ("tokens-2**63", lambda d: {**d, "body": {**d["body"], "prompt_tokens": 2**63}}, inv),
    ]


def _bad_marks(now_us: int) -> list[tuple[str, bytes | None]]:
    good = control.watermark("replay", ["replay"], control.to_us(AT), 0, control.to_us(AT))

    def mark(**kv: Any) -> bytes:
        return _json({**good, **kv})

    return [
        ("mark-list", b"[1, 2, 3]"),
        ("mark-string", b'"watermark"'),
        ("mark-number", b"42"),
        ("mark-null", b"null"),
        ("mark-no-value", None),
        ("mark-garbage", b"\x00\x01\x02"),
        ("mark-missing-wm", _json({k: v for k, v in good.items() if k != "watermark_us"})),
        ("mark-missing-producers", _json({k: v for k, v in good.items() if k != "producers"})),
        ("mark-wm-string", mark(watermark_us="soon")),
        ("mark-wm-float", mark(watermark_us=1.5)),
        ("mark-wm-bool", mark(watermark_us=True)),
        ("mark-wm-negative", mark(watermark_us=-1)),
        ("mark-wm-2**62", mark(watermark_us=2**62)),
        ("mark-wm-tomorrow", mark(watermark_us=now_us + 86_400 * 10**6)),
        ("mark-origin-negative", mark(origin_us=-(10**12))),
        ("mark-tick-huge", mark(tick=2**60)),
        ("mark-tick-list", mark(tick=[1])),
        ("mark-final-string", mark(final="yes")),
        ("mark-unknown-field", mark(priority=1)),
        ("mark-producers-string", mark(producers="replay")),
        ("mark-producers-empty", mark(producers=[])),
        ("mark-unknown-producer", mark(producer="intruder", producers=["intruder"])),
        ("mark-unknown-in-list", mark(producers=["replay", "shard-0", "ghost"])),
        ("mark-shard-beyond", mark(producer="shard-99", producers=["shard-99"])),
        ("mark-handoff-to-unknown", mark(handoff=True, producers=["ghost-0", "ghost-1"])),
        ("mark-event-disguised", None),  # filled with a valid event's bytes below
    ]


class HostileCorpus:
    def __init__(self, society: ValidSociety, rng: random.Random, own: RecordKeys, other: RecordKeys) -> None:
        self.soc = society
        self.rng = rng
        self.own, self.other = own, other  # the society's record keys, and a key that is not its
        self.topic = topic_name(society.society, Role.ACTIONS)
        self.mutations = _mutations()
        self.template_n = 0
        self.stored_posts: list[str] = []

    def _template(self) -> E.Event:
        """A fresh valid comment (its own id, never sent as is) to break."""
        self.template_n += 1
        at = AT + timedelta(seconds=self.template_n % 900)
        return E.CommentCreated(
            event_id=uuid7(at, self.rng),
            society=self.soc.society,
            actor="agent-1",
            occurred_at=at,
            body=E.CommentCreatedBody(
                comment_id=f"t-{self.template_n}", post_id="post-x", depth=1, content="hi says"
            ),
        )

    def _doc(self, ev: E.Event) -> dict[str, Any]:
        doc: dict[str, Any] = orjson.loads(encode_event(ev))
        return doc

    def _any_key(self) -> bytes | None:
        return self.rng.choice([None, b"post-1", self.rng.randbytes(8), b"agent:agent-1", b""])

    def round(self, k: int, done: list[E.Event], now_us: int) -> list[Hostile]:
        """The hostile records of round ``k``; ``done``: the valid events already stored."""
        rng = self.rng
        self.stored_posts = [e.body.post_id for e in done if isinstance(e, E.PostCreated)]
        out: list[Hostile] = []
        makers: list[tuple[float, Callable[[], Hostile]]] = [
            (0.18, self.random_bytes),
            (0.10, self.truncated),
            (0.34, self.mutated),
            (0.05, self.mutated_tally),
            (0.04, self.mutated_call),
            (0.05, self.forged_society),
            (0.04, self.missing_thread),
            (0.03, self.future),
            (0.03, self.unsigned),
            (0.02, self.other_signature),
            (0.02, self.stolen_signature),
        ]
        if done:
            makers += [
                (0.06, lambda: self.conflicting(done)),
                (0.04, lambda: self.other_key(done)),
                (0.04, lambda: self.other_partition(done)),
            ]
        weights = [w for w, _ in makers]
        for _ in range(HOSTILE_PER_ROUND):
            out.append(rng.choices(makers, weights)[0][1]())
        out.extend(self.marks(now_us, done))
        out.extend(self.nested(k))
        out.extend(self.large(k))
        return out

    # --- kinds
    def random_bytes(self) -> Hostile:
        value = self.rng.randbytes(self.rng.randrange(0, 400))
        return Hostile(value, self._any_key(), DECODE_CODES, "random-bytes")

    def truncated(self) -> Hostile:
        raw = encode_event(self._template())
        return Hostile(
            raw[: self.rng.randrange(1, len(raw) - 1)],
            self._any_key(),
            frozenset({"malformed_json"}),
            "truncated",
        )

    def _apply(
        self, ev: E.Event, muts: list[tuple[str, Callable[[dict[str, Any]], Any], frozenset[str]]]
    ) -> Hostile:
        kind, mutate, codes = self.rng.choice(muts)
        new = mutate(self._doc(ev))
        raw = new if isinstance(new, bytes) else _json(new)
        return Hostile(raw, key_of(ev), codes, kind)

    def mutated(self) -> Hostile:
        return self._apply(self._template(), self.mutations)

    def mutated_tally(self) -> Hostile:
        """A tally of a stored post (one that would reach the feeds if it were accepted)."""
        pid = self.rng.choice(self.stored_posts) if self.stored_posts else "post-0"
        ev = E.VoteTallied(
            event_id=uuid7(AT, self.rng),
            society=self.soc.society,
            actor="importer",
            occurred_at=AT + timedelta(seconds=VALID),
            body=E.VoteTalliedBody(target_type="post", target_id=pid, post_id=pid, upvotes=1, downvotes=0),
        )
        return self._apply(ev, _tally_mutations())

    def mutated_call(self) -> Hostile:
        ev = E.ModelCalled(
            event_id=uuid7(AT, self.rng),
            society=self.soc.society,
            actor="agent-2",
            occurred_at=AT,
            body=E.ModelCalledBody(model="m", outcome="ok", decision="nothing", latency_ms=1.5),
        )
        return self._apply(ev, _call_mutations())

    def forged_society(self) -> Hostile:
        ev = self._template().model_copy(update={"society": "victim_society"})
        return Hostile(encode_event(ev), key_of(ev), frozenset({"wrong_society"}), "forged-society")

    def missing_thread(self) -> Hostile:
        ev = self._template().model_copy(
            update={"body": E.CommentCreatedBody(comment_id="c", post_id=f"nope-{self.template_n}", depth=1)}
        )
        return Hostile(encode_event(ev), key_of(ev), frozenset({"unknown_post"}), "missing-thread")

    def future(self) -> Hostile:
        ev = self._template().model_copy(update={"occurred_at": datetime.now(UTC) + timedelta(days=30)})
        return Hostile(encode_event(ev), key_of(ev), frozenset({"future_event_time"}), "future")

    # records that would be accepted if the stack had written them (``runtime.record_auth``)
    def _valid_post(self) -> tuple[bytes, bytes]:
        self.template_n += 1
        pid = f"outsider-{self.template_n}"
        ev = E.PostCreated(
            event_id=uuid7(AT, self.rng),
            society=self.soc.society,
            actor="agent-1",
            occurred_at=AT + timedelta(seconds=self.template_n % 900),
            body=E.PostCreatedBody(post_id=pid, submolt="general", title="a post from outside"),
        )
        return encode_event(ev), pid.encode()

    def unsigned(self) -> Hostile:
        """A valid post, or a valid watermark, without a signature."""
        if self.rng.random() < 0.3:
            good = control.watermark("replay", ["replay"], control.to_us(AT), -1, control.to_us(AT))
            return Hostile(
                _json(dict(good)),
                None,
                AUTH_CODES,
                "unsigned-mark",
                self.rng.randrange(PARTITIONS),
                MARK,
                False,
            )
        value, key = self._valid_post()
        return Hostile(value, key, AUTH_CODES, "unsigned", signed=False)

    def other_signature(self) -> Hostile:
        """A valid post signed with another key."""
        value, key = self._valid_post()
        return Hostile(
            value,
            key,
            AUTH_CODES,
            "other-key-sig",
            headers=self.other.headers(self.topic, key, value),
            signed=False,
        )

    def stolen_signature(self) -> Hostile:
        """A valid post carrying the society's own signature of another record."""
        value, key = self._valid_post()
        theirs, _ = self._valid_post()
        return Hostile(
            value,
            key,
            AUTH_CODES,
            "stolen-sig",
            headers=self.own.headers(self.topic, key, theirs),
            signed=False,
        )

    def conflicting(self, done: list[E.Event]) -> Hostile:
        """A stored event's id with another body: another post id (so another key), or other content."""
        ev = self.rng.choice(done)
        doc = self._doc(ev)
        if isinstance(ev, E.PostCreated):
            doc["body"]["post_id"] = f"hijack-{self.rng.randrange(10**9)}"
            key = doc["body"]["post_id"].encode()
        elif isinstance(ev, E.CommentCreated):
            doc["body"]["content"] = "rewritten history"
            key = key_of(ev)
        elif isinstance(ev, E.AgentRegistered):
            doc["body"]["name"] = "Impostor"
            key = key_of(ev)
        else:  # any other event re-used as a new post under the same id
            doc["type"], doc["body"] = (
                "post_created",
                {"post_id": f"hijack-{self.rng.randrange(10**9)}", "submolt": "general", "title": "x"},
            )
            key = doc["body"]["post_id"].encode()
        return Hostile(orjson.dumps(doc), key, frozenset({"conflicting_event_id"}), "conflicting-id")

    def other_key(self, done: list[E.Event]) -> Hostile:
        ev = self.rng.choice(done)
        key = self.rng.choice(
            [None, b"", b"post-0" if key_of(ev) != b"post-0" else b"post-1", b"agent:nobody"]
        )
        return Hostile(encode_event(ev), key, frozenset({"key_mismatch"}), "same-bytes-other-key")

    def other_partition(self, done: list[E.Event]) -> Hostile:
        ev = self.rng.choice(done)
        wrong = (right_partition(key_of(ev)) + self.rng.randrange(1, PARTITIONS)) % PARTITIONS
        return Hostile(
            encode_event(ev), key_of(ev), frozenset({"wrong_partition"}), "same-bytes-other-partition", wrong
        )

    def marks(self, now_us: int, done: list[E.Event]) -> list[Hostile]:
        out = []
        for kind, value in _bad_marks(now_us):
            if kind == "mark-event-disguised":
                value = encode_event(done[0] if done else self._template())
            key = None if value is not None else b"tombstone"  # Kafka needs a key or a value
            out.append(
                Hostile(value, key, frozenset({"bad_control"}), kind, self.rng.randrange(PARTITIONS), MARK)
            )
        return out

    def nested(self, k: int) -> list[Hostile]:
        deep = b"[" * 100_000 if k % 2 == 0 else b'{"a":' * 20_000
        return [
            Hostile(deep, None, frozenset({"too_large"}), "nested-100k"),
            Hostile(b"[" * 30_000, None, frozenset({"malformed_json"}), "nested-30k"),
            Hostile(
                b'{"a":' * 5_000 + b"1" + b"}" * 5_000, None, frozenset({"malformed_json"}), "nested-objects"
            ),
        ]

    def large(self, k: int) -> list[Hostile]:
        if k == 2:
            mb = b'{"type": "post_created", "body": {"content": "' + b"x" * 1_000_000 + b'"}}'
            return [Hostile(mb, b"post-1", frozenset({"too_large"}), "1mb") for _ in range(3)]
        if k == 4:
            return [Hostile(b"Q" * (10 * 2**20), b"k" * 5_000, frozenset({"too_large"}), "10mb")]
        if k == 6:
            return [
                Hostile(
                    b"[" + b"1," * (5 * 2**20) + b"1]", None, frozenset({"bad_control"}), "10mb-mark", 0, MARK
                )
            ]
        return []


# ------------------------------------------------------------------------------------------ runner
def _interleave(
    rng: random.Random, valid: list[E.Event], others: list[Hostile | bytes]
) -> Iterator[E.Event | Hostile | bytes]:
    """``others`` in random order with ``valid`` spread among them, valid order kept (threads are causal)."""
    mixed: list[E.Event | Hostile | bytes] = list(others)
    rng.shuffle(mixed)
    slots = sorted(rng.randrange(len(mixed) + 1) for _ in valid)
    it = iter(valid)
    prev = 0
    for slot in slots:
        yield from mixed[prev:slot]
        yield next(it)
        prev = slot
    yield from mixed[prev:]


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return
            self.stop.wait(0.2)


def _wait(stack: LocalStack, query: str, want: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    got = -1
    while time.monotonic() < deadline:
        got = int(sql(stack, query)[0][0])
        if got >= want:
            return got
        assert stack.dead_children() == [], "a pipeline process died"
        time.sleep(0.3)
    return got


def _rejected_in(logs: list[Path]) -> set[tuple[int, int]]:
    """(partition, offset) of every action the stream workers logged as rejected (``action.rejected``):
    tells a record the worker never dead-lettered from a dead letter lost on its way to the table."""
    found: set[tuple[int, int]] = set()
    for path in logs:
        for line in path.read_text(errors="replace").splitlines():
            if '"action.rejected"' in line:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    doc = orjson.loads(line)
                    found.add((int(doc["partition"]), int(doc["offset"])))
    return found


def test_hostile_records_are_dead_lettered_and_valid_ones_stored_once(
    broker: str, tmp_path: Path, society_name: str
) -> None:
    s = society_name
    rng = random.Random(SEED)
    society = ValidSociety(s, rng)
    settings = make_settings(broker, tmp_path, partitions=PARTITIONS)
    corpus = HostileCorpus(society, rng, RecordKeys(settings.state_dir), RecordKeys(tmp_path / "not-the-key"))
    valid_ids = {str(e.event_id) for e in society.events}
    assert len(society.events) == VALID == len(valid_ids)
    topic = topic_name(s, Role.ACTIONS)
    origin = control.to_us(AT) - control.to_us(AT) % int(settings.window_seconds * 1_000_000)
    sent: dict[tuple[int, int], Hostile] = {}  # (partition, offset) -> hostile record
    redelivered = 0
    began = time.monotonic()

    with running_stack(settings, s, agents=False) as stack:
        pids = {c.role: c.process.pid for c in stack.children}
        sampler = RssSampler(pids["streams"])
        sampler.start()

        async def produce() -> None:
            nonlocal redelivered
            p = kafka.producer(
                stack.bootstrap, "small", keys=RecordKeys(settings.state_dir), max_request_size=16 << 20
            )
            outsider = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, max_request_size=16 << 20)
            await p.start()
            await outsider.start()
            try:
                for k in range(ROUNDS):
                    done = society.events[: k * VALID // ROUNDS]
                    batch = society.events[k * VALID // ROUNDS : (k + 1) * VALID // ROUNDS]
                    hostile = corpus.round(k, done, int(time.time() * 1_000_000))
                    copies = [
                        encode_event(rng.choice(done)) for _ in range(REDELIVERIES_PER_ROUND if done else 0)
                    ]
                    redelivered += len(copies)
                    pending: list[tuple[Hostile | None, Any]] = []
                    for item in _interleave(rng, batch, [*hostile, *copies]):
                        if isinstance(item, Hostile):
                            fut = await (p if item.signed else outsider).send(
                                topic,
                                item.value,
                                key=item.key,
                                partition=item.partition,
                                headers=item.headers,
                            )
                            pending.append((item, fut))
                        elif isinstance(item, bytes):  # a redelivery: the same bytes, key and partition
                            doc = orjson.loads(item)
                            pending.append(
                                (None, await p.send(topic, item, key=E.partition_key_of(doc).encode()))
                            )
                        else:
                            pending.append((None, await p.send(topic, encode_event(item), key=key_of(item))))
                    # the publisher's watermark: nothing earlier than this round's last event will follow
                    wm = control.to_us(batch[-1].occurred_at) + 1
                    mark = control.dumps(
                        control.watermark("replay", ["replay"], wm, k, origin, final=k == ROUNDS - 1)
                    )
                    for q in range(PARTITIONS):
                        pending.append((None, await p.send(topic, mark, partition=q, headers=MARK)))
                    for item, fut in pending:
                        md = await fut
                        if item is not None:
                            sent[(md.partition, md.offset)] = item
                    # this round's valid events are stored before the next round copies them
                    stored = (k + 1) * VALID // ROUNDS
                    got = _wait(stack, f"SELECT count() FROM events WHERE society = '{s}'", stored, 90)
                    assert got >= stored, f"round {k}: {got} of {stored} valid events stored"
            finally:
                await p.stop()
                await outsider.stop()

        asyncio.run(produce())
        n_hostile = len(sent)
        dead_n = _wait(stack, f"SELECT count() FROM dead_letters WHERE society = '{s}'", n_hostile, 120)
        metrics = _wait(stack, f"SELECT count() FROM metrics WHERE society = '{s}'", 1, 60)
        stored = sql(
            stack, f"SELECT toString(event_id), count() FROM events WHERE society = '{s}' GROUP BY event_id"
        )
        elsewhere = sql(stack, f"SELECT count() FROM events WHERE society != '{s}'")[0][0]
        dead = sql(
            stack,
            "SELECT origin_partition, origin_offset, code, reason, lengthUTF8(value), length(key) "
            f"FROM dead_letters WHERE society = '{s}'",
        )
        time.sleep(1.0)  # the last samples, and time for a crash to show
        sampler.stop.set()
        sampler.join()
        alive = {c.role: c.process.poll() is None for c in stack.children}
        after = {c.role: c.process.pid for c in stack.children}
        worker_logs = [c.log_path for c in stack.children if c.role == "streams"]
        dead_children = stack.dead_children()
    elapsed = time.monotonic() - began
    kinds = Counter(h.kind for h in sent.values())
    print(
        f"\nfuzz: {n_hostile:,} hostile records of {len(kinds)} kinds, {VALID:,} valid events, "
        f"{redelivered:,} redeliveries; {dead_n:,} dead letters; {metrics:,} metric rows; "
        f"stream worker peak RSS {sampler.peak / 2**20:,.0f} MiB; {elapsed:,.0f} s\n"
        f"dead letters by code: {dict(Counter(str(row[2]) for row in dead).most_common())}"
    )

    assert n_hostile >= 10_000
    # every valid event stored exactly once, nothing else, in no other society
    assert {eid: n for eid, n in stored} == dict.fromkeys(valid_ids, 1)
    assert elsewhere == 0
    # every hostile record dead-lettered once, with the code of its kind and a readable reason
    missing = sent.keys() - {(int(row[0]), int(row[1])) for row in dead}
    assert not missing, (
        f"{len(dead)} dead letters for {n_hostile} hostile records; none for {len(missing)}: by kind "
        f"{dict(Counter(sent[w].kind for w in missing).most_common())}, by partition "
        f"{dict(Counter(w[0] for w in missing))}, offsets {sorted(missing)[:20]}; "
        f"{len(missing & _rejected_in(worker_logs))} of them rejected by the stream worker (its log)"
    )
    assert len(dead) == n_hostile, f"{len(dead)} dead letters for {n_hostile} hostile records"
    seen: set[tuple[int, int]] = set()
    wrong: list[str] = []
    for partition, offset, code, reason, value_len, key_len in dead:
        where = (int(partition), int(offset))
        assert where in sent, f"a dead letter of no hostile record: {where} {code} {reason}"
        assert where not in seen, f"dead-lettered twice: {where}"
        seen.add(where)
        h = sent[where]
        if code not in h.codes:
            wrong.append(f"{h.kind}: {code} ({reason})")
        assert reason.strip(), h.kind
        assert reason.isprintable(), (h.kind, reason)
        assert len(reason) <= 3_000, (h.kind, reason)
        assert (
            value_len <= DLQ_PREFIX
        )  # characters (the sink stores the bytes as text, invalid UTF-8 replaced)
        assert key_len <= 1024 * 3
        if h.value is not None and len(h.value) > DLQ_PREFIX:
            assert value_len == DLQ_PREFIX
            assert f"keeps its first 1,048,576 of {len(h.value):,} bytes" in reason
    assert not wrong, f"{len(wrong)} records with an unexpected code, e.g. {wrong[:5]}"
    # no process restarted or died; memory bounded
    assert dead_children == []
    assert after == pids
    assert all(alive.values()), alive
    assert 0 < sampler.peak < MAX_RSS
    assert metrics > 0  # valid watermarks still closed windows among the forged ones
