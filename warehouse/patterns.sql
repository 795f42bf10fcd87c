-- MoltBook analyses beyond the three studies, as views over the sink's events (issue 14): posting rhythm
-- (coefficient of variation and burstiness of inter-event gaps) and clone swarms (near-duplicate texts,
-- MinHash / LSH over word shingles). Applied after the other schema files by sinks.clickhouse.ensure_schema:
-- views hold no data, so they are CREATE OR REPLACE. Agent text is only ever a column here, never SQL.
-- Query them filtering on society, e.g.
--   SELECT * FROM rhythm_agents WHERE society = 'demo' AND scope = 'posts' AND cv IS NOT NULL

-- rhythm_agents: per society, scope and agent, the gaps between the agent's consecutive events, in seconds.
-- scope 'posts': its posts only (the population of Li 2026's temporal classification: CoV of inter-post
-- intervals); scope 'activity': its posts and comments together. Actors '' and 'unknown' (imported
-- records without an author) are not agents and are left out.
--   cv         = sample standard deviation (n - 1) / mean of the gaps, as pandas' Series.std() / mean() in
--                Li 2026 (paper/supplementary_information.md S4.1); NULL below 2 gaps or when the mean is 0.
--   burstiness = (sigma - mu) / (sigma + mu) with sigma the population standard deviation (Goh & Barabasi
--                2008): -1 for a metronome, ~0 for a Poisson process, -> 1 for bursts; NULL below 2 gaps
--                or when every gap is 0.
CREATE OR REPLACE VIEW rhythm_agents AS
SELECT
    society,
    scope,
    actor,
    events,
    length(gaps)                                                      AS n_gaps,
    if(length(gaps) > 0, arrayAvg(gaps), NULL)                        AS mean_gap_s,
    if(length(gaps) >= 2, arrayReduce('stddevSamp', gaps), NULL)      AS std_gap_s,
    if(length(gaps) >= 2, arrayReduce('stddevPop', gaps), NULL)       AS std_gap_pop_s,
    if(length(gaps) >= 2 AND arrayAvg(gaps) > 0, arrayReduce('stddevSamp', gaps) / arrayAvg(gaps), NULL) AS cv,
    if(length(gaps) >= 2 AND arrayReduce('stddevPop', gaps) + arrayAvg(gaps) > 0,
       (arrayReduce('stddevPop', gaps) - arrayAvg(gaps)) / (arrayReduce('stddevPop', gaps) + arrayAvg(gaps)),
       NULL)                                                          AS burstiness
FROM
(
    SELECT
        society,
        scope,
        actor,
        count() AS events,
        arrayMap(d -> d / 1e6, arrayPopFront(arrayDifference(arraySort(groupArray(t))))) AS gaps
    FROM
    (
        SELECT
            society,
            actor,
            toUnixTimestamp64Micro(occurred_at) AS t,
            arrayJoin(if(type = 'post_created', ['posts', 'activity'], ['activity'])) AS scope
        FROM events FINAL
        WHERE type IN ('post_created', 'comment_created') AND actor NOT IN ('', 'unknown')
    )
    GROUP BY society, scope, actor
);

-- rhythm_platform: per society and scope, the same statistics for the whole platform's event sequence (the
-- gaps between consecutive events of any agent): how bursty the society's activity is as a whole.
CREATE OR REPLACE VIEW rhythm_platform AS
SELECT
    society,
    scope,
    events,
    length(gaps)                                                      AS n_gaps,
    if(length(gaps) > 0, arrayAvg(gaps), NULL)                        AS mean_gap_s,
    if(length(gaps) >= 2, arrayReduce('stddevPop', gaps), NULL)       AS std_gap_pop_s,
    if(length(gaps) >= 2 AND arrayReduce('stddevPop', gaps) + arrayAvg(gaps) > 0,
       (arrayReduce('stddevPop', gaps) - arrayAvg(gaps)) / (arrayReduce('stddevPop', gaps) + arrayAvg(gaps)),
       NULL)                                                          AS burstiness
