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
- Snapshots (``importers.snapshots``): when the files come from at least two snapshot folders, they are
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
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar
from uuid import UUID

from pydantic import ValidationError

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
from molt_society.importers.report import FileReport
from molt_society.importers.spill import SortedSpill
from molt_society.schemas.control import to_us
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
    """Turns the records of all files of one import into events, reporting into each file's entry."""

    def __init__(self, society: str, files: list[FileRecords], spill: SortedSpill | None = None) -> None:
        """``spill``: where the events go, encoded and sorted on disk (``import_stream``); without it
        they are kept as models in ``events`` (``import_path``)."""
        self.society = society
        self.files = files
        self.reports: dict[str, FileReport] = {f.report.file: f.report for f in files}
        self.events: list[Event] = []
        self.spill = spill
        self.notes: list[str] = []
        self.unreadable_posts: set[str] = set()
        self.unreadable_comments: set[str] = set()
        self.snapshot_of = {f.report.file: f.snapshot_at for f in files}
        self.series = len({f.snapshot_at for f in files if f.snapshot_at is not None}) >= 2
        if self.series:  # earliest snapshot first (files without a snapshot time before all), stable
            self.files = sorted(files, key=lambda f: f.snapshot_at or EARLIEST)
        # "<kind>:<id>" -> (snapshot time, counts, origin) of its copies in later snapshots
        self.later: dict[str, list[tuple[datetime, Counts, Origin]]] = defaultdict(list)
        for f in files:
            self.unreadable_posts |= f.unreadable_posts
            self.unreadable_comments |= f.unreadable_comments

    # --- helpers ----------------------------------------------------------------------------------

    def _skip(self, origin: Origin, reason: str, detail: str = "") -> None:
        self.reports[origin.file].skip(reason, origin.position, detail)

    def _note(self, origin: Origin, reason: str, detail: str = "") -> None:
        self.reports[origin.file].note(reason, origin.position, detail)

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

    # --- dedupe -----------------------------------------------------------------------------------

    def _dedupe(self, kind: str, records: list[R]) -> dict[str, R]:
        """The first copy of each id, completed with fields only later identical copies give.

        Two copies are compared on the fields both give (a field one copy lacks is no difference;
        authors by id when both have one, else by name). A later copy that differs is a conflict (first
        kept); one that agrees is a duplicate, and fills in ``None`` fields of the kept copy that are
        simple values (title, content, author, submolt), never its thread position.
        """
        kept: dict[str, R] = {}
        for rec in records:
            first = kept.get(rec.id)
            if first is None:
                kept[rec.id] = rec
                continue
            where = f"first copy: {first.origin.file} {first.origin.position}"
            a, b = first.identity(), rec.identity()
            differ = sorted(k for k in a if not _same(a[k], b[k]))
            if differ:
                self._skip(
                    rec.origin,
                    f"conflict: {kind} id seen before with different content (first kept)",
                    f"{rec.id}: {', '.join(differ)} differ; {where}",
                )
                continue
            later = self._later_snapshot(first.origin, rec.origin)
            if later is not None:
                self.later[f"{kind}:{rec.id}"].append((later, rec.counts, rec.origin))
            filled = {k: getattr(rec, k) for k in _FILLABLE if getattr(first, k, 0) is None}
            filled = {k: v for k, v in filled.items() if v is not None}
            if filled:
                kept[rec.id] = dataclasses.replace(first, **filled)
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
        all_posts = [p for f in self.files for p in f.posts]
        all_comments = [c for f in self.files for c in f.comments]
        posts = self._dedupe("post", all_posts)
        comments = self._dedupe("comment", all_comments)

        emitted_posts: dict[str, tuple[PostRecord, str]] = {}  # id -> (record, actor)
        for rec in posts.values():
            actor = self._post(rec)
            if actor is not None:
                emitted_posts[rec.id] = (rec, actor)
        emitted_comments = self._comments(comments, emitted_posts)
        self._tallies(emitted_posts, emitted_comments)
        self._agents(emitted_posts, emitted_comments)
        self._submolts(emitted_posts)
        self._follows()
        self._summary(emitted_posts, emitted_comments)
        self.events.sort(key=lambda e: (e.occurred_at, e.event_id.int))
        return self.events

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

    def _resolve(self, comments: dict[str, CommentRecord], posts: set[str]) -> dict[str, _Resolved]:
        """Depth of every comment from its parent chain, or the reason it is skipped (no recursion)."""
        result: dict[str, _Resolved] = {}
        for start in comments:
            chain: list[str] = []
            on_chain: set[str] = set()
            cur = start
            while cur not in result:
                if cur in on_chain:
                    cut = chain.index(cur)
                    for c in chain[cut:]:
                        result[c] = _Resolved(None, "parent chain is a cycle")
                    chain = chain[:cut]
                    break
                rec = comments[cur]
                if rec.post_id not in posts:
                    why = "post skipped" if rec.post_id in self.unreadable_posts else "post not in dump"
                    result[cur] = _Resolved(None, why)
                    break
                if rec.parent_id is None:
                    depth = rec.source_depth + 1 if rec.source_depth is not None else 1
                    result[cur] = _Resolved(depth)
                    break
                parent = comments.get(rec.parent_id)
                if parent is None:
                    missing = rec.parent_id in self.unreadable_comments
                    result[cur] = _Resolved(None, "parent skipped" if missing else "parent not in dump")
                    break
                if parent.post_id != rec.post_id:
                    result[cur] = _Resolved(None, "parent is in another post")
                    break
                chain.append(cur)
                on_chain.add(cur)
                cur = rec.parent_id
            for c in reversed(chain):
                if c in result:
                    continue
                pid = comments[c].parent_id
                assert pid is not None
                up = result[pid]
                if up.depth is None:
                    result[c] = _Resolved(None, "parent skipped")
                elif up.depth + 1 > MAX_DEPTH:
                    result[c] = _Resolved(None, f"deeper than {MAX_DEPTH:,}")
                else:
                    result[c] = _Resolved(up.depth + 1)
        return result

    def _comments(
        self, comments: dict[str, CommentRecord], posts: dict[str, tuple[PostRecord, str]]
    ) -> dict[str, tuple[CommentRecord, str]]:
        resolved = self._resolve(comments, set(posts))
        emitted: dict[str, tuple[CommentRecord, str]] = {}
        # parents before replies, so a reply whose parent fails validation is skipped too
        order = sorted(comments, key=lambda c: resolved[c].depth or 0)
        for cid in order:
            rec, res = comments[cid], resolved[cid]
            o = rec.origin
            if res.depth is None:
                detail = f"{cid} (post {rec.post_id}" + (
                    f", parent {rec.parent_id})" if rec.parent_id else ")"
                )
                self._skip(o, res.reason, detail)
                continue
            if rec.parent_id is not None and rec.parent_id not in emitted:
                self._skip(o, "parent skipped", f"{cid} (parent {rec.parent_id})")
                continue
            depth = res.depth
            parent_unknown = rec.parent_id is None and depth > 1
            before = (
                emitted[rec.parent_id][0].created_at if rec.parent_id else posts[rec.post_id][0].created_at
            )
            if rec.created_at < before:
                self._note(o, "comment is dated before what it replies to (kept as given)", cid)
            actor = self._actor(rec.author, o)

            make = functools.partial(self._comment_event, rec, actor, depth, parent_unknown)
            try:
                event, wire = self._fit(o, make, rec.content)
            except ValidationError as exc:
                self._skip(o, "not valid for the event schema", f"{cid}: {_schema_error(exc)}")
                continue
            if parent_unknown:
                self._note(o, "reply whose source gives its depth but not its parent (parent_unknown)")
            self._emit(o, event, wire)
            emitted[cid] = (rec, actor)
        return emitted

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

    def _tallies(
        self, posts: dict[str, tuple[PostRecord, str]], comments: dict[str, tuple[CommentRecord, str]]
    ) -> None:
        for rec, _ in posts.values():
            votes = self._votes(rec.counts, rec.origin) or (0, 0)
            reported = rec.counts.comment_count
            if reported is not None and reported < 0:
                self._note(rec.origin, "negative comment_count ignored", str(reported))
                reported = None
            at = rec.created_at + TALLY_OFFSET
            if votes[0] > 0 or votes[1] > 0 or (reported or 0) > 0:
                self._tally(rec.origin, "post", rec.id, rec.id, at, votes, reported)
            self._snapshot_tallies(("post", rec.id, rec.id, at), votes, reported or 0)
        for crec, _ in comments.values():
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
        for at, counts, origin in sorted(self.later.get(f"{kind}:{target_id}", []), key=lambda c: c[0]):
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

    def _agents(
        self, posts: dict[str, tuple[PostRecord, str]], comments: dict[str, tuple[CommentRecord, str]]
    ) -> None:
        agents = self._authors(posts, comments)
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

    def _authors(
        self, posts: dict[str, tuple[PostRecord, str]], comments: dict[str, tuple[CommentRecord, str]]
    ) -> dict[str, _Agent]:
        """The authors of the emitted posts and comments, by actor, each with its first act."""
        agents: dict[str, _Agent] = {}
        acts: list[tuple[datetime, int, Author, str, Origin]] = []
        for seq, (prec, actor) in enumerate(posts.values()):
            if prec.author is not None:
                acts.append((prec.created_at, seq, prec.author, actor, prec.origin))
        base = len(acts) + 1
        for seq, (crec, actor) in enumerate(comments.values()):
            if crec.author is not None:
                acts.append((crec.created_at, base + seq, crec.author, actor, crec.origin))
        acts.sort(key=lambda a: (a[0], a[1]))
        for at, _, author, actor, origin in acts:
            name = author.name or author.id or actor
            known = agents.get(actor)
            if known is None:
                agents[actor] = _Agent(actor, name, at, origin, author.description)
                continue
            if author.name is not None and author.name != known.name:
                self._note(
                    origin, "agent id seen with another name (first name kept)", f"{actor}: {author.name}"
                )
            if known.description is None and author.description:
                known.description = author.description
        return agents

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
        seen: set[tuple[str, str]] = set()
        for f in self.files:
            for row in f.follows:
                pair = (sanitise_id(row.follower), sanitise_id(row.followee))
                if pair in seen:
                    self._skip(row.origin, "duplicate follow (first kept)", f"{pair[0]} -> {pair[1]}")
                    continue
                seen.add(pair)
                self._emit_valid(
                    row.origin,
                    "follow",
                    functools.partial(self._follow_event, pair[0], pair[1], row.at),
                )

    def _follow_event(self, follower: str, followee: str, at: datetime) -> AgentFollowed:
        return AgentFollowed(
            event_id=event_id("agent_followed", f"{follower}>{followee}", at),
            society=self.society,
            actor=follower,
            occurred_at=at,
            body=AgentFollowedBody(target_agent=followee),
        )

    def _submolts(self, posts: dict[str, tuple[PostRecord, str]]) -> None:
        first: dict[str, PostRecord] = {}
        for rec, _ in sorted(posts.values(), key=lambda p: p[0].created_at):
            if rec.submolt is not None:
                first.setdefault(sanitise_id(rec.submolt.name), rec)
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

    def _summary(
        self, posts: dict[str, tuple[PostRecord, str]], comments: dict[str, tuple[CommentRecord, str]]
    ) -> None:
        counted = [p.counts.comment_count for p, _ in posts.values() if p.counts.comment_count is not None]
        if counted:
            self.notes.append(
                f"posts report {sum(c for c in counted if c > 0):,} comments in all (comment_count of "
                f"{len(counted):,} posts); the dump holds {len(comments):,} importable comments. Missing "
                "comments are not made up; reported_comments in each post's vote_tallied keeps the count."
            )
        self.notes.append(
            "votes are imported only as counts (vote_tallied, actor 'platform'): a tally per post with "
            "upvotes, downvotes or comment_count above zero, per comment with upvotes or downvotes above "
            "zero; an all-zero post or comment has no tally."
        )
