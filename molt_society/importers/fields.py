"""Field access that survives MoltBook's API drift, and the tally of fields an import leaves out.

MoltBook's API renamed fields over time: early payloads are snake_case (``created_at``,
``comment_count``, ``follower_count``), later ones (e.g. May 2026) mix in camelCase (``createdAt``,
``followerCount``) and add fields the project has no use for (``hot_score``, ``is_spam``, ``labels``,
``verification_status``). ``get`` reads a field under either spelling; ``ignored`` names every key of a
record that the importer does not read, so that the per-file report can count what was left out instead
of a changed key set being a reason to drop the record.
"""

from __future__ import annotations

import functools
import re

_UPPER = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# Keys each record kind is read from (snake_case); anything else is counted as "not imported".
POST_FIELDS = frozenset(
    {
        "id",
        "title",
        "content",
        "created_at",
        "author",
        "author_id",
        "author_name",
        "submolt",
        "submolt_name",
        "upvotes",
        "downvotes",
        "score",
        "comment_count",
        "comments",  # a post record's nested threads (posts_full layouts), read by importers.json_doc
    }
)
COMMENT_FIELDS = frozenset(
    {
        "id",
        "post_id",
        "parent_id",
        "depth",
        "content",
        "created_at",
        "author",
        "author_id",
        "author_name",
        "upvotes",
        "downvotes",
        "score",
        "replies",
    }
)
AUTHOR_FIELDS = frozenset({"id", "name", "description"})
SUBMOLT_FIELDS = frozenset({"id", "name", "display_name"})


@functools.lru_cache(maxsize=4096)
def snake(key: str) -> str:
    """``createdAt`` -> ``created_at``; snake_case keys are returned unchanged."""
    return _UPPER.sub("_", key).lower()


@functools.lru_cache(maxsize=256)
def camel(name: str) -> str:
    """``created_at`` -> ``createdAt``."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def get(obj: dict[str, object], name: str) -> object:
    """The value of field ``name`` (snake_case) under its snake_case or camelCase key; ``None`` if absent."""
    value = obj.get(name)
    if value is None:
        alt = camel(name)
        if alt != name:
            value = obj.get(alt)
    return value


def has(obj: dict[str, object], name: str) -> bool:
    """Whether ``obj`` has field ``name`` under either spelling (whatever its value)."""
    return name in obj or camel(name) in obj


def ignored(obj: dict[str, object], kind: str) -> list[str]:
    """``kind.key`` for every key of a post or comment object (and of its author and submolt objects)
    that the importer does not read, e.g. ``post.hot_score``, ``comment.author.followerCount``."""
    keys = tuple(obj)
    subs = tuple(tuple(v) if isinstance(v := obj.get(sub), dict) else () for sub in _SUBS)
    if len(keys) + sum(len(s) for s in subs) > _CACHED_KEYS:  # a record's keys are its writer's: bounded
        return list(_ignored_keys.__wrapped__(kind, keys, subs))
    return list(_ignored_keys(kind, keys, subs))


_SUBS = ("author", "submolt")
_CACHED_KEYS = 64


@functools.lru_cache(maxsize=1024)
def _ignored_keys(kind: str, keys: tuple[str, ...], subs: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    """``ignored`` for one set of keys: a dump's records mostly share theirs, so it is worked out once per
    set (an eighth of reading a SQLite dump was this, record by record)."""
    known = POST_FIELDS if kind == "post" else COMMENT_FIELDS
    out = [f"{kind}.{k}" for k in keys if k not in known and snake(k) not in known]
    for sub, sub_keys, sub_known in zip(_SUBS, subs, (AUTHOR_FIELDS, SUBMOLT_FIELDS), strict=True):
        out.extend(f"{kind}.{sub}.{k}" for k in sub_keys if k not in sub_known and snake(k) not in sub_known)
    return tuple(out)
