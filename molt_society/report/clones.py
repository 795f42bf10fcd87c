"""Clone swarms: groups of near-duplicate posts and comments written by several agents.

Method (ours: no MoltBook study published this figure, so nothing here carries a published value):

- texts: posts (title and content) and comments (content) of at least ``MIN_WORDS`` words; words are
  runs of letters and digits, lower-cased; a text is the set of its word 3-shingles (view ``clone_items``);
- near-duplicates: two shingle sets with Jaccard similarity >= ``THRESHOLD``. Candidates come from
  MinHash signatures (64 permutations) with locality-sensitive hashing in 16 bands of 4 rows (view
  ``clone_pairs_at``: 99.98% of pairs at Jaccard 0.8 become candidates); each candidate's exact Jaccard
  decides. Identical shingle sets (copies up to case and punctuation) are one set (view ``clone_sets``);
- swarm: a connected component of the near-duplicate graph over shingle sets (single linkage: a chain of
  edits is one swarm) whose texts were written by at least 2 distinct agents. An agent repeating itself
  alone is not a swarm.

Reported: the threshold and parameters, the number of swarms, their sizes (texts), the agents per swarm,
and the share of all posts and of all comments that belong to a swarm (the denominators count every post
and comment, short ones too). The table names swarms by their earliest text's id and never shows agent
text.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from molt_society.report.common import missing, records
from molt_society.report.model import Figure, Item, Scalar, Series, Table
from molt_society.report.warehouse_source import Warehouse, quoted

THRESHOLD = 0.8  # Jaccard similarity of word 3-shingle sets
MIN_WORDS = 5  # the view clone_items keeps texts of at least this many words
SHINGLE = 3
PERMUTATIONS, BANDS, ROWS = 64, 16, 4  # as in the views clone_sets / clone_pairs_at
MIN_AUTHORS = 2
_PAIRS = f"clone_pairs_at(min_jaccard = {THRESHOLD!r})"  # the view at the report's threshold
LISTED_SETS = 10_000  # paired sets named in the members' query (its text stays under ClickHouse's 256 KiB)
TOP = 20
Member = tuple[int, str, str, int, str, str]  # (set hash, kind, actor, texts, first item id, first time)
KEYS = [
    ("clones.swarms", f"clone swarms (near-duplicate groups spanning >= {MIN_AUTHORS} agents)"),
    ("clones.share_posts", "share of all posts that belong to a swarm"),
    ("clones.share_comments", "share of all comments that belong to a swarm"),
]


@dataclass
class Swarm:
    texts: int = 0
    posts: int = 0
    comments: int = 0
    sets: int = 0
    authors: set[str] = field(default_factory=set)
    first_id: str = ""
    first_at: str = ""


def swarms(members: list[Member], pairs: list[tuple[int, int]]) -> list[Swarm]:
    """Connected components of shingle sets linked by ``pairs``, with >= ``MIN_AUTHORS`` agents.

    ``members``: (set hash, kind, actor, texts, first item id, first time) per set, kind and actor;
    ``pairs``: near-duplicate set pairs. Largest swarm first."""
    index: dict[int, int] = {}
    for h, *_ in members:
        index.setdefault(h, len(index))
    for a, b in pairs:
        index.setdefault(a, len(index))
        index.setdefault(b, len(index))
    n = len(index)
    if n == 0:
        return []
    rows = np.array([index[a] for a, _ in pairs], dtype=np.int64)
    cols = np.array([index[b] for _, b in pairs], dtype=np.int64)
    graph = coo_matrix((np.ones(len(pairs)), (rows, cols)), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    found: dict[int, Swarm] = defaultdict(Swarm)
    sets: dict[int, set[int]] = defaultdict(set)
    for h, kind, actor, texts, first_id, first_at in members:
        s = found[int(label[index[h]])]
        sets[int(label[index[h]])].add(h)
        s.texts += texts
        if kind == "post":
            s.posts += texts
        else:
            s.comments += texts
        s.authors.add(actor)
        if not s.first_at or (first_at, first_id) < (s.first_at, s.first_id):
            s.first_at, s.first_id = first_at, first_id
    for comp, hashes in sets.items():
        found[comp].sets = len(hashes)
    out = [s for s in found.values() if len(s.authors) >= MIN_AUTHORS]
    return sorted(out, key=lambda s: (-s.texts, -len(s.authors), s.first_at, s.first_id))


def items(wh: Warehouse, society: str) -> list[Item]:
    """Parameters, swarm counts and shares, the largest swarms and the size distribution."""
    q = quoted(society)
    n_posts, n_comments = _totals(wh, q)
    params: list[Item] = [
        Scalar(
            "clones.threshold",
            f"near-duplicate threshold (Jaccard of word {SHINGLE}-shingle sets)",
            THRESHOLD,
        ),
        Scalar("clones.min_words", "shortest text considered (words)", MIN_WORDS),
    ]
    considered = _considered(wh, q)
    if not considered:
        why = f"the society has no post or comment of {MIN_WORDS} or more words"
        return params + [missing(k, label, why) for k, label in KEYS]
    pairs = _pairs(wh, q)
    found = swarms(_members(wh, q, pairs), pairs)
    out = [*params, *_counts(considered, found, n_posts, n_comments)]
    if not found:
        return out
    return out + _swarm_items(found)


def _totals(wh: Warehouse, q: str) -> tuple[int, int]:
    """Every post and every comment of the society (short ones too): the shares' denominators."""
    totals = records(
        wh,
        f"SELECT countIf(type = 'post_created') AS posts, countIf(type = 'comment_created') AS comments "
        f"FROM events FINAL WHERE society = {q}",
    )[0]
    return int(totals["posts"]), int(totals["comments"])


