"""The socialization study's shared-memory probe: does the society remember its own posts, accounts and
history?

The study (arXiv 2602.14299, collective layer) posted 45 probing posts of three types: recommended reads,
notable accounts and community background. Its text, as we have it, gives the three types and the finding
(no consistent recognition of influential figures; references scattered, some to things that do not
exist), not the exact wording: ``probes.tasks.shared_memory`` writes each type in three wordings of our
own, cycled.

Each reply is read for references to the society's own record, in three entity types:

- posts: a known post id (bare or in a ``/post/<id>`` link) or a known post title quoted in the reply
  (titles of at least ``MIN_TITLE`` characters, case-insensitive);
- agents: a known agent id or registered name as a word (case-insensitive);
- communities: ``m/<name>`` of a known submolt.

Explicit handles that name nothing in the record (``@name``, ``u/name``, ``m/name``, a ``/post/<id>``
link) are counted as unknown: the hallucinated references the study reports. The probing agents
themselves are not part of the record.

Each type is scored against the record of the society before the probes were posted (what its agents
could remember), for its own entity type: recommended reads against the most up-voted posts (net votes,
then comments; MoltBook's "top" order), notable accounts against the PageRank leaders of the whole period
before the probes (``report.collective.whole_period_pagerank``, as the collective layer's leaders),
community background against the communities with the most posts. Per type: replies, replies that
reference an entity of the type, the share of explicit references that are unknown, agreement between
replies (mean pairwise Jaccard of the referenced sets), and precision and recall against the record's
top ``TOP_K``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from itertools import combinations
from typing import Any

from molt_society.probes.tasks import KINDS, Kind
from molt_society.report.collective import ranked_leaders, whole_period_pagerank
from molt_society.report.probe_runs import Reply
from molt_society.report.warehouse_source import Warehouse, quoted

TOP_K = 10
MIN_TITLE = 12  # shorter titles ("Hello!") are too common to count as a reference to one post

_TOKEN = re.compile(r"[A-Za-z0-9_\-]+")
_HANDLE = re.compile(r"(?:(?<![\w/])@|(?<![\w/])u/)([A-Za-z0-9_\-]{2,64})")
_SUBMOLT = re.compile(r"(?<![\w/])m/([A-Za-z0-9_\-]{2,64})")
_POST_LINK = re.compile(r"/posts?/([A-Za-z0-9_\-]{1,128})")


@dataclass(frozen=True)
class Record:
    """What the society's record holds, as reply text can name it (keys case-folded)."""

    agents: Mapping[str, str]  # id or registered name -> agent id
    posts: Mapping[str, str]  # post id -> post id
    titles: Mapping[str, str]  # title -> post id (titles of at least MIN_TITLE characters)
    submolts: Mapping[str, str]  # submolt name -> submolt
    top: Mapping[str, list[str]]  # kind -> the record's top entities, best first


@dataclass(frozen=True)
class Refs:
    posts: frozenset[str]
    agents: frozenset[str]
    submolts: frozenset[str]
    explicit: int  # handles and links (@name, u/name, m/name, /post/id)
    unknown: int  # of which naming nothing in the record

    def of(self, kind: Kind) -> frozenset[str]:
        return {"reads": self.posts, "accounts": self.agents, "background": self.submolts}[kind]


def references(text: str, record: Record, exclude: Iterable[str] = ()) -> Refs:
    """The entities of ``record`` that ``text`` names, and how many of its explicit handles name nothing."""
    skip = set(exclude)
    low = text.casefold()
    words = {t.casefold() for t in _TOKEN.findall(text)}
    agents = {record.agents[w] for w in words if w in record.agents} - skip
    posts = {record.posts[w] for w in words if w in record.posts}
    posts |= {pid for title, pid in record.titles.items() if title in low}
    submolts: set[str] = set()
    explicit = unknown = 0
    for m in _HANDLE.finditer(text):
        explicit += 1
        unknown += m.group(1).casefold() not in record.agents
    for m in _SUBMOLT.finditer(text):
        explicit += 1
        name = m.group(1).casefold()
        if name in record.submolts:
            submolts.add(record.submolts[name])
        else:
            unknown += 1
    for m in _POST_LINK.finditer(text):
        explicit += 1
        unknown += m.group(1).casefold() not in record.posts
    return Refs(frozenset(posts), frozenset(agents), frozenset(submolts), explicit, unknown)


