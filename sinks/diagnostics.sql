-- Diagnostics of the MoltBook studies as views over the sink's tables (../shared/notes/metrics.md has the
-- definitions). Applied after tables.sql by sinks.clickhouse.ensure_schema. Views hold no data, so they are
-- CREATE OR REPLACE: a new version of a definition replaces the old one at the next start.
-- Query them with `society sql`, always filtering on society, e.g.
--   SELECT * FROM activity_daily WHERE society = 'demo' ORDER BY day

-- interaction_edges: one row per comment that links two agents. The directed edge goes from the commenter
-- to the author of what it answers: the post's author for a top-level comment (depth 1), the parent
-- comment's author for a reply. Self-edges are dropped, and so are replies whose parent the data does not
-- give (imported flat exports: depth > 1, no parent_id), rather than guessing a target.
CREATE OR REPLACE VIEW interaction_edges AS
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
CREATE OR REPLACE VIEW activity_daily AS
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

-- lexical_turnover_daily: per society, n-gram length n (1..5) and UTC day, how the vocabulary turns over.
-- Texts are post titles, post bodies and comments; tokens are the runs of Unicode letters and digits of
-- the lower-cased text; an n-gram is n consecutive tokens of one text. Only n-grams occurring at least twice
-- in the society (global frequency >= 2) count. active = n-grams used that day; births = n-grams used for
-- the first time that day; birth_rate = births / active; deaths = n-grams used the day before but not this
-- day; death_rate = deaths / active the day before (NULL when the day before has no text).
CREATE OR REPLACE VIEW lexical_turnover_daily AS
WITH
    texts AS (
        SELECT society, toDate(occurred_at) AS day, extractAll(lowerUTF8(text), '[\\p{L}\\p{N}]+') AS tokens
        FROM
        (
            SELECT society, occurred_at, arrayJoin([title, content]) AS text
            FROM events FINAL
            WHERE type IN ('post_created', 'comment_created')
        )
    ),
    grams AS (
        SELECT society, day, n, gram
        FROM
        (
            SELECT society, day, tokens, arrayJoin([1, 2, 3, 4, 5]) AS n
            FROM texts
        )
        ARRAY JOIN arrayMap(i -> arrayStringConcat(arraySlice(tokens, i, n), ' '),
                            range(1, toUInt32(greatest(length(tokens) + 2, n + 1) - n))) AS gram
    ),
    kept AS (
        SELECT society, n, gram FROM grams GROUP BY society, n, gram HAVING count() >= 2
    ),
    act AS (
        SELECT DISTINCT society, n, gram, day FROM grams WHERE (society, n, gram) IN kept
    ),
    per_day AS (
        SELECT society, n, day, count() AS active FROM act GROUP BY society, n, day
    ),
    born AS (
        SELECT society, n, first_day AS day, count() AS births
        FROM (SELECT society, n, gram, min(day) AS first_day FROM act GROUP BY society, n, gram)
        GROUP BY society, n, day
    ),
    -- n-grams of day d still used on d + 1, labelled d + 1 (no alias may shadow `day` next to a WHERE:
    -- ClickHouse resolves aliases there too)
    kept_next AS (
        SELECT society, n, from_day + 1 AS day, survived
        FROM
        (
            SELECT society, n, day AS from_day, count() AS survived
            FROM act
            WHERE (society, n, gram, day + 1) IN (SELECT society, n, gram, day FROM act)
            GROUP BY society, n, from_day
        )
    )
SELECT
    d.society AS society,
    d.n       AS n,
    d.day     AS day,
    d.active  AS active,
    ifNull(b.births, 0) AS births,
    births / active AS birth_rate,
    if(isNull(p.active), NULL, p.active - ifNull(k.survived, 0)) AS deaths,
    deaths / p.active AS death_rate
FROM per_day AS d
LEFT JOIN born AS b ON d.society = b.society AND d.n = b.n AND d.day = b.day
LEFT JOIN (SELECT society, n, day + 1 AS day, active FROM per_day) AS p
    ON d.society = p.society AND d.n = p.n AND d.day = p.day
LEFT JOIN kept_next AS k ON d.society = k.society AND d.n = k.n AND d.day = k.day
SETTINGS join_use_nulls = 1;
