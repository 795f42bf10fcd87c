"""From the records of all files to the project's events: dedupe, thread resolution, registrations, tallies.

Contract (what the events say, and only that):

- One ``post_created`` per distinct post id and one ``comment_created`` per distinct comment id. A
  second copy of an id (another file, or the same file) makes no event: it is reported as a duplicate
  in the file it appears in, or as a conflict when its content differs (the first copy is kept; files
  are read in sorted path order, records in file order).
- A comment's depth comes from its parent chain (1 = top-level). A source that gives only a 0-based
  depth and no parent (flat exports) yields ``parent_id`` null, depth ``d + 1`` and
  ``parent_unknown`` when not top-level. A comment whose post is not in the dump is skipped ("post
  not in dump"); one whose parent is named but absent is skipped ("parent not in dump"), and so,
  transitively, are its replies ("parent skipped").
- Votes exist only as counts: one ``vote_tallied`` per post when its upvotes, downvotes or
  ``comment_count`` is above zero (``reported_comments`` = the platform's ``comment_count``, which may
  exceed the comments present; missing comments are never made up), and one per comment when its
  upvotes or downvotes are above zero. A post or comment whose counts are all zero has no tally: it
  would say nothing. A source with only a net ``score`` gives ``upvotes = score`` (score > 0) or
  ``downvotes = -score`` (score < 0), so the net is exact; this is noted per record. A tally's time is
  its target's creation time plus 1 microsecond (the dumps do not say when counts were observed; this
  keeps it right after its target in event order and its id stable across imports).
- Snapshots (``importers.snapshot_folders``): when the files come from at least two snapshot folders, they are
  read in snapshot-time order, so a post's or comment's first copy is its earliest snapshot's. A copy in
  a later snapshot is no duplicate: its counts are compared with the highest seen so far and what they
  gained becomes a ``vote_tallied`` at that snapshot's time (upvotes and downvotes gained; for a net
  ``score`` the change of the net, either way, so the tallies' net is the latest score; a post's
  ``reported_comments`` when its ``comment_count`` grew), so the sums of a target's tallies (what every
  view and the stream workers add up) are the counts of its latest snapshot. A count that falls between
  snapshots (an upvote withdrawn) cannot be a tally: the highest seen is kept and the fall is noted.
- One ``agent_registered`` per distinct author, at the registration time an agents listing gives, else
  at the author's first post or comment; actor = the agent. Agent id = the API's author id, else
  ``name:<name>`` (names are not unique over time; such agents are noted). A missing author makes the
  actor ``unknown`` (not registered). Agents of a listing with neither a registration time nor a post or
  comment are skipped.
- One ``submolt_created`` per submolt named by a post, at its first post's time, actor ``platform``
  (display name and description from a submolts listing when present). A post without a submolt gets
  the submolt ``unknown`` (not registered). Listed submolts without posts have no time: skipped.
- Event ids: a UUIDv7 of ``occurred_at`` whose random bits are the first 74 bits of
  ``blake2b(f"{kind}:{source_id}")``, so the same source always gives the same ids. ``causation_id``: the
  post for a top-level comment, the parent for a reply, the target for a tally; the follower's id for a
  follow (``agent_followed``, one per distinct pair of an observatory ``follows`` table, at its
  ``first_seen_at``).
- Every event is built with the pydantic models. Titles are cut to 300 characters, names to 200,
  descriptions to 4000, content to 40,000 characters (the contract's string limit) and further so that
  the encoded event stays under ``EVENT_MAX_BYTES``; each cut is noted.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from pydantic import ValidationError

from molt_society.importers import scratch
from molt_society.importers.file_report import FileReport
from molt_society.importers.made import MakersLike, Said, light_comment, light_post
from molt_society.importers.records import (
    AgentRecord,
    Author,
    CommentRecord,
    Counts,
    FileRecords,
    Origin,
    PostRecord,
    SubmoltRecord,
    sanitise_id,
)
from molt_society.importers.scratch import COMMENT_COLUMNS, POST_COLUMNS, Row, Scratch
from molt_society.importers.spill import SortedSpill
from molt_society.schemas.control import from_us, to_us
from molt_society.schemas.events import (
    AgentFollowed,
    AgentFollowedBody,
    AgentRegistered,
    AgentRegisteredBody,
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
    SubmoltCreated,
    SubmoltCreatedBody,
    VoteTallied,
    VoteTalliedBody,
)
from molt_society.schemas.ids import uuid7_of_bits
from molt_society.schemas.wire import encode_event

TITLE_MAX = 300
NAME_MAX = 200
TEXT_MAX = 4000
CONTENT_MAX_CHARS = 40_000
EVENT_MAX_BYTES = 60_000
"""Budget of one encoded event, under the processor's default 64 KiB limit (larger ones are dead-lettered)."""
MAX_DEPTH = 10_000
UNKNOWN_ACTOR = "unknown"
PLATFORM = "platform"
UNKNOWN_SUBMOLT = "unknown"
IMPORTED_BRAIN = "imported"
TALLY_OFFSET = timedelta(microseconds=1)
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)

E = TypeVar("E", PostCreated, CommentCreated)
R = TypeVar("R", PostRecord, CommentRecord)
_FILLABLE = ("title", "content", "author", "submolt")


_ACT_SCHEMA = """
CREATE TABLE act (at INTEGER, seq INTEGER, actor TEXT, name TEXT, file INTEGER, position TEXT);
CREATE TABLE renamed (actor TEXT PRIMARY KEY);
"""
"""One row per emitted post and comment: its author's name, for the notes of authors seen under another name
(``Builder._authors``)."""

_FirstAct = list[Any]
"""What ``Builder._act`` keeps of one actor's acts (``_AT`` ... ``_DESCR``): its first act in time order
(time, emission number, author id, name, description, file, position), the first name it was seen with,
whether another followed, and its first act with a description (time, description)."""
_AT, _SEQ, _AID, _NAME, _DESC, _FILE, _POS, _NAME0, _OTHER, _DKEY, _DESCR = range(11)