@dataclass(frozen=True)
class KindResult:
    kind: str
    probes: int
    replies: int
    referencing: int  # replies that name at least one entity of the type that is in the record
    explicit_refs: int  # handles and links in the replies
    unknown_refs: int  # of which naming nothing in the record
    unknown_share: float | None  # unknown / explicit
    agreement: float | None  # mean pairwise Jaccard between the referencing replies' sets
    precision: float | None  # distinct named entities that are among the record's top
    recall: float | None  # the record's top named by at least one reply
    named: dict[str, int] = field(default_factory=dict)  # entity -> replies naming it
    top: list[str] = field(default_factory=list)


def agreement(sets: Sequence[frozenset[str]]) -> float | None:
    """Mean pairwise Jaccard between non-empty sets (None with fewer than two)."""
    pairs = list(combinations([s for s in sets if s], 2))
    return sum(len(a & b) / len(a | b) for a, b in pairs) / len(pairs) if pairs else None


def score_kind(
    kind: Kind, probes_posted: int, replies: Sequence[Reply], record: Record, exclude: Iterable[str] = ()
) -> KindResult:
    skip = frozenset(exclude)
    refs = [references(r.content, record, skip) for r in replies]
    sets = [r.of(kind) for r in refs]
    named: dict[str, int] = {}
    for s in sets:
        for e in s:
            named[e] = named.get(e, 0) + 1
    top = list(record.top.get(kind, []))
    explicit = sum(r.explicit for r in refs)
    unknown = sum(r.unknown for r in refs)
    return KindResult(
        kind=kind,
        probes=probes_posted,
        replies=len(replies),
        referencing=sum(1 for s in sets if s),
        explicit_refs=explicit,
        unknown_refs=unknown,
        unknown_share=unknown / explicit if explicit else None,
        agreement=agreement(sets),
        precision=sum(1 for e in named if e in top) / len(named) if named else None,
        recall=sum(1 for e in top if e in named) / len(top) if top else None,
        named=dict(sorted(named.items())),
        top=top,
    )


# ----------------------------------------------------------------------- the record, from ClickHouse


def _us(at: datetime | str | None) -> int | None:
    if at is None:
        return None
    t = datetime.fromisoformat(at) if isinstance(at, str) else at
    return int(t.timestamp() * 1_000_000)


def load_record(wh: Warehouse, society: str, until: datetime | str | None = None, k: int = TOP_K) -> Record:
    """The society's record before ``until`` (all of it without): registered agents, posts, submolts, and
    each type's top ``k``. Only the society name and numbers are put into SQL."""
    q = quoted(society)
    until_us = _us(until)
    before = "" if until_us is None else f" AND toUnixTimestamp64Micro(occurred_at) < {until_us}"
    agents: dict[str, str] = {}
    registered = "" if until_us is None else f" AND toUnixTimestamp64Micro(registered_at) < {until_us}"
    for actor, name in wh.query(f"SELECT agent_id, name FROM agents WHERE society = {q}{registered}").rows:
        agents[str(actor).casefold()] = str(actor)
        if name:
            agents[str(name).casefold()] = str(actor)
    posts: dict[str, str] = {}
    titles: dict[str, str] = {}
    for pid, title in wh.query(
        f"SELECT post_id, title FROM events FINAL WHERE society = {q} AND type = 'post_created'{before} "
        "ORDER BY occurred_at, post_id"
    ).rows:
        posts[str(pid).casefold()] = str(pid)
        t = " ".join(str(title).split()).casefold()
        if len(t) >= MIN_TITLE:
            titles.setdefault(t, str(pid))
    # posts: net votes, then comments (votes and comments before ``until`` only)
    ranked_posts = [
        str(pid)
        for pid, *_ in wh.query(
            "SELECT post_id, "
            "sumIf(toInt64(vote), type = 'vote_cast' AND target_type = 'post' AND target_id = post_id) + "
            "sumIf(JSONExtractInt(body, 'upvotes') - JSONExtractInt(body, 'downvotes'), "
            "type = 'vote_tallied' AND target_type = 'post' AND target_id = post_id) AS score, "
            "countIf(type = 'comment_created') AS comments "
            f"FROM events FINAL WHERE society = {q} AND post_id != ''{before} "
            "AND type IN ('post_created', 'comment_created', 'vote_cast', 'vote_tallied') "
            "GROUP BY post_id HAVING countIf(type = 'post_created') > 0 "
            f"ORDER BY score DESC, comments DESC, post_id LIMIT {int(k)}"
        ).rows
    ]
    submolts: dict[str, str] = {}
    for (name,) in wh.query(
        f"SELECT DISTINCT submolt FROM events FINAL WHERE society = {q} AND submolt != ''{before}"
    ).rows:
        submolts[str(name).casefold()] = str(name)
    ranked_submolts = [
        str(name)
        for name, _ in wh.query(
            f"SELECT submolt, count() AS posts FROM events FINAL WHERE society = {q} "
            f"AND type = 'post_created' AND submolt != ''{before} GROUP BY submolt "
            f"ORDER BY posts DESC, submolt LIMIT {int(k)}"
        ).rows
    ]
    leaders = [a for a, _ in ranked_leaders(whole_period_pagerank(wh, society, until_us), k)]
    return Record(
        agents,
        posts,
        titles,
        submolts,
        {"reads": ranked_posts, "accounts": leaders, "background": ranked_submolts},
    )


