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
-- in the society (global frequency >= 2) count, for births and deaths alike. Births and deaths are
-- symmetric (socialization study, arXiv 2602.14299, lexical turnover: an n-gram's life runs from its first
-- to its last use): an n-gram is born on the day of its first use and dies on the day after its last use;
-- a gap between two uses is neither a death nor a birth. The observation period is every calendar day from
-- the society's first to its last day with a post or comment (days without text included, active = 0), and
-- it censors both ends alike: a first use on the first day is no birth (the n-gram may be older), a last use
-- on the last day is no death (it may be used again). Columns: active = n-grams used that day; births =
-- n-grams first used that day; birth_rate = births / active; deaths = n-grams last used the day before;
-- death_rate = deaths / active the day before. On the first day births, deaths and both rates are NULL; a
-- rate is NULL when its denominator is 0.
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
    -- the observation period of each society (read from the events: no need to tokenize twice)
    span AS (
        SELECT society, toDate(min(occurred_at)) AS first_day, toDate(max(occurred_at)) AS last_day
        FROM events FINAL
        WHERE type IN ('post_created', 'comment_created')
        GROUP BY society
    ),
    -- each n-gram once, with the days it was used on, its first and its last day (the n-grams are computed
    -- once: everything below reads this aggregate). An n-gram is grouped by the 64-bit hash of its tokens,
    -- not their joined text (8 bytes a key, no string built per n-gram); two distinct n-grams share a hash
    -- with probability about g^2 / 2^65 over g distinct n-grams (under 0.03 for a billion)
    kept AS (
        SELECT society, n, gram, groupUniqArray(day) AS days, min(day) AS born, max(day) AS last_used
        FROM
        (
            SELECT society, day, n, gram
            FROM
            (
                SELECT society, day, tokens, arrayJoin([1, 2, 3, 4, 5]) AS n
                FROM texts
            )
            ARRAY JOIN arrayMap(i -> cityHash64(arraySlice(tokens, i, n)),
                                range(1, toUInt32(greatest(length(tokens) + 2, n + 1) - n))) AS gram
        )
        GROUP BY society, n, gram
        HAVING count() >= 2
    ),
    -- per day, in one pass over the n-grams: used that day, used for the first time, last used the day
    -- before (each n-gram contributes its days of use and the day after its last use)
    per_day AS (
        SELECT
            society, n, d AS day,
            countIf(d <= last_used) AS active,
            countIf(d = born)       AS first_uses,
            countIf(d > last_used)  AS last_uses
        FROM kept
        ARRAY JOIN arrayPushBack(days, last_used + 1) AS d
        GROUP BY society, n, day
    ),
    calendar AS (
        SELECT society, n, first_day, addDays(first_day, i) AS day
        FROM span
        ARRAY JOIN [1, 2, 3, 4, 5] AS n
        ARRAY JOIN range(toUInt32(dateDiff('day', first_day, last_day) + 1)) AS i
    )
SELECT
    society,
    n,
    day,
    active,
    if(day = first_day, NULL, first_uses) AS births,
    if(day = first_day OR active = 0, NULL, first_uses / active) AS birth_rate,
    if(day = first_day, NULL, last_uses) AS deaths,
    if(day = first_day OR prev_active = 0, NULL, last_uses / prev_active) AS death_rate
FROM
(
    -- the calendar has every day of the period, so the row before is the day before
    SELECT
        c.society AS society, c.n AS n, c.day AS day, c.first_day AS first_day,
        u.active AS active, u.first_uses AS first_uses, u.last_uses AS last_uses,
        lagInFrame(u.active) OVER w AS prev_active
    FROM calendar AS c
    LEFT JOIN per_day AS u ON c.society = u.society AND c.n = u.n AND c.day = u.day
    WINDOW w AS (PARTITION BY c.society, c.n ORDER BY c.day ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
);

-- texts: every agent-written text once: a post (title and body joined by a newline) or a comment (body), with
-- its author, time and thread, and text_hash = cityHash64(text), the key of its stored embedding. Empty
-- texts are left out.
CREATE OR REPLACE VIEW texts AS
SELECT
    society,
    if(type = 'post_created', 'post', 'comment') AS kind,
    if(type = 'post_created', post_id, comment_id) AS text_id,
    actor,
    occurred_at,
    post_id,
    parent_id,
    depth,
    text,
    cityHash64(text) AS text_hash
FROM
(
    SELECT
        society, type, post_id, comment_id, actor, occurred_at, parent_id, depth,
        if(type = 'post_created', trimBoth(concat(title, '\n', content)), content) AS text
    FROM events FINAL
    WHERE type IN ('post_created', 'comment_created')
)
WHERE text != '';

-- embeddings: one sentence embedding per distinct text and model (L2-normalised, so a dot product is the
-- cosine similarity), computed once by `society report` and shared by every society with the same text.
CREATE TABLE IF NOT EXISTS embeddings
(
    model     LowCardinality(String),
    text_hash UInt64,
    vector    Array(Float32),
    _inserted_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
ORDER BY (model, text_hash)
SETTINGS non_replicated_deduplication_window = 1000;

-- semantic_daily: per society and UTC day, the semantic stability of the day's texts under
-- all-MiniLM-L6-v2 (texts with more than 1,000 identical copies in the society are left out first, as in
-- the socialization study; texts without a stored embedding yet are not counted). With unit vectors v_i and
-- their sum s over the day's n texts, the mean pairwise cosine similarity is (|s|^2 - n) / (n (n - 1)), and
-- the centroid similarity is the cosine between this day's sum and the previous day's (NULL without a
-- previous day with text). The 10-nearest-neighbour similarity needs every pair and is computed by the report.
CREATE OR REPLACE VIEW semantic_daily AS
WITH
    kept AS (
        SELECT society, toDate(occurred_at) AS day, text_hash
        FROM texts
        WHERE (society, text_hash) NOT IN (
            SELECT society, text_hash FROM texts GROUP BY society, text_hash HAVING count() > 1000
        )
    ),
    per_day AS (
        SELECT k.society AS society, k.day AS day, count() AS texts, sumForEach(e.vector) AS total
        FROM kept AS k
        INNER JOIN (SELECT text_hash, vector FROM embeddings FINAL WHERE model = 'all-MiniLM-L6-v2') AS e
            ON k.text_hash = e.text_hash
        GROUP BY society, day
    )
SELECT
    d.society AS society,
    d.day     AS day,
    d.texts   AS texts,
    if(d.texts < 2, NULL,
       (arraySum(arrayMap(x -> x * x, d.total)) - d.texts) / (d.texts * (d.texts - 1))) AS mean_pairwise_similarity,
    -- without a previous day the joined array is empty (arrays are never NULL): compare with itself, then NULL
    if(isNull(p.texts), NULL,
       1 - cosineDistance(d.total, if(empty(p.total), d.total, p.total))) AS centroid_similarity_prev_day
FROM per_day AS d
LEFT JOIN (SELECT society, day + 1 AS day, texts, total FROM per_day) AS p
    ON d.society = p.society AND d.day = p.day
SETTINGS join_use_nulls = 1;