FROM
(
    SELECT
        society,
        scope,
        count() AS events,
        arrayMap(d -> d / 1e6, arrayPopFront(arrayDifference(arraySort(groupArray(t))))) AS gaps
    FROM
    (
        SELECT
            society,
            toUnixTimestamp64Micro(occurred_at) AS t,
            arrayJoin(if(type = 'post_created', ['posts', 'activity'], ['activity'])) AS scope
        FROM events FINAL
        WHERE type IN ('post_created', 'comment_created') AND actor NOT IN ('', 'unknown')
    )
    GROUP BY society, scope
);

-- clone_items: one row per post (title and content) or comment (content) of at least 5 words. Words are
-- runs of letters and digits, lower-cased; shingles are the distinct hashes of 3 consecutive words, sorted,
-- set_hash identifies the shingle set (texts with the same set are exact duplicates up to case and
-- punctuation). Shorter texts ("Great post!") are left out: a handful of words says too little to call two
-- texts copies of each other.
CREATE OR REPLACE VIEW clone_items AS
SELECT
    society,
    kind,
    item_id,
    actor,
    occurred_at,
    length(words)          AS words_n,
    shingles,
    sipHash64(shingles)    AS set_hash
FROM
(
    SELECT
        society,
        if(type = 'post_created', 'post', 'comment')          AS kind,
        if(type = 'post_created', post_id, comment_id)        AS item_id,
        actor,
        occurred_at,
        extractAll(lower(if(type = 'post_created', concat(title, ' ', content), content)), '[\\p{L}\\p{N}]+')
            AS words,
        arraySort(arrayDistinct(arrayMap(i -> sipHash64(words[i], words[i + 1], words[i + 2]),
                                          range(1, toUInt64(greatest(length(words), 2)) - 1))))  AS shingles
    FROM events FINAL
    WHERE type IN ('post_created', 'comment_created')
)
WHERE length(words) >= 5;

-- clone_sets: one row per distinct shingle set: how many texts carry it, by how many agents, and its
-- MinHash signature (64 permutations: the minimum over the set of intHash64(shingle XOR intHash64(k)),
-- k = 0..63), whose agreement between two sets estimates their Jaccard similarity.
CREATE OR REPLACE VIEW clone_sets AS
SELECT
    society,
    set_hash,
    items,
    authors,
    shingles,
    arrayMap(k -> arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(k))), shingles)), range(64)) AS signature
FROM
(
    SELECT society, set_hash, count() AS items, uniqExact(actor) AS authors, any(shingles) AS shingles
    FROM clone_items
    GROUP BY society, set_hash
);

-- clone_pairs: candidate near-duplicate pairs of distinct shingle sets (set_a < set_b) found by locality
-- sensitive hashing of the signatures (16 bands of 4 rows: two sets become candidates when one band agrees,
-- which happens with probability 1 - (1 - J^4)^16: 0.9998 at Jaccard J = 0.8, 0.64 at 0.5), with their exact
-- Jaccard similarity of shingle sets. The report keeps the pairs at or above its threshold.
CREATE OR REPLACE VIEW clone_pairs AS
SELECT
    c.society                                     AS society,
    c.set_a                                       AS set_a,
    c.set_b                                       AS set_b,
    arrayJaccardIndex(sa.shingles, sb.shingles)   AS jaccard
FROM
(
    SELECT DISTINCT society, pair.1 AS set_a, pair.2 AS set_b
    FROM
    (
        SELECT
            society,
            arrayJoin(arrayFlatten(arrayMap(
                i -> arrayMap(j -> (members[i], members[j]), range(i + 1, length(members) + 1)),
                range(1, length(members) + 1)))) AS pair
        FROM
        (
            SELECT society, arraySort(groupArray(set_hash)) AS members
            FROM
            (
                SELECT society, set_hash, band, sipHash64(band, arraySlice(signature, band * 4 + 1, 4)) AS bucket
                FROM clone_sets
                ARRAY JOIN range(16) AS band
            )
            GROUP BY society, band, bucket
            HAVING count() > 1
        )
    )
) AS c
INNER JOIN (SELECT society, set_hash, any(shingles) AS shingles FROM clone_items GROUP BY society, set_hash) AS sa
    ON c.society = sa.society AND c.set_a = sa.set_hash
INNER JOIN (SELECT society, set_hash, any(shingles) AS shingles FROM clone_items GROUP BY society, set_hash) AS sb
    ON c.society = sb.society AND c.set_b = sb.set_hash;