# ----------------------------------------------------------------------- a probe run


@dataclass(frozen=True)
class MemoryResult:
    """All the run's shared-memory replies read for agents, against the whole period's PageRank leaders."""

    replies: int
    naming: int  # replies that name at least one agent
    agreement: float | None  # mean pairwise Jaccard between the named sets
    precision: float | None  # named agents (distinct) that are PageRank leaders
    recall: float | None  # leaders named by at least one reply
    named: dict[str, int]  # agent -> replies naming it
    leaders: list[str]


def named_agents(text: str, aliases: Mapping[str, str]) -> set[str]:
    """Agents named in ``text``: ``aliases`` maps ids and names (case-insensitive) to agent ids."""
    return {aliases[t.casefold()] for t in _TOKEN.findall(text) if t.casefold() in aliases}


def score_memory(
    replies: Sequence[Reply], aliases: Mapping[str, str], leaders: Sequence[str]
) -> MemoryResult:
    sets = [frozenset(named_agents(r.content, aliases)) for r in replies]
    named: dict[str, int] = {}
    for s in sets:
        for a in s:
            named[a] = named.get(a, 0) + 1
    top = set(leaders)
    return MemoryResult(
        len(replies),
        sum(1 for s in sets if s),
        agreement(sets),
        sum(1 for a in named if a in top) / len(named) if named else None,
        sum(1 for a in top if a in named) / len(top) if top else None,
        dict(sorted(named.items())),
        list(leaders),
    )


def score_run(
    wh: Warehouse,
    society: str,
    records: Sequence[Mapping[str, Any]],
    threads: Mapping[str, Sequence[Reply]],
    until: datetime | str | None,
) -> dict[str, Any]:
    """Score a run's shared-memory probes (``records``: the run's probe records; ``threads``: the external
    replies by post id) against the society's record before ``until`` (the probes' posting time).

    The result keeps the overall agent-naming figures at the top (``replies``, ``naming``, ``agreement``,
    ``precision``, ``recall``, ``named``, ``leaders``) and adds ``kinds``: one ``KindResult`` per probe type.
    A probe record without a type (runs made before the three types) is a notable-accounts probe.
    """
    memory = [r for r in records if r.get("tier") == "memory"]
    prober = {str(a) for r in records for a in r.get("agents", [])}
    record = load_record(wh, society, until)
    by_kind: dict[Kind, list[Reply]] = {k: [] for k in KINDS}
    posted: dict[Kind, int] = dict.fromkeys(KINDS, 0)
    for rec in memory:
        kind_value = (rec.get("meta") or {}).get("kind", "accounts")
        kind: Kind = kind_value if kind_value in KINDS else "accounts"
        posted[kind] += 1
        by_kind[kind].extend(threads.get(str(rec["post_id"]), []))
    everything = [r for k in KINDS for r in by_kind[k]]
    aliases = {name: agent for name, agent in record.agents.items() if agent not in prober}
    doc = asdict(score_memory(everything, aliases, record.top["accounts"]))
    doc["leaders_from"] = "PageRank on every interaction before the probes were posted (whole period)"
    doc["kinds"] = {
        k: asdict(score_kind(k, posted[k], by_kind[k], record, prober)) for k in KINDS if posted[k]
    }
    return doc
