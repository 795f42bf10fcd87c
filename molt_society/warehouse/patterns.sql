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
-- k = 0..63), whose agreement between two sets estimates their Jaccard similarity. The 64 minima are
-- written out with constant k: a lambda over range(64) capturing the shingles copies the whole set once
-- per k for every row of a block (more than 8 GiB for one 65,409-row block of a 17M-event society).
CREATE OR REPLACE VIEW clone_sets AS
SELECT
    society,
    set_hash,
    items,
    authors,
    shingles,
    [
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(0))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(1))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(2))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(3))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(4))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(5))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(6))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(7))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(8))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(9))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(10))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(11))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(12))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(13))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(14))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(15))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(16))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(17))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(18))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(19))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(20))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(21))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(22))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(23))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(24))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(25))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(26))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(27))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(28))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(29))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(30))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(31))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(32))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(33))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(34))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(35))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(36))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(37))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(38))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(39))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(40))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(41))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(42))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(43))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(44))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(45))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(46))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(47))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(48))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(49))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(50))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(51))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(52))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(53))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(54))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(55))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(56))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(57))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(58))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(59))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(60))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(61))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(62))), shingles)),
        arrayMin(arrayMap(s -> intHash64(bitXor(s, intHash64(63))), shingles))
    ] AS signature
FROM
(
    SELECT society, set_hash, count() AS items, uniqExact(actor) AS authors, any(shingles) AS shingles
    FROM clone_items
    GROUP BY society, set_hash
);

-- clone_pairs_at(min_jaccard = x): near-duplicate pairs of distinct shingle sets (set_a < set_b) found by
-- locality sensitive hashing of the signatures (16 bands of 4 rows: two sets become candidates when one
-- band agrees, which happens with probability 1 - (1 - J^4)^16: 0.9998 at Jaccard J = 0.8, 0.64 at 0.5),
-- with their exact Jaccard similarity of shingle sets, those at or above x. A candidate whose smaller set
-- has fewer than x times the larger one's shingles is dropped before its shingles are read (Jaccard is
-- at most that ratio). The shingles are read once, straight from clone_items, on the probe side of a join
-- whose build side is the candidates (each pair as its two sets), then gathered per pair: no table of
-- every set's shingles is built (at 17M events 9.6 million sets, twice, in the earlier form).
CREATE OR REPLACE VIEW clone_pairs_at AS
SELECT
    i.society                                                                     AS society,
    set_a,
    set_b,
    arrayJaccardIndex(anyIf(shingles, side = 0), anyIf(shingles, side = 1)) AS jaccard
FROM clone_items AS i
INNER JOIN
(
    SELECT society, set_a, set_b, side, if(side = 0, set_a, set_b) AS set_hash
    FROM
    (
        SELECT DISTINCT society, pair.1.1 AS set_a, pair.2.1 AS set_b
        FROM
        (
            SELECT
                society,
                arrayJoin(arrayFilter(p -> least(p.1.2, p.2.2) >= {min_jaccard:Float64} * greatest(p.1.2, p.2.2),
                    arrayFlatten(arrayMap(
                        i -> arrayMap(j -> (members[i], members[j]), range(i + 1, length(members) + 1)),
                        range(1, length(members) + 1))))) AS pair
            FROM
            (
                SELECT society, arraySort(groupArray((set_hash, n))) AS members
                FROM
                (
                    SELECT society, set_hash, length(shingles) AS n, band,
                        sipHash64(band, arraySlice(signature, band * 4 + 1, 4)) AS bucket
                    FROM clone_sets
                    ARRAY JOIN range(16) AS band
                )
                GROUP BY society, band, bucket
                HAVING count() > 1
            )
        )
    )
    ARRAY JOIN [0, 1] AS side
) AS c ON i.society = c.society AND i.set_hash = c.set_hash
GROUP BY i.society, set_a, set_b
HAVING jaccard >= {min_jaccard:Float64};

-- clone_pairs: every candidate pair of clone_pairs_at with its exact Jaccard similarity, whatever it is.
-- The report reads clone_pairs_at at its threshold.
CREATE OR REPLACE VIEW clone_pairs AS
SELECT society, set_a, set_b, jaccard FROM clone_pairs_at(min_jaccard = 0);
