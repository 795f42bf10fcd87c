"""The dashboard's panels: each one a title, what it shows, and the ClickHouse SQL behind it.

Every figure on the page comes from one of these queries (a user can paste any of them into
``society sql``; the page shows them on request) or, for the health panel, from the broker and the sink.
The SQL is written once here and used by the web dashboard and by the Grafana dashboard generated from
it (``python -m molt_society.dashboard.grafana``), so the two show the same numbers.

The only value ever substituted into the SQL is the society name, and only after it passed
``check_society_name`` (``schemas.society_name``; the operator's own input, never agent-written text),
quoted by the access layer (``warehouse.quoted``). Agent-written text (titles, bodies, agent names,
submolt names, dead-letter reasons) only travels as data in the results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from molt_society.warehouse.sql import quoted

__all__ = ["PANELS", "Panel", "Query", "all_queries", "panel"]


@dataclass(frozen=True)
class Query:
    """One named query of a panel; ``{society}`` stands for the quoted society name."""

    name: str
    sql: str

    def render(self, society: str) -> str:
        return self.sql.replace("{society}", quoted(society)).strip()


@dataclass(frozen=True)
class Panel:
    id: str
    title: str
    description: str
    queries: tuple[Query, ...]
    extra_sources: tuple[str, ...] = field(default_factory=tuple)

    def query(self, name: str) -> Query:
        return next(q for q in self.queries if q.name == name)


def _series(*metrics: str) -> Query:
    """Query "series": the value of each of ``metrics`` per window and dimension, newest first."""
    names = ", ".join(f"'{m}'" for m in metrics)
    return Query(
        "series",
        f"""
SELECT window_start AS t, metric, dim, value
FROM metrics FINAL
WHERE society = {{society}} AND metric IN ({names})
ORDER BY t DESC, metric, dim
LIMIT 900
""",
    )


def _latest(metric: str) -> str:
    """SQL for the start of the newest window that has ``metric``."""
    return f"(SELECT max(window_start) FROM metrics WHERE society = {{society}} AND metric = '{metric}')"


# Reddit's hot rank, as the stream processor ranks feeds (algorithms/feeds.py): a constant epoch offset and
# one order of magnitude of net votes per 12.5 h of recency. Like the feeds, it ranks the 500 newest posts
# (an older post cannot beat one 12.5 h newer without ten times its votes); that bounds the rows read.
_HOT_POSTS = """
WITH
    recent AS (
        SELECT post_id FROM events
        WHERE society = {society} AND type = 'post_created'
        ORDER BY occurred_at DESC, post_id
        LIMIT 500),
    tallies AS (
        SELECT post_id, sum(JSONExtractInt(body, 'upvotes') - JSONExtractInt(body, 'downvotes')) AS tallied
        FROM events
        WHERE society = {society} AND type = 'vote_tallied' AND target_type = 'post' AND target_id = post_id
          AND post_id IN recent
        GROUP BY post_id)
SELECT
    post_id, title, post_text, author, submolt, created_at, comments,
    cast_score + tallied AS score,
    sign(score) * log10(greatest(abs(score), 1))
      + (toUnixTimestamp64Micro(created_at) / 1e6 - 1134028003) / 45000 AS hot,
    thread
FROM
(
    SELECT
        post_id,
        anyIf(title, type = 'post_created')                              AS title,
        substringUTF8(anyIf(content, type = 'post_created'), 1, 280)     AS post_text,
        anyIf(actor, type = 'post_created')                              AS author,
        anyIf(submolt, type = 'post_created')                            AS submolt,
        minIf(occurred_at, type = 'post_created')                        AS created_at,
        countIf(type = 'comment_created')                                AS comments,
        sumIf(toInt64(vote),
              type = 'vote_cast' AND target_type = 'post' AND target_id = post_id) AS cast_score,
        -- the first 25 comments: (comment_id, parent_id, depth, actor, content, occurred_at)
        arraySlice(arraySort(c -> (c.6, c.1), groupArrayIf(
            (comment_id, parent_id, depth, actor, content, occurred_at),
            type = 'comment_created')), 1, 25) AS thread
    FROM events
    WHERE society = {society} AND type IN ('post_created', 'comment_created', 'vote_cast')
      AND post_id IN recent
    GROUP BY post_id
    HAVING countIf(type = 'post_created') > 0
) AS p
LEFT JOIN tallies AS t USING (post_id)
ORDER BY hot DESC, post_id
LIMIT 8
"""

PANELS: tuple[Panel, ...] = (
    Panel(
        "activity",
        "Activity",
        "Events stored per second by type (sink insert time, last 2 minutes); events/s stored in the 10 s "
        "up to now; active agents (posted, commented or voted: the report's definition) in all and per "
        "event-time window, and new agents per window.",
        (
            Query(
                "rate",
                """
