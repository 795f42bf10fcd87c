-- Views for the published Molt Dynamics cooperation events and the Superminds thread figures
-- (../shared/notes/metrics.md; ../shared/notes/studies/superminds-test.txt). Applied after molt_dynamics.sql.
-- Python (report/cooperation.py, report/superminds.py) reads them; agent text only leaves them as data.

-- cooperation_md_events: the cooperation events as the public Molt Dynamics code finds them
-- (YCRG-Labs/molt-dynamics, src/molt_dynamics/rq3_collaboration.py,
-- CollaborationIdentifier.identify_collaborative_events and _extract_solution), one row per event:
-- * comments: every comment of the post (any depth), >= 5,
-- * technical: one of the public keyword list (error, bug, fix, issue, problem, help, solution, solve, debug,
--   crash, exception, fail, broken, stuck, how to, implement, code, function, method, class, api, library)
--   ANYWHERE in the lower-cased text "title body comment1 comment2 ..." (joined by single blanks, so a
--   keyword inside a word counts: "prefix" has "fix"), as the code's `kw in text_lower` does. Case folding
--   is ClickHouse's UTF-8 one instead of Python's str.lower (they differ only on a few non-ASCII letters),
-- * participants: the post's author and its commenters, >= 3,
-- * minutes: from the earliest to the latest of the post's and its comments' times, >= 30,
-- * solution: the text of the last comment (in time order, ties by comment id: the code takes the storage
--   order) that contains a backtick (the code tests '```' or '`'), else the last comment's text.
-- The solution is scored in Python (report/cooperation.py) with the code's own regular expressions.
CREATE OR REPLACE VIEW cooperation_md_events AS
SELECT society, post_id, author, submolt, posted_at, comments, participants, minutes, solution
FROM
(
    SELECT
        society,
        post_id,
        anyIf(actor, type = 'post_created')                                  AS author,
        anyIf(submolt, type = 'post_created')                                AS submolt,
        minIf(occurred_at, type = 'post_created')                            AS posted_at,
        countIf(type = 'comment_created')                                    AS comments,
        uniqExact(actor)                                                     AS participants,
        (toUnixTimestamp64Micro(max(occurred_at)) - toUnixTimestamp64Micro(min(occurred_at))) / 60000000.0
                                                                             AS minutes,
        arraySort(x -> (x.1, x.2),
                  groupArrayIf((occurred_at, comment_id, content), type = 'comment_created')) AS thread,
        arrayMap(x -> x.3, thread)                                           AS texts,
        concat(anyIf(title, type = 'post_created'), ' ', anyIf(content, type = 'post_created'),
               arrayStringConcat(arrayMap(t -> concat(' ', t), texts)))      AS all_text,
        multiSearchAnyCaseInsensitiveUTF8(all_text,
            ['error', 'bug', 'fix', 'issue', 'problem', 'help', 'solution', 'solve', 'debug', 'crash',
             'exception', 'fail', 'broken', 'stuck', 'how to', 'implement', 'code', 'function', 'method',
             'class', 'api', 'library'])                                     AS technical,
        if(arrayExists(t -> position(t, '`') > 0, texts),
           arrayLast(t -> position(t, '`') > 0, texts),
           texts[-1])                                                        AS solution
    FROM events FINAL
    WHERE post_id != '' AND type IN ('post_created', 'comment_created')
    GROUP BY society, post_id
    HAVING countIf(type = 'post_created') > 0 AND comments >= 5
)
WHERE technical AND participants >= 3 AND minutes >= 30;