def _considered(wh: Warehouse, q: str) -> int:
    """Texts of at least ``MIN_WORDS`` words (view ``clone_items``)."""
    return int(wh.query(f"SELECT count() FROM clone_items WHERE society = {q}").rows[0][0])


def _members(wh: Warehouse, q: str, pairs: list[tuple[int, int]]) -> list[Member]:
    """Per shingle set, kind and actor: the texts and the earliest one (view ``clone_items``), for the sets
    that can be in a swarm: those written by >= ``MIN_AUTHORS`` agents and those in a near-duplicate pair.
    Every other set is a swarm of one agent at most, whatever it is linked to, so it is never read: at 17M
    events that is nearly every one of 9.6 million sets. Up to ``LISTED_SETS`` paired sets are named in the
    query; past that the query finds them again in ``clone_pairs_at`` (computing the pairs a second time)."""
    paired = sorted({h for pair in pairs for h in pair})
    if not paired:
        linked = "0"
    elif len(paired) <= LISTED_SETS:
        linked = f"set_hash IN ({', '.join(str(int(h)) for h in paired)})"
    else:
        linked = f"set_hash IN (SELECT arrayJoin([set_a, set_b]) FROM {_PAIRS} WHERE society = {q})"
    rows = wh.query(
        "SELECT set_hash, kind, actor, texts, first_id, first_at FROM ("
        "SELECT set_hash, kind, actor, count() AS texts, "
        "argMin(item_id, (occurred_at, item_id)) AS first_id, toString(min(occurred_at)) AS first_at, "
        "uniqExact(actor) OVER (PARTITION BY set_hash) AS set_authors "
        f"FROM clone_items WHERE society = {q} GROUP BY set_hash, kind, actor) "
        f"WHERE set_authors >= {MIN_AUTHORS} OR {linked}"
    ).rows
    return [(int(h), str(k), str(a), int(n), str(i), str(t)) for h, k, a, n, i, t in rows]


def _pairs(wh: Warehouse, q: str) -> list[tuple[int, int]]:
    """Near-duplicate shingle-set pairs at or above the threshold (view ``clone_pairs_at``)."""
    return [
        (int(a), int(b)) for a, b in wh.query(f"SELECT set_a, set_b FROM {_PAIRS} WHERE society = {q}").rows
    ]


def _counts(considered: int, found: list[Swarm], n_posts: int, n_comments: int) -> list[Item]:
    """Texts considered, swarms, and the shares of all posts and comments inside a swarm."""
    in_posts = sum(s.posts for s in found)
    in_comments = sum(s.comments for s in found)
    return [
        Scalar(
            "clones.texts",
            f"texts considered (posts and comments of >= {MIN_WORDS} words)",
            considered,
        ),
        Scalar(KEYS[0][0], KEYS[0][1], len(found)),
        Scalar(KEYS[1][0], KEYS[1][1], in_posts / n_posts)
        if n_posts
        else missing(KEYS[1][0], KEYS[1][1], "the society has no post"),
        Scalar(KEYS[2][0], KEYS[2][1], in_comments / n_comments)
        if n_comments
        else missing(KEYS[2][0], KEYS[2][1], "the society has no comment"),
    ]


def _swarm_items(found: list[Swarm]) -> list[Item]:
    """Sizes and agents of the swarms, the largest ones as a table, and the size distribution."""
    sizes = np.array([s.texts for s in found], dtype=float)
    authors = np.array([len(s.authors) for s in found], dtype=float)
    size_counts: dict[int, int] = defaultdict(int)
    for s in found:
        size_counts[s.texts] += 1
    xs = sorted(size_counts)
    return [
        Scalar("clones.largest", "texts in the largest swarm", int(sizes.max())),
        Scalar("clones.median_size", "median texts per swarm", float(np.median(sizes))),
        Scalar("clones.median_authors", "median agents per swarm", float(np.median(authors))),
        Scalar("clones.max_authors", "most agents in one swarm", int(authors.max())),
        Table(
            key="clones.top",
            title=f"Largest clone swarms (Jaccard >= {THRESHOLD:g}; named by their earliest text)",
            columns=[
                "earliest text id",
                "first seen (UTC)",
                "texts",
                "posts",
                "comments",
                "agents",
                "distinct texts",
            ],
            rows=[
                [s.first_id, s.first_at, s.texts, s.posts, s.comments, len(s.authors), s.sets]
                for s in found[:TOP]
            ],
        ),
        Figure(
            key="clones.sizes",
            title="Clone swarm sizes",
            x_label="texts in the swarm",
            y_label="swarms",
            log_x=True,
            log_y=True,
            series=[Series("swarms", [float(x) for x in xs], [float(size_counts[x]) for x in xs], "points")],
        ),
    ]
