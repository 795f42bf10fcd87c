"""Source-neutral records that every shape's reader produces, and the field parsers they share.

A reader turns one file into these records, skipping (with a reason) the ones it cannot read; the
builder (``importers.builder``) turns the records of all files into events. Records say only what the
source says: a missing value stays ``None``, nothing is filled in.

Field parsers raise ``RecordError`` whose ``reason`` is the short text the report counts by.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from molt_society.importers.fields import get
from molt_society.importers.file_report import FileReport

ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:@\-]{1,128}$")
_NOT_ID_CHAR = re.compile(r"[^A-Za-z0-9_.:@\-]")
T_contra = TypeVar("T_contra", contravariant=True)


class RecordError(Exception):
    """A record that cannot be imported; ``reason`` is what the report counts it by."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a record came from: the file (as named in the report) and a position inside it."""

    file: str
    position: str


@dataclass(frozen=True, slots=True)
class Author:
    """An author as the source gives it: the platform id when known, else only a name."""

    id: str | None
    name: str | None
    description: str | None = None

    def same_as(self, other: Author) -> bool:
        """Whether two copies name the same author: by id when both have one, else by name."""
        if self.id is not None and other.id is not None:
            return self.id == other.id
        return self.name == other.name


@dataclass(frozen=True, slots=True)
class SubmoltRef:
    """A submolt as a post names it (the name is the key; display name when the source has it)."""

    name: str
    display_name: str | None = None


@dataclass(frozen=True, slots=True)
class Counts:
    """Vote and comment counts as the source gives them; ``score`` is a net count (CSV exports)."""

    upvotes: int | None = None
    downvotes: int | None = None
    score: int | None = None
    comment_count: int | None = None