-- cooperation_single_agent: the single-agent attempts that the matched baseline of the cooperation Cohen's d
-- is drawn from. The paper's text: cooperative outcomes "significantly worse than a matched single-agent
-- baseline" (d = -0.88); its public code's baseline (BaselineComparator.collect_individual_baselines) is a
-- placeholder returning nothing, so this rule is ours, said in report/cooperation.py:
-- * technical: the events' keyword rule on the same text (title, body and every comment),
-- * single agent: nobody but the post's author wrote in the thread (its own comments count),
-- * attempt: the last of the author's texts (the post's body, then its comments in time order) that
--   contains a backtick, else the last of them: the events' solution rule, with the body as the first text.
CREATE OR REPLACE VIEW cooperation_single_agent AS
SELECT society, post_id, author, submolt, posted_at, solution
FROM
(
    SELECT
        society,
        post_id,
        anyIf(actor, type = 'post_created')                                  AS author,
        anyIf(submolt, type = 'post_created')                                AS submolt,
        minIf(occurred_at, type = 'post_created')                            AS posted_at,
        uniqExact(actor)                                                     AS participants,
        arraySort(x -> (x.1, x.2),
                  groupArrayIf((occurred_at, comment_id, content), type = 'comment_created')) AS thread,
        arrayConcat([anyIf(content, type = 'post_created')], arrayMap(x -> x.3, thread))     AS texts,
        concat(anyIf(title, type = 'post_created'), ' ',
               arrayStringConcat(texts, ' '))                                AS all_text,
        multiSearchAnyCaseInsensitiveUTF8(all_text,
            ['error', 'bug', 'fix', 'issue', 'problem', 'help', 'solution', 'solve', 'debug', 'crash',
             'exception', 'fail', 'broken', 'stuck', 'how to', 'implement', 'code', 'function', 'method',
             'class', 'api', 'library'])                                     AS technical,
        if(arrayExists(t -> position(t, '`') > 0, texts),
           arrayLast(t -> position(t, '`') > 0, texts),
           texts[-1])                                                        AS solution
    FROM events FINAL
    WHERE post_id != '' AND type IN ('post_created', 'comment_created')
    GROUP BY society, post_id
    HAVING countIf(type = 'post_created') > 0
)
WHERE technical AND participants = 1;

-- superminds_posts: one row per post with what the Superminds paper's Figure 5 plots against popularity.
-- * upvotes: up-votes only (the paper bins posts by upvotes, not by score): individual +1 votes on the
--   post plus the up-vote counts of imported tallies,
-- * depth: the deepest comment (a top-level comment has depth 1), 0 without comments,
-- * repliers: distinct agents that commented on the post (the post's author counts when it replied),
-- * bin: 0, 1, 2-3, 4-7, 8+ upvotes. The paper's text names only its top bin ("8+ upvotes"); the lower
--   bins are ours (powers of two), written here once.
-- For the report's other readings of the same figure (report.superminds): downvotes (the score is
-- upvotes - downvotes), the mean depth of the post's comments, and repliers other than the post's author.
CREATE OR REPLACE VIEW superminds_posts AS
SELECT
    society, post_id, upvotes, comments, depth, repliers, downvotes, mean_comment_depth, other_repliers,
    multiIf(upvotes >= 8, 4, upvotes >= 4, 3, upvotes >= 2, 2, upvotes = 1, 1, 0) AS bin,
    ['0', '1', '2-3', '4-7', '8+'][bin + 1]                                      AS bin_label
FROM
(
    SELECT
        society,
        post_id,
        toUInt64(countIf(type = 'vote_cast' AND target_type = 'post' AND target_id = post_id AND vote = 1)
          + sumIf(JSONExtractUInt(body, 'upvotes'),
                  type = 'vote_tallied' AND target_type = 'post' AND target_id = post_id)) AS upvotes,
        countIf(type = 'comment_created')                                      AS comments,
        if(comments = 0, 0, maxIf(depth, type = 'comment_created'))            AS depth,
        uniqExactIf(actor, type = 'comment_created')                           AS repliers,
        toUInt64(countIf(type = 'vote_cast' AND target_type = 'post' AND target_id = post_id AND vote = -1)
          + sumIf(JSONExtractUInt(body, 'downvotes'),
                  type = 'vote_tallied' AND target_type = 'post' AND target_id = post_id)) AS downvotes,
        if(comments = 0, 0, avgIf(events.depth, type = 'comment_created'))     AS mean_comment_depth,
        length(arrayFilter(a -> a != anyIf(actor, type = 'post_created'),
                           groupUniqArrayIf(actor, type = 'comment_created'))) AS other_repliers
    FROM events FINAL
    WHERE post_id != '' AND type IN ('post_created', 'comment_created', 'vote_cast', 'vote_tallied')
    GROUP BY society, post_id
    HAVING countIf(type = 'post_created') > 0
);

-- superminds_depth_by_popularity: Figure 5 (left) per upvote bin: posts, mean and median thread depth over
-- all posts and over posts with at least one comment (median: linear interpolation, as numpy), mean unique
-- repliers (all posts, and commented ones).
CREATE OR REPLACE VIEW superminds_depth_by_popularity AS
SELECT
    society,
    bin,
    any(bin_label)                          AS bin_label,
    count()                                 AS posts,
    countIf(comments > 0)                   AS commented_posts,
    avg(depth)                              AS mean_depth,
    quantileExactInclusive(0.5)(depth)      AS median_depth,
    avgIf(depth, comments > 0)              AS mean_depth_commented,
    avg(repliers)                           AS mean_repliers,
    avgIf(repliers, comments > 0)           AS mean_repliers_commented
FROM superminds_posts
GROUP BY society, bin;