def _same(a: object, b: object) -> bool:
    """Whether two copies agree on a field (a field either copy does not give always agrees)."""
    if a is None or b is None:
        return True
    if isinstance(a, Author) and isinstance(b, Author):
        return a.same_as(b)
    return a == b


def event_id(kind: str, source_id: str, at: datetime) -> UUID:
    """The deterministic event id of the ``kind`` event made from source record ``source_id``.

    (A hash, not ``random.Random(key)``: seeding a Mersenne Twister per event was a fifth of an import.)"""
    digest = hashlib.blake2b(f"{kind}:{source_id}".encode(), digest_size=10).digest()
    return uuid7_of_bits(at, int.from_bytes(digest, "big") >> 6)


def _schema_error(exc: ValidationError) -> str:
    parts = [".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in exc.errors(include_url=False)[:3]]
    return "; ".join(parts)


@dataclass(frozen=True)
class _Resolved:
    depth: int | None  # None when skipped
    reason: str = ""


@dataclass
class _Agent:
    agent_id: str
    name: str
    first_at: datetime | None
    origin: Origin | None
    description: str | None = None
    listed: AgentRecord | None = None


class Builder:
    """Turns the records of all files of one import into events, reporting into each file's entry.

    The records are in ``store`` (``importers.scratch``), on disk: what the builder holds in memory is one
    record at a time plus what grows with the number of agents and submolts (not with posts or
    comments), and the ids of records that could not be read or made no event."""

    def __init__(
        self,
        society: str,
        files: list[FileRecords],
        store: Scratch,
        spill: SortedSpill | None = None,
        makers: Callable[[Builder], MakersLike | None] | None = None,
    ) -> None:
        """``spill``: where the events go, encoded and sorted on disk (``import_stream``); without it
        they are kept as models in ``events`` (``import_path``). ``makers``: what starts worker processes
        for the posts' and comments' events, or says not to (``importers.makers.start``)."""
        self.society = society
        self.files = files
        self.store = store
        self.reports: dict[str, FileReport] = {f.report.file: f.report for f in files}
        self.events: list[Event] = []
        self.spill = spill
        self.notes: list[str] = []
        self.unreadable_posts: set[str] = set()
        self.unreadable_comments: set[str] = set()
        self.failed_comments: set[str] = set()
        """Comments resolved into a thread that made no event (their replies are "parent skipped")."""
        self.snapshot_of = {f.report.file: f.snapshot_at for f in files}
        self.series = len({f.snapshot_at for f in files if f.snapshot_at is not None}) >= 2
        if self.series:  # earliest snapshot first (files without a snapshot time before all), stable
            self.files = sorted(files, key=lambda f: f.snapshot_at or EARLIEST)
        store.series = self.series
        self._told: list[tuple[int, int, int, int, int, str, str, str]] | None = None
        self._told_at = (0, 0)  # (snap, seq) of the copy being compared
        self._told_n = 0
        self._has_later = False  # whether a copy in a later snapshot was seen (table ``later``)
        for f in files:
            self.unreadable_posts |= f.unreadable_posts
            self.unreadable_comments |= f.unreadable_comments
        self._file_no = {name: i for i, name in enumerate(store.files)}
        self._acts: list[tuple[int, int, str, str | None, int, str]] = []
        self._act_seq = 0
        self._first_acts: dict[str, _FirstAct] = {}
        self._act_db: sqlite3.Connection | None = None
        """The ``act`` table's database, beside the records' (``Scratch.side``), made by ``build``."""
        self._first_post: dict[str, tuple[datetime, int, PostRecord]] = {}  # submolt -> its first post
        self._counted = [0, 0]  # posts giving comment_count, their positive counts' sum
        self._posts_emitted = 0
        self._comments_emitted = 0
        self.start_makers = makers
        self.makers: MakersLike | None = None
        """Worker processes that make the posts' and comments' events (a large spilled import)."""

    # --- helpers ----------------------------------------------------------------------------------

    def _skip(self, origin: Origin, reason: str, detail: str = "") -> None:
        if self._told is not None:
            self._tell(1, origin, reason, detail)
            return
        self.reports[origin.file].skip(reason, origin.position, detail)

    def _note(self, origin: Origin, reason: str, detail: str = "") -> None:
        if self._told is not None:
            self._tell(0, origin, reason, detail)
            return
        self.reports[origin.file].note(reason, origin.position, detail)

    def _tell(self, skip: int, origin: Origin, reason: str, detail: str) -> None:
        """Keep a skip or note of the de-duplication, reported later in read order (``_retell``)."""
        assert self._told is not None
        snap, seq = self._told_at
        self._told_n += 1
        row = (snap, seq, self._told_n, skip, self._file_no[origin.file], origin.position, reason, detail)
        self._told.append(row)
        if len(self._told) >= scratch.BATCH:
            self.store.db.executemany("INSERT INTO told VALUES (?, ?, ?, ?, ?, ?, ?, ?)", self._told)
            self._told.clear()

    def _retell(self) -> None:
        """Report what the de-duplication kept back, in the order the records were read (the report's
        examples are the first copies met, as a reader of the files would meet them)."""
        told, self._told = self._told, None
        assert told is not None
        db = self.store.db
        db.executemany("INSERT INTO told VALUES (?, ?, ?, ?, ?, ?, ?, ?)", told)
        order = f"{self.store.order()}, n"
        for skip, file, position, reason, detail in self.store.rows(
            f"SELECT skip, file, position, reason, detail FROM told ORDER BY {order}"
        ):
            (self._skip if skip else self._note)(self.store.origin(file, position), reason, detail)
        db.execute("DELETE FROM told")

    def _emit(self, origin: Origin, event: Event, wire: bytes | None = None) -> None:
        """Keep ``event`` (``wire``: its encoding, when already made)."""
        if self.spill is not None:
            self.spill.add(to_us(event.occurred_at), event.event_id.bytes, wire or encode_event(event))
        else:
            self.events.append(event)
        self.reports[origin.file].events[event.type] += 1

    def _emit_valid(self, origin: Origin, what: str, build: Callable[[], Event]) -> bool:
        """Emit the event ``build`` makes; one the event schema refuses is skipped as ``<what> not valid
        for the event schema``. Whether it was emitted."""
        try:
            event = build()
        except ValidationError as exc:
            self._skip(origin, f"{what} not valid for the event schema", _schema_error(exc))
            return False
        self._emit(origin, event)
        return True

    def _text(self, origin: Origin, value: str | None, limit: int, what: str) -> str:
        if value is None:
            return ""
        if len(value) > limit:
            self._note(origin, f"{what} truncated to {limit:,} characters", f"was {len(value):,}")
            return value[:limit]
        return value

    def _actor(self, author: Author | None, origin: Origin) -> str:
        if author is None:
            self._note(origin, f"author missing (actor {UNKNOWN_ACTOR!r}, not registered)")
            return UNKNOWN_ACTOR
        if author.id is not None:
            agent_id = sanitise_id(author.id)
            if agent_id != author.id:
                self._note(origin, "author id has characters outside the id pattern (replaced by _)")
            return agent_id
        name = author.name or ""
        agent_id = ("name:" + sanitise_id(name))[:128]
        self._note(origin, "author known only by name (agent id name:<name>)")
        if agent_id != "name:" + name:
            self._note(origin, "author name does not fit the id pattern (sanitised)", repr(name)[:60])
        return agent_id

    def _fit(self, origin: Origin, make: Callable[[str], E], content: str | None) -> tuple[E, bytes]:
        """The event ``make`` builds from ``content``, cut to fit ``EVENT_MAX_BYTES``, and its encoding."""
        text = self._text(origin, content, CONTENT_MAX_CHARS, "content")
        event = make(text)
        wire = encode_event(event)
        if len(wire) > EVENT_MAX_BYTES:
            original = len(text)
            while len(wire) > EVENT_MAX_BYTES and text:
                text = text[: max(0, len(text) - (len(wire) - EVENT_MAX_BYTES))]
                event = make(text)
                wire = encode_event(event)
            self._note(
                origin,
                f"content truncated to fit an event of {EVENT_MAX_BYTES:,} bytes",
                f"{original:,} -> {len(text):,} characters",
            )
        return event, wire

    def _act(self, at: datetime, author: Author | None, actor: str, origin: Origin) -> None:
        """Remember an emitted post's or comment's author for the registrations (``_authors``): what its
        actor's first act in time is so far (in memory: one entry per actor), and the act's name on disk."""
        if author is None:
            return
        self._act_seq += 1
        a, at_us, seq = author, to_us(at), self._act_seq
        file, position = self._file_no[origin.file], origin.position
        self._acts.append((at_us, seq, actor, a.name, file, position))
        if len(self._acts) >= scratch.BATCH:
            self._flush_acts()
        first = self._first_acts.get(actor)
        name, description = a.name, a.description
        if first is None:
            self._first_acts[actor] = [
                at_us, seq, a.id, name, description, file, position, name, False,
                at_us if description else None, description or None,
            ]  # fmt: skip
            return
        # an act comes after every act before it in emission order, so its time alone says if it is earlier
        if at_us < first[_AT]:
            first[_AT:_NAME0] = at_us, seq, a.id, name, description, file, position
        if name is not None and name != first[_NAME0]:
            if first[_NAME0] is None:
                first[_NAME0] = name
            else:
                first[_OTHER] = True
        if description and (first[_DKEY] is None or at_us < first[_DKEY]):
            first[_DKEY], first[_DESCR] = at_us, description

    def _flush_acts(self) -> None:
        assert self._act_db is not None  # made by build() before any post or comment is emitted
        self._act_db.executemany("INSERT INTO act VALUES (?, ?, ?, ?, ?, ?)", self._acts)
        self._acts.clear()

    # --- dedupe -----------------------------------------------------------------------------------

    def _dedupe(self, kind: str, read: Callable[[Row], R], blob: Callable[[R], bytes]) -> None:
        """Mark every copy of an id but the first as ``dup``; complete the first with fields only later
        identical copies give (written back to its ``rec``).

        Two copies are compared on the fields both give (a field one copy lacks is no difference;
        authors by id when both have one, else by name). A later copy that differs is a conflict (first
        kept); one that agrees is a duplicate, and fills in ``None`` fields of the kept copy that are
        simple values (title, content, author, submolt), never its thread position. Only ids with more
        than one copy are read (an index on ``id`` finds them).
        """
        db, order = self.store.db, self.store.order("t")
        cols = POST_COLUMNS if kind == "post" else COMMENT_COLUMNS
        db.execute(f"CREATE TABLE {kind}_fill (seq INTEGER PRIMARY KEY, rec BLOB NOT NULL)")
        db.execute(f"CREATE TABLE {kind}_drop (seq INTEGER PRIMARY KEY)")
        query = (
            f"SELECT t.snap, t.seq, {cols} FROM {kind} t JOIN {kind}_rec r ON r.seq = t.seq WHERE t.id IN "
            f"(SELECT id FROM {kind} GROUP BY id HAVING count(*) > 1) ORDER BY t.id, {order}"
        )
        first: R | None = None
        first_seq = 0
        filled = False
        drops: list[tuple[int]] = []
        fills: list[tuple[int, bytes]] = []

        def done() -> None:
            if first is not None and filled:
                fills.append((first_seq, blob(first)))
            if len(fills) >= scratch.BATCH:
                db.executemany(f"INSERT INTO {kind}_fill VALUES (?, ?)", fills)
                fills.clear()

        self._told = []
        for row in self.store.rows(query):
            rec = read(row[2:])
            if first is None or rec.id != first.id:
                done()
                first, first_seq, filled = rec, row[1], False
                continue
            drops.append((row[1],))
            self._told_at = (row[0], row[1])
            kept = self._same_copy(kind, first, rec)
            if kept is not first:
                first, filled = kept, True
            if len(drops) >= scratch.BATCH:
                db.executemany(f"INSERT INTO {kind}_drop VALUES (?)", drops)
                drops.clear()
        done()
        self._retell()
        db.executemany(f"INSERT INTO {kind}_drop VALUES (?)", drops)
        db.executemany(f"INSERT INTO {kind}_fill VALUES (?, ?)", fills)
        db.execute(f"UPDATE {kind} SET dup = 1 WHERE seq IN (SELECT seq FROM {kind}_drop)")
        db.execute(
            f"UPDATE {kind}_rec SET rec = (SELECT f.rec FROM {kind}_fill f WHERE f.seq = {kind}_rec.seq) "
            f"WHERE seq IN (SELECT seq FROM {kind}_fill)"
        )

    def _same_copy(self, kind: str, first: R, rec: R) -> R:
        """Report a later copy ``rec`` of ``first``; the kept copy (``first``, or ``first`` completed)."""
        where = f"first copy: {first.origin.file} {first.origin.position}"
        a, b = first.identity(), rec.identity()
        differ = sorted(k for k in a if not _same(a[k], b[k]))
        if differ:
            self._skip(
                rec.origin,
                f"conflict: {kind} id seen before with different content (first kept)",
                f"{rec.id}: {', '.join(differ)} differ; {where}",
            )
            return first
        later = self._later_snapshot(first.origin, rec.origin)
        if later is not None:
            c = rec.counts
            self.store.db.execute(
                "INSERT INTO later VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    rec.id,
                    to_us(later),
                    c.upvotes,
                    c.downvotes,
                    c.score,
                    c.comment_count,
                    self._file_no[rec.origin.file],
                    rec.origin.position,
                ),
            )
            self._has_later = True
        kept = first
        filled = {k: getattr(rec, k) for k in _FILLABLE if getattr(first, k, 0) is None}
        filled = {k: v for k, v in filled.items() if v is not None}
        if filled:
            kept = dataclasses.replace(first, **filled)
            self._note(
                rec.origin,
                f"duplicate {kind} id gives fields the first copy lacks (filled in)",
                f"{rec.id}: {', '.join(sorted(filled))}; {where}",
            )
        if later is not None:
            self._note(rec.origin, f"{kind} seen again in a later snapshot (its count changes tallied)")
        elif first.counts != rec.counts:
            self._skip(
                rec.origin,
                f"duplicate {kind} id, vote/comment counts differ (first snapshot kept)",
                f"{rec.id}; {where}",
            )
        else:
            self._skip(rec.origin, f"duplicate {kind} id (same record)", f"{rec.id}; {where}")
        return kept

    def _later_snapshot(self, first: Origin, copy: Origin) -> datetime | None:
        """The snapshot time of ``copy`` when it is in a later snapshot than ``first`` (a series only)."""
        if not self.series:
            return None
        at, before = self.snapshot_of.get(copy.file), self.snapshot_of.get(first.file)
        return at if at is not None and (before is None or at > before) else None

    # --- build ------------------------------------------------------------------------------------

    def build(self) -> list[Event]:
        """All events, sorted by (occurred_at, event_id) (none when they went to the spill)."""
        store, db = self.store, self.store.db
        store.flush()
        db.executescript(
            """
            CREATE INDEX post_by_id ON post (id);
            CREATE INDEX comment_by_id ON comment (id);
            CREATE INDEX comment_by_parent ON comment (parent_id);
            CREATE TABLE bad_post (id TEXT PRIMARY KEY);
            CREATE TABLE told (snap INTEGER, seq INTEGER, n INTEGER, skip INTEGER, file INTEGER,
                position TEXT, reason TEXT, detail TEXT);
            CREATE TABLE later (kind TEXT, id TEXT, at INTEGER, up INTEGER, down INTEGER, score INTEGER,
                cc INTEGER, file INTEGER, position TEXT);
            """
        )
        self._act_db = store.side("acts", _ACT_SCHEMA)
        self._dedupe("post", store.post, store.post_blob)
        self._dedupe("comment", store.comment, store.comment_blob)
        db.execute("CREATE INDEX later_by_target ON later (kind, id, at)")
        self.makers = None if self.start_makers is None else self.start_makers(self)
        try:
            self._posts()
            self._resolve()
            self._comments()
            if self.makers is not None:
                self._adopt(self.makers)
        finally:
            if self.makers is not None:
                self.makers.close()
                self.makers = None
        self._flush_acts()
        self._agents()
        self._submolts()
        self._follows()
        self._summary()
        self.events.sort(key=lambda e: (e.occurred_at, e.event_id.int))
        return self.events

    def _adopt(self, makers: MakersLike) -> None:
        """The workers' sorted runs into the spill, their events into the files' reports."""
        assert self.spill is not None
        for runs, count in makers.seal():
            self.spill.adopt(runs, count)
        for (file, etype), n in sorted(makers.counts.items()):
            self.reports[file].events[etype] += n

    def _posts(self) -> None:
        """Emit every kept post (with its tallies), in read order."""
        store = self.store
        query = (
            f"SELECT {POST_COLUMNS} FROM post t JOIN post_rec r ON r.seq = t.seq "
            f"WHERE t.dup = 0 ORDER BY {store.order('t')}"
        )
        bad: list[tuple[str]] = []
        if self.makers is not None:
            for said, actor, light in self.makers.posts(store.rows(query)):
                self._replay(said)
                rec = light_post(light)
                if actor is None:
                    self.unreadable_posts.add(rec.id)
                self._posted(rec, actor, bad)
        else:
            for row in store.rows(query):
                rec = store.post(row)
                actor = self.make_post(rec)
                self._posted(rec, actor, bad)
        store.db.executemany("INSERT INTO bad_post VALUES (?)", bad)

    def make_post(self, rec: PostRecord) -> str | None:
        """Emit a post and its tallies; its actor, or None when it could not be made a valid event (what
        an import's worker process does for each post, ``importers.makers``)."""
        actor = self._post(rec)
        if actor is not None:
            self._post_tallies(rec)
        return actor

    def _posted(self, rec: PostRecord, actor: str | None, bad: list[tuple[str]]) -> None:
        """What follows from a post made (``make_post``): its author's act, its submolt's first post."""
        if actor is None:
            bad.append((rec.id,))
            return
        self._posts_emitted += 1
        self._act(rec.created_at, rec.author, actor, rec.origin)
        if rec.submolt is not None:
            key = sanitise_id(rec.submolt.name)
            known = self._first_post.get(key)
            if known is None or rec.created_at < known[0]:
                self._first_post[key] = (rec.created_at, self._posts_emitted, rec)
        count = rec.counts.comment_count
        if count is not None:
            self._counted[0] += 1
            self._counted[1] += max(count, 0)

    def _replay(self, said: list[Said]) -> None:
        """The notes and skips of a record made by a worker process, in the order it said them."""
        for skip, file, position, reason, detail in said:
            report = self.reports[file]
            (report.skip if skip else report.note)(reason, position, detail)

    def _post(self, rec: PostRecord) -> str | None:
        """Emit a post; its actor, or None when it could not be made a valid event."""
        o = rec.origin
        actor = self._actor(rec.author, o)
        if rec.title is None:
            self._note(o, "title missing (empty title)")
        title = self._text(o, rec.title, TITLE_MAX, "title")
        if rec.submolt is None:
            self._note(o, f"submolt not given (submolt {UNKNOWN_SUBMOLT!r}, not registered)")
            submolt = UNKNOWN_SUBMOLT
        else:
            submolt = sanitise_id(rec.submolt.name)
            if submolt != rec.submolt.name:
                self._note(o, "submolt name does not fit the id pattern (sanitised)", rec.submolt.name)

        def make(text: str) -> PostCreated:
            return PostCreated(
                event_id=event_id("post_created", rec.id, rec.created_at),
                society=self.society,
                actor=actor,
                occurred_at=rec.created_at,
                body=PostCreatedBody(post_id=rec.id, submolt=submolt, title=title, content=text),
            )

        try:
            event, wire = self._fit(o, make, rec.content)
        except ValidationError as exc:
            self._skip(o, "not valid for the event schema", f"{rec.id}: {_schema_error(exc)}")
            self.unreadable_posts.add(rec.id)
            return None
        self._emit(o, event, wire)
        return actor

    def _resolve(self) -> None:
        """Depth of every kept comment from its parent chain (``depth``, and ``replied_at``: the time of
        the post or comment it replies to), or the reason
        it is skipped (``reason``), level by level in SQL: a comment's depth is known once its parent's is.

        Top-level comments of an emitted post start (depth 1, or a flat export's ``source_depth + 1``);
        each level's replies (same post) are the next. What no level reaches is skipped: its post is
        missing or made no event, its parent is missing or in another post, it is deeper than
        ``MAX_DEPTH``, its parent is skipped (transitively), or its parent chain is a cycle."""
        db = self.store.db
        db.executescript(
            """
            CREATE TABLE front (seq INTEGER PRIMARY KEY, id TEXT, post_id TEXT, depth INTEGER,
                created INTEGER, replied_at INTEGER);
            INSERT INTO front
                SELECT c.seq, c.id, c.post_id, coalesce(c.src_depth + 1, 1), c.created, p.created
                FROM comment c JOIN post p ON p.id = c.post_id AND p.dup = 0
                WHERE c.dup = 0 AND c.parent_id IS NULL
                    AND NOT EXISTS (SELECT 1 FROM bad_post b WHERE b.id = c.post_id);
            """
        )
        while True:
            db.execute(
                "UPDATE comment SET depth = f.depth, replied_at = f.replied_at FROM front f "
                "WHERE comment.seq = f.seq"
            )
            db.executescript(
                f"""
                CREATE TABLE next AS
                    SELECT c.seq, c.id, c.post_id, f.depth + 1 AS depth, c.created, f.created AS replied_at
                    FROM front f JOIN comment c ON c.parent_id = f.id
                    WHERE c.dup = 0 AND c.post_id = f.post_id;
                UPDATE comment SET reason = 'deeper than {MAX_DEPTH:,}'
                    WHERE seq IN (SELECT seq FROM next WHERE depth > {MAX_DEPTH});
                DELETE FROM next WHERE depth > {MAX_DEPTH};
                DROP TABLE front;
                CREATE TABLE front (seq INTEGER PRIMARY KEY, id TEXT, post_id TEXT, depth INTEGER,
                    created INTEGER, replied_at INTEGER);
                INSERT INTO front SELECT * FROM next;
                DROP TABLE next;
                """
            )
            if db.execute("SELECT NOT EXISTS (SELECT 1 FROM front)").fetchone()[0]:
                break
        self._unresolved()

    def _unresolved(self) -> None:
        """The reasons of the kept comments no level reached (see ``_resolve``)."""
        db, store = self.store.db, self.store
        db.execute("CREATE TABLE why (seq INTEGER PRIMARY KEY, reason TEXT NOT NULL)")
        query = """
            SELECT c.seq, c.post_id, c.parent_id,
                EXISTS (SELECT 1 FROM post p WHERE p.id = c.post_id AND p.dup = 0)
                    AND NOT EXISTS (SELECT 1 FROM bad_post b WHERE b.id = c.post_id),
                (SELECT p.post_id FROM comment p WHERE p.id = c.parent_id AND p.dup = 0)
            FROM comment c WHERE c.dup = 0 AND c.depth IS NULL AND c.reason IS NULL
        """
        reasons: list[tuple[int, str]] = []
        for seq, post_id, parent_id, post_ok, parent_post in store.rows(query):
            if not post_ok:
                why = "post skipped" if post_id in self.unreadable_posts else "post not in dump"
            elif parent_id is None:
                continue  # unreachable: a top-level comment of an emitted post has a depth
            elif parent_post is None:
                why = "parent skipped" if parent_id in self.unreadable_comments else "parent not in dump"
            elif parent_post != post_id:
                why = "parent is in another post"
            else:
                continue  # its parent is unresolved too: below
            reasons.append((seq, why))
            if len(reasons) >= scratch.BATCH:
                db.executemany("INSERT INTO why VALUES (?, ?)", reasons)
                reasons.clear()
        db.executemany("INSERT INTO why VALUES (?, ?)", reasons)
        db.executescript(
            """
            UPDATE comment SET reason = w.reason FROM why w WHERE comment.seq = w.seq;
            DROP TABLE front;
            CREATE TABLE front AS SELECT seq, id, post_id FROM comment
                WHERE dup = 0 AND depth IS NULL AND reason IS NOT NULL;
            """
        )
        while True:  # the replies of a skipped comment, transitively: "parent skipped"
            db.executescript(
                """
                CREATE TABLE next AS SELECT c.seq, c.id, c.post_id FROM front f
                    JOIN comment c ON c.parent_id = f.id
                    WHERE c.dup = 0 AND c.post_id = f.post_id AND c.depth IS NULL AND c.reason IS NULL;
                UPDATE comment SET reason = 'parent skipped' WHERE seq IN (SELECT seq FROM next);
                DROP TABLE front;
                ALTER TABLE next RENAME TO front;
                """
            )
            if db.execute("SELECT NOT EXISTS (SELECT 1 FROM front)").fetchone()[0]:
                break
        db.execute("DROP TABLE front")
        # what is left hangs in or below a cycle of parents (rare, so walked in memory)
        parent = {
            cid: pid
            for cid, pid in db.execute(
                "SELECT id, parent_id FROM comment WHERE dup = 0 AND depth IS NULL AND reason IS NULL"
            )
        }
        result: dict[str, str] = {}
        for start in parent:
            chain: list[str] = []
            on_chain: set[str] = set()
            cur = start
            while cur not in result:
                if cur in on_chain:
                    cut = chain.index(cur)
                    for c in chain[cut:]:
                        result[c] = "parent chain is a cycle"
                    chain = chain[:cut]
                    break
                chain.append(cur)
                on_chain.add(cur)
                cur = parent[cur]
            for c in chain:
                result.setdefault(c, "parent skipped")
        db.executemany(
            "UPDATE comment SET reason = ? WHERE id = ? AND dup = 0", [(r, c) for c, r in result.items()]
        )

    def _comments(self) -> None:
        """Report the skipped comments, then emit the others parents first (by depth), in read order."""
        store, order = self.store, self.store.order("t")
        skipped = (
            f"SELECT t.reason, {COMMENT_COLUMNS} FROM comment t "
            f"JOIN comment_rec r ON r.seq = t.seq WHERE t.dup = 0 AND t.depth IS NULL ORDER BY {order}"
        )
        for row in store.rows(skipped):
            rec = store.comment(row[1:])
            parent = f", parent {rec.parent_id})" if rec.parent_id else ")"
            detail = f"{rec.id} (post {rec.post_id}{parent}"
            self._skip(rec.origin, row[0], detail)
        store.db.execute(f"CREATE INDEX comment_by_depth ON comment (depth, {store.order()})")
        emitted = (
            f"SELECT t.depth, t.replied_at, {COMMENT_COLUMNS} "
            "FROM comment t JOIN comment_rec r ON r.seq = t.seq "
            f"WHERE t.dup = 0 AND t.depth IS NOT NULL ORDER BY t.depth, {order}"
        )
        if self.makers is not None:
            for said, actor, light in self.makers.comments(store.rows(emitted)):
                self._replay(said)  # a reply to a comment that made no event: skipped by its worker
                self._commented(light_comment(light), actor)
            return
        for row in store.rows(emitted):
            depth, before_us, rec = row[0], row[1], store.comment(row[2:])
            if not self._parent_skipped(rec):
                self._commented(rec, self.make_comment(rec, depth, from_us(before_us)))

    def _parent_skipped(self, rec: CommentRecord) -> bool:
        """Skip a comment whose parent made no event (its parent is made first: it is less deep)."""
        if rec.parent_id is None or rec.parent_id not in self.failed_comments:
            return False
        self._skip(rec.origin, "parent skipped", f"{rec.id} (parent {rec.parent_id})")
        self.failed_comments.add(rec.id)
        return True

    def _commented(self, rec: CommentRecord, actor: str | None) -> None:
        """What follows from a comment made (``make_comment``): its author's act, or its replies skipped."""
        if actor is None:
            self.failed_comments.add(rec.id)
            return
        self._comments_emitted += 1
        self._act(rec.created_at, rec.author, actor, rec.origin)

    def make_comment(self, rec: CommentRecord, depth: int, before: datetime) -> str | None:
        """Emit a comment at ``depth`` (``before``: the time of what it replies to), with its tallies; its
        actor, or None when it could not be made a valid event (what an import's worker process does for
        each comment, ``importers.makers``)."""
        cid, o = rec.id, rec.origin
        parent_unknown = rec.parent_id is None and depth > 1
        if rec.created_at < before:
            self._note(o, "comment is dated before what it replies to (kept as given)", cid)
        actor = self._actor(rec.author, o)

        make = functools.partial(self._comment_event, rec, actor, depth, parent_unknown)
        try:
            event, wire = self._fit(o, make, rec.content)
        except ValidationError as exc:
            self._skip(o, "not valid for the event schema", f"{cid}: {_schema_error(exc)}")
            return None
        if parent_unknown:
            self._note(o, "reply whose source gives its depth but not its parent (parent_unknown)")
        self._emit(o, event, wire)
        self._comment_tallies(rec)
        return actor

    def _comment_event(
        self, rec: CommentRecord, actor: str, depth: int, parent_unknown: bool, text: str
    ) -> CommentCreated:
        return CommentCreated(
            event_id=event_id("comment_created", rec.id, rec.created_at),
            society=self.society,
            actor=actor,
            occurred_at=rec.created_at,
            causation_id=rec.parent_id or rec.post_id,
            body=CommentCreatedBody(
                comment_id=rec.id,
                post_id=rec.post_id,
                parent_id=rec.parent_id,
                depth=depth,
                content=text,
                parent_unknown=parent_unknown,
            ),
        )

    def _votes(self, counts: Counts, origin: Origin) -> tuple[int, int] | None:
        """(upvotes, downvotes) the source states, or None when it states no votes."""
        up, down = counts.upvotes, counts.downvotes
        if up is not None or down is not None:
            if (up or 0) < 0 or (down or 0) < 0:
                self._note(origin, "negative vote count (votes not imported)", f"{up}/{down}")
                return None
            return up or 0, down or 0
        if counts.score is not None:
            if counts.score != 0:
                self._note(origin, "net score only: tallied as upvotes (score > 0) or downvotes (score < 0)")
            return max(counts.score, 0), max(-counts.score, 0)
        return None

    def _tally(
        self,
        origin: Origin,
        target_type: str,
        target_id: str,
        post_id: str,
        tally_at: datetime,
        votes: tuple[int, int],
        reported: int | None,
        key: str = "",
    ) -> None:
        """Emit a ``vote_tallied`` at ``tally_at`` (``key``: what tells a snapshot's tally from the first)."""
        self._emit_valid(
            origin,
            "vote tally",
            lambda: VoteTallied(
                event_id=event_id("vote_tallied", f"{target_type}:{target_id}{key}", tally_at),
                society=self.society,
                actor=PLATFORM,
                occurred_at=tally_at,
                causation_id=target_id,
                body=VoteTalliedBody(
                    target_type="post" if target_type == "post" else "comment",
                    target_id=target_id,
                    post_id=post_id,
                    upvotes=votes[0],
                    downvotes=votes[1],
                    reported_comments=reported,
                ),
            ),
        )

    def _post_tallies(self, rec: PostRecord) -> None:
        votes = self._votes(rec.counts, rec.origin) or (0, 0)
        reported = rec.counts.comment_count
        if reported is not None and reported < 0:
            self._note(rec.origin, "negative comment_count ignored", str(reported))
            reported = None
        at = rec.created_at + TALLY_OFFSET
        if votes[0] > 0 or votes[1] > 0 or (reported or 0) > 0:
            self._tally(rec.origin, "post", rec.id, rec.id, at, votes, reported)
        self._snapshot_tallies(("post", rec.id, rec.id, at), votes, reported or 0)

    def _comment_tallies(self, crec: CommentRecord) -> None:
        cvotes = self._votes(crec.counts, crec.origin)
        at = crec.created_at + TALLY_OFFSET
        if cvotes is not None and (cvotes[0] > 0 or cvotes[1] > 0):
            self._tally(crec.origin, "comment", crec.id, crec.post_id, at, cvotes, None)
        self._snapshot_tallies(("comment", crec.id, crec.post_id, at), cvotes or (0, 0), 0)

    def _snapshot_tallies(
        self, target: tuple[str, str, str, datetime], votes: tuple[int, int], reported: int
    ) -> None:
        """The tallies of a target's later snapshots: what its counts gained over the highest seen so far.
        ``target``: (kind, id, post id, earliest tally time); ``votes``, ``reported``: its first counts."""
        kind, target_id, post_id, earliest = target
        up, down = votes
        if not self._has_later:
            return
        copies = self.store.db.execute(
            "SELECT at, up, down, score, cc, file, position FROM later WHERE kind = ? AND id = ? "
            "ORDER BY at, rowid",
            (kind, target_id),
        ).fetchall()
        for at_us, c_up, c_down, c_score, c_cc, file, position in copies:
            at, counts = from_us(at_us), Counts(c_up, c_down, c_score, c_cc)
            origin = self.store.origin(file, position)
            seen = self._votes(counts, origin)
            gain_up = gain_down = 0
            if seen is not None and counts.upvotes is None and counts.downvotes is None:
                change = (seen[0] - seen[1]) - (up - down)  # a net score: its change, either way
                gain_up, gain_down = max(change, 0), max(-change, 0)
            elif seen is not None:
                if seen[0] < up or seen[1] < down:
                    self._note(origin, "vote count fell between snapshots (the highest seen is kept)")
                gain_up, gain_down = max(seen[0] - up, 0), max(seen[1] - down, 0)
            grew = kind == "post" and counts.comment_count is not None and counts.comment_count > reported
            if gain_up or gain_down or grew:
                tally_at = max(at, earliest)
                gained = (gain_up, gain_down)
                new_reported = counts.comment_count if grew else None
                self._tally(
                    origin, kind, target_id, post_id, tally_at, gained, new_reported, f"@{at.isoformat()}"
                )
            up, down = up + gain_up, down + gain_down
            reported = max(reported, counts.comment_count or 0) if kind == "post" else reported

    def _agents(self) -> None:
        agents = self._authors()
        self._listed(agents)
        named_only = 0
        for agent in agents.values():
            named_only += self._register(agent) and agent.agent_id.startswith("name:")
        if named_only:
            self.notes.append(
                f"{named_only} agent(s) are known only by a name (agent id 'name:<name>'): MoltBook names "
                "are not unique over time, ids are, so two agents that used one name are merged and a "
                "renamed agent is split; API records with author ids do not have this problem."
            )

    def _authors(self) -> dict[str, _Agent]:
        """The authors of the emitted posts and comments, by actor in the time order of their first acts,
        each with its first act's name (else id) and description (else the first description of a later
        act); an act under another name than that is noted, in time order (posts before comments at one
        time, each in emission order). Only the acts of authors seen under two names are read back."""
        firsts = sorted(self._first_acts.items(), key=lambda kv: (kv[1][_AT], kv[1][_SEQ]))
        self._first_acts = {}
        agents: dict[str, _Agent] = {}
        renamed: list[tuple[str]] = []
        for actor, first in firsts:
            name = first[_NAME] or first[_AID] or actor
            origin = self.store.origin(first[_FILE], first[_POS])
            description = first[_DESC] if first[_DESC] is not None else first[_DESCR]
            agents[actor] = _Agent(actor, name, from_us(first[_AT]), origin, description)
            if first[_OTHER] or (first[_NAME0] is not None and first[_NAME0] != name):
                renamed.append((actor,))
        del firsts
        if renamed:
            self._renamed(agents, renamed)
        return agents

    def _renamed(self, agents: dict[str, _Agent], renamed: list[tuple[str]]) -> None:
        """Note every act of the ``renamed`` actors under another name than their agent's."""
        db = self._act_db
        assert db is not None
        db.executemany("INSERT INTO renamed VALUES (?)", renamed)
        acts = (
            "SELECT actor, name, file, position FROM act WHERE name IS NOT NULL "
            "AND actor IN (SELECT actor FROM renamed) ORDER BY at, seq"
        )
        for actor, aname, file, position in scratch.rows_of(db, acts):
            if aname != agents[actor].name:  # never the first act: its name, when it has one, is the agent's
                self._note(
                    self.store.origin(file, position),
                    "agent id seen with another name (first name kept)",
                    f"{actor}: {aname}",
                )

    def _listed(self, agents: dict[str, _Agent]) -> None:
        """Add the agents of the files' agents listings to ``agents`` (first row of a name kept)."""
        for f in self.files:
            for row in f.agents:
                agent_id = sanitise_id(row.id) if row.id else ("name:" + sanitise_id(row.name))[:128]
                known = agents.get(agent_id)
                if known is None:
                    known = agents[agent_id] = _Agent(agent_id, row.name, None, None)
                if known.listed is not None:
                    self._skip(row.origin, "duplicate agent name in a listing (first kept)", row.name)
                    continue
                known.listed = row
                if row.description and not known.description:
                    known.description = row.description

    def _register(self, agent: _Agent) -> bool:
        """Emit an agent's ``agent_registered``; whether it was emitted."""
        listed = agent.listed
        if listed is not None and listed.registered_at is not None:
            at, origin = listed.registered_at, listed.origin
            if agent.first_at is not None and agent.first_at < at:
                self._note(origin, "registration time after the agent's first post or comment", agent.name)
        elif agent.first_at is not None and agent.origin is not None:
            at, origin = agent.first_at, agent.origin
        else:
            assert listed is not None
            self._skip(
                listed.origin,
                "agent has no registration time and no post or comment in the dump",
                listed.name,
            )
            return False
        return self._emit_valid(
            origin,
            "agent",
            lambda: AgentRegistered(
                event_id=event_id("agent_registered", agent.agent_id, at),
                society=self.society,
                actor=agent.agent_id,
                occurred_at=at,
                body=AgentRegisteredBody(
                    name=self._text(origin, agent.name, NAME_MAX, "agent name"),
                    brain=IMPORTED_BRAIN,
                    persona=self._text(origin, agent.description, TEXT_MAX, "agent description") or None,
                ),
            ),
        )

    def _follows(self) -> None:
        """One ``agent_followed`` per distinct (follower, followee) of the files' follows tables."""
        order = self.store.order()
        query = (
            "SELECT follower, followee, at, file, position, row_number() OVER "
            f"(PARTITION BY follower, followee ORDER BY {order}) FROM follow ORDER BY {order}"
        )
        for follower, followee, at_us, file, position, nth in self.store.rows(query):
            origin = self.store.origin(file, position)
            if nth > 1:
                self._skip(origin, "duplicate follow (first kept)", f"{follower} -> {followee}")
                continue
            self._emit_valid(
                origin, "follow", functools.partial(self._follow_event, follower, followee, from_us(at_us))
            )

    def _follow_event(self, follower: str, followee: str, at: datetime) -> AgentFollowed:
        return AgentFollowed(
            event_id=event_id("agent_followed", f"{follower}>{followee}", at),
            society=self.society,
            actor=follower,
            occurred_at=at,
            body=AgentFollowedBody(target_agent=followee),
        )

    def _submolts(self) -> None:
        """One ``submolt_created`` per submolt named by an emitted post, at its first post's time."""
        by_time = sorted(self._first_post.items(), key=lambda kv: kv[1][:2])
        first = {key: rec for key, (_, _, rec) in by_time}
        listed: dict[str, SubmoltRecord] = {}
        for f in self.files:
            for row in f.submolts:
                key = sanitise_id(row.name)
                if key in listed:
                    self._skip(row.origin, "duplicate submolt name in a listing (first kept)", row.name)
                elif key not in first:
                    listed[key] = row
                    self._skip(row.origin, "submolt has no post in the dump (no creation time)", row.name)
                else:
                    listed[key] = row
        for key, rec in first.items():
            make = functools.partial(self._submolt_event, key, rec, listed.get(key))
            self._emit_valid(rec.origin, "submolt", make)

    def _submolt_event(self, key: str, rec: PostRecord, entry: SubmoltRecord | None) -> SubmoltCreated:
        """The ``submolt_created`` of submolt ``key``, first posted in ``rec``, listed as ``entry``."""
        origin = rec.origin
        ref = rec.submolt
        display = (ref.display_name if ref else None) or (entry.display_name if entry else None)
        return SubmoltCreated(
            event_id=event_id("submolt_created", key, rec.created_at),
            society=self.society,
            actor=PLATFORM,
            occurred_at=rec.created_at,
            body=SubmoltCreatedBody(
                submolt=key,
                title=self._text(origin, display, TITLE_MAX, "submolt display name"),
                description=self._text(
                    entry.origin if entry else origin,
                    entry.description if entry else None,
                    TEXT_MAX,
                    "submolt description",
                ),
            ),
        )

    def _summary(self) -> None:
        counted, reported = self._counted
        if counted:
            self.notes.append(
                f"posts report {reported:,} comments in all (comment_count of "
                f"{counted:,} posts); the dump holds {self._comments_emitted:,} importable comments. Missing "
                "comments are not made up; reported_comments in each post's vote_tallied keeps the count."
            )
        self.notes.append(
            "votes are imported only as counts (vote_tallied, actor 'platform'): a tally per post with "
            "upvotes, downvotes or comment_count above zero, per comment with upvotes or downvotes above "
            "zero; an all-zero post or comment has no tally."
        )