SELECT toStartOfSecond(_inserted_at) AS second, type, count() AS events
FROM events
WHERE society = {society} AND _inserted_at >= now64(3) - INTERVAL 120 SECOND
GROUP BY second, type
ORDER BY second, type
""",
            ),
            Query(
                "totals",
                """
SELECT count() AS events, countIf(type = 'post_created') AS posts,
       uniqExactIf(actor, type IN ('post_created', 'comment_created', 'vote_cast')) AS agents,
       countIf(type = 'comment_created') AS comments, countIf(type = 'vote_cast') AS votes,
       max(occurred_at) AS society_time
FROM events
WHERE society = {society}
""",
            ),
            Query(
                "windows",
                """
SELECT window_start AS t, metric, value
FROM metrics FINAL
WHERE society = {society} AND metric IN ('active_agents', 'new_agents', 'events_total')
ORDER BY t DESC, metric
LIMIT 600
""",
            ),
        ),
    ),
    Panel(
        "threads",
        "Threads",
        "Reply-depth distribution of every post at the newest window's end (depth 0 = no comment); share "
        "of posts without a comment and mean depth per window.",
        (
            Query(
                "depth",
                f"""
SELECT toUInt32(dim) AS depth, value AS posts
FROM metrics FINAL
WHERE society = {{society}} AND metric = 'depth_hist' AND window_start = {_latest("depth_hist")}
ORDER BY depth
""",
            ),
            _series("share_no_comment", "mean_depth"),
        ),
    ),
    Panel(
        "cascades",
        "Thread sizes",
        "Thread size (comments of a thread, not the Molt Dynamics cascades) as a log-log CCDF, P(S >= s), "
        "at the newest window's end, with the discrete power law fitted by the stream processor "
        "(Clauset et al.).",
        (
            Query(
                "ccdf",
                f"""
SELECT size, posts, sum(posts) OVER (ORDER BY size DESC) / sum(posts) OVER () AS ccdf
FROM
(
    SELECT toUInt64(dim) AS size, value AS posts
    FROM metrics FINAL
    WHERE society = {{society}} AND metric = 'cascade_size_hist'
      AND window_start = {_latest("cascade_size_hist")}
)
WHERE size >= 1
ORDER BY size
""",
            ),
            Query(
                "fit",
                f"""
SELECT dim, value
FROM metrics FINAL
WHERE society = {{society}} AND metric = 'thread_comments_powerlaw'
  AND window_start = {_latest("cascade_size_hist")}
ORDER BY dim
""",
            ),
        ),
    ),
    Panel(
        "influence",
        "Influence",
        "PageRank share of the top 1, 3 and k agents per window on the interaction graph, top-k churn "
        "between consecutive windows, and the newest window's leaders.",
        (
            _series("pagerank_top_share", "topk_churn"),
            Query(
                "leaders",
                f"""
SELECT toUInt32(splitByChar(':', dim)[1]) AS rank, substring(dim, position(dim, ':') + 1) AS agent,
       value AS pagerank
FROM metrics FINAL
WHERE society = {{society}} AND metric = 'pagerank_leader' AND window_start = {_latest("pagerank_leader")}
ORDER BY rank
""",
            ),
        ),
    ),
    Panel(
        "content",
        "Hot posts",
        "The hottest of the 500 newest posts by Reddit's hot rank (the feeds' ranking), each with the "
        "first 25 comments of its thread.",
        (Query("hot", _HOT_POSTS),),
    ),
    Panel(
        "health",
        "Health",
        "Dead letters by reason code and the newest ones; how long ago the sink last stored an event. "
        "Consumer lag (high watermark minus committed offset) comes from the broker, insert latency from "
        "the sink, replay progress from the replay command.",
        (
            Query(
                "dead_letters",
                """
SELECT code, count() AS records, max(received_at) AS last
FROM dead_letters
WHERE society = {society}
GROUP BY code
ORDER BY records DESC, code
""",
            ),
            Query(
                "dead_recent",
                """
SELECT received_at, code, reason
FROM dead_letters
WHERE society = {society}
ORDER BY received_at DESC
LIMIT 5
""",
            ),
            Query(
                "freshness",
                """
SELECT dateDiff('millisecond', max(_inserted_at), now64(3)) AS ms_since_last_insert,
       countIf(_inserted_at >= now64(3) - INTERVAL 10 SECOND) / 10 AS events_per_s_10s
FROM events
WHERE society = {society}
""",
            ),
        ),
        extra_sources=(
            "consumer lag: Kafka high watermark minus each group's committed offset (as `society status`)",
            "insert latency: the sink's GET /health (p99 of its recent ClickHouse inserts)",
            "replay progress: <state_dir>/<society>/replay.json, written by `society replay`",
        ),
    ),
)


def panel(panel_id: str) -> Panel:
    for p in PANELS:
        if p.id == panel_id:
            return p
    raise KeyError(panel_id)


def all_queries() -> list[tuple[Panel, Query]]:
    return [(p, q) for p in PANELS for q in p.queries]