@dataclass(frozen=True, slots=True)
class PostRecord:
    id: str
    title: str | None
    content: str | None
    author: Author | None
    submolt: SubmoltRef | None
    created_at: datetime
    counts: Counts
    origin: Origin

    def identity(self) -> dict[str, object]:
        """The fields that make two copies of a post the same post (counts are snapshots, compared
        apart); ``None`` means the copy does not give the field."""
        return {
            "title": self.title,
            "content": self.content,
            "author": self.author,
            "submolt": self.submolt.name if self.submolt else None,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class CommentRecord:
    """A comment. ``parent_id`` is the parent the source names (explicitly or by nesting);
    ``source_depth`` is a depth the source states (0-based), for sources without parent ids."""

    id: str
    post_id: str
    parent_id: str | None
    source_depth: int | None
    content: str | None
    author: Author | None
    created_at: datetime
    counts: Counts
    origin: Origin

    def identity(self) -> dict[str, object]:
        return {
            "post_id": self.post_id,
            "parent_id": self.parent_id,
            "source_depth": self.source_depth,
            "content": self.content,
            "author": self.author,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """A row of an agents listing: a name, maybe a description and a registration time."""

    name: str
    description: str | None
    registered_at: datetime | None
    origin: Origin
    id: str | None = None  # the platform id, when the listing gives one (SQLite archives)


@dataclass(frozen=True, slots=True)
class FollowRecord:
    """A row of a follows table: ``follower`` follows ``followee`` (platform agent ids), seen at ``at``."""

    follower: str
    followee: str
    at: datetime
    origin: Origin


@dataclass(frozen=True, slots=True)
class SubmoltRecord:
    """A row of a submolts listing (no creation time in the known exports)."""

    name: str
    display_name: str | None
    description: str | None
    origin: Origin


class RecordLog(Protocol[T_contra]):
    """Where a reader appends records: a list, or a ``Log`` of the import's on-disk store."""

    def append(self, rec: T_contra, /) -> None: ...


@dataclass
class FileRecords:
    """What a reader got from one file, plus that file's report entry to count skips and notes in."""

    report: FileReport
    posts: RecordLog[PostRecord] = field(default_factory=list)
    comments: RecordLog[CommentRecord] = field(default_factory=list)
    agents: list[AgentRecord] = field(default_factory=list)
    submolts: list[SubmoltRecord] = field(default_factory=list)
    follows: RecordLog[FollowRecord] = field(default_factory=list)
    # ids of records this file holds but that could not be read (a reply to one is "parent skipped")
    unreadable_posts: set[str] = field(default_factory=set)
    unreadable_comments: set[str] = field(default_factory=set)
    snapshot_at: datetime | None = None
    """The time of the snapshot the file belongs to, named by its folder (``importers.snapshot_folders``)."""

    def origin(self, position: str) -> Origin:
        return Origin(self.report.file, position)


# --- field parsers -------------------------------------------------------------------------------


def parse_time(value: object) -> datetime:
    """An ISO 8601 timestamp with a zone, as UTC. Raises ``RecordError`` otherwise."""
    if value is None or value == "":
        raise RecordError("timestamp missing")
    if not isinstance(value, str):
        raise RecordError("timestamp is not an ISO 8601 string", repr(value)[:60])
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise RecordError("timestamp is not ISO 8601", repr(value)[:60]) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise RecordError("timestamp has no time zone", repr(value)[:60])
    return parsed.astimezone(UTC)


def parse_id(value: object, what: str) -> str:
    """A record id (post, comment): a non-empty string or integer matching the event Id pattern."""
    if isinstance(value, bool) or value is None or value == "":
        raise RecordError(f"{what} missing")
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str) or not ID_PATTERN.match(value):
        raise RecordError(f"{what} is not a valid id", repr(value)[:60])
    return value


def optional_id(value: object, what: str) -> str | None:
    """An id that may be absent (``None`` or empty means absent)."""
    if value is None or value == "":
        return None
    return parse_id(value, what)


def parse_count(value: object) -> int | None:
    """A count from JSON (int) or CSV (digits); ``None`` when absent. May be negative (net scores)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def optional_text(value: object) -> str | None:
    """Text or ``None``; numbers are kept as their text, other JSON values are not text."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def sanitise_id(value: str) -> str:
    """``value`` with every character outside the event Id pattern replaced by ``_``, cut to 128."""
    return _NOT_ID_CHAR.sub("_", value)[:128]


def parse_author(value: object, author_id: object = None, author_name: object = None) -> Author | None:
    """An author from an API object ``{id, name, description}``, a bare name, or ``None``.

    ``author_id`` / ``author_name`` are separate fields some payloads carry next to (or instead of) the
    object: later API layouts give ``author_id`` on posts and comments. Keys may be camelCase.
    """
    if isinstance(value, dict):
        aid = optional_text(get(value, "id"))
        name = optional_text(get(value, "name"))
        desc = optional_text(get(value, "description"))
        if aid is None and isinstance(author_id, str | int) and not isinstance(author_id, bool):
            aid = str(author_id)
        if name is None:
            name = optional_text(author_name)
        if not aid and not name:
            return None
        return author_of(aid or None, name or None, desc or None)
    aid = str(author_id) if isinstance(author_id, str | int) and not isinstance(author_id, bool) else ""
    name = author_name.strip() if isinstance(author_name, str) else ""
    if isinstance(value, str) and value.strip():
        name = value.strip()
    if aid or name:
        return author_of(aid or None, name or None, None)
    return None


@functools.lru_cache(maxsize=1 << 16)
def author_of(aid: str | None, name: str | None, description: str | None) -> Author:
    """One ``Author`` object per distinct author among the recent ones: a dump names the same few
    thousand authors on millions of records, and each record held its own copy."""
    return Author(aid, name, description)


def parse_submolt(value: object, name: object = None) -> SubmoltRef | None:
    """A submolt from an API object ``{id, name, display_name}``, a bare name, or a separate
    ``submolt_name`` field (``name``)."""
    if isinstance(value, dict):
        sname = optional_text(get(value, "name")) or optional_text(get(value, "id"))
        if not sname:
            return None
        return SubmoltRef(sname, optional_text(get(value, "display_name")))
    if isinstance(value, str) and value.strip():
        return SubmoltRef(value.strip())
    if isinstance(name, str) and name.strip():
        return SubmoltRef(name.strip())
    return None
