-- Diagnostics of the MoltBook studies as views over the sink's tables (../shared/notes/metrics.md has the
-- definitions). Applied after tables.sql by sinks.clickhouse.ensure_schema; every statement is idempotent.
-- Query them with `society sql`, always filtering on society, e.g.
--   SELECT * FROM activity_daily WHERE society = 'demo' ORDER BY day

-- interaction_edges: one row per comment that links two agents. The directed edge goes from the commenter
-- to the author of what it answers: the post's author for a top-level comment (depth 1), the parent
-- comment's author for a reply. Self-edges are dropped, and so are replies whose parent the data does not
-- give (imported flat exports: depth > 1, no parent_id), rather than guessing a target.
CREATE VIEW IF NOT EXISTS interaction_edges AS
SELECT
    c.society      AS society,
    c.actor        AS src,
    if(c.depth = 1, p.author, pc.author) AS dst,
    c.occurred_at  AS occurred_at,
    c.post_id      AS post_id,
    c.comment_id   AS comment_id
FROM
(
    SELECT society, actor, depth, parent_id, post_id, comment_id, occurred_at
    FROM events FINAL
    WHERE type = 'comment_created'
) AS c
LEFT JOIN
(
    SELECT society, post_id, any(actor) AS author
    FROM events FINAL
    WHERE type = 'post_created'
    GROUP BY society, post_id
) AS p ON c.society = p.society AND c.post_id = p.post_id
LEFT JOIN
(
    SELECT society, comment_id, any(actor) AS author
    FROM events FINAL
    WHERE type = 'comment_created'
    GROUP BY society, comment_id
) AS pc ON c.society = pc.society AND c.parent_id = pc.comment_id
WHERE dst != '' AND dst != src AND (c.depth = 1 OR c.parent_id != '');

-- activity_daily: per society and UTC day, the social layer's activity: posts, comments, votes cast, agents
-- active that day (posted, commented or voted) and newly active agents (their first such action). Imported
-- vote tallies have no day and are not counted here.
CREATE VIEW IF NOT EXISTS activity_daily AS
SELECT
    a.society AS society,
    a.day     AS day,
    a.posts   AS posts,
    a.comments AS comments,
    a.votes   AS votes,
    a.active_agents AS active_agents,
    ifNull(n.new_agents, 0) AS new_agents
FROM
(
    SELECT
        society,
        toDate(occurred_at)                AS day,
        countIf(type = 'post_created')     AS posts,
        countIf(type = 'comment_created')  AS comments,
        countIf(type = 'vote_cast')        AS votes,
        uniqExact(actor)                   AS active_agents
    FROM events FINAL
    WHERE type IN ('post_created', 'comment_created', 'vote_cast')
    GROUP BY society, day
) AS a
LEFT JOIN
(
    SELECT society, first_day AS day, count() AS new_agents
    FROM
    (
        SELECT society, actor, toDate(min(occurred_at)) AS first_day
        FROM events FINAL
        WHERE type IN ('post_created', 'comment_created', 'vote_cast')
        GROUP BY society, actor
    )
    GROUP BY society, day
) AS n ON a.society = n.society AND a.day = n.day
SETTINGS join_use_nulls = 1;
