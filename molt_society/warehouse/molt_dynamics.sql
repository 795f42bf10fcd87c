-- Molt Dynamics diagnostics (../shared/notes/metrics.md, sections "Cascades" and "Cooperation events") as
-- views over the events table. Applied after diagnostics.sql (they use interaction_edges). Python
-- (report/cascades.py, report/cooperation.py) reads them and fits the models SQL cannot fit.
-- Every choice the paper left open is written down next to the SQL that makes it.

-- cascade_adoptions: one row per adoption (society, kind, item, actor, adopted_at) of an item that forms a
-- cascade. An adoption is an agent's first use of the item (earliest occurred_at). Texts: post titles,
-- post bodies and comments, each on its own (an n-gram never spans a title and a body).
-- * meme: n-grams of n = 3, 4, 5 consecutive tokens (tokens as in lexical_turnover_daily: runs of Unicode
--   letters and digits of the lower-cased text), the n-gram joined by single spaces at least 10 characters
--   long, at most half of its tokens English stopwords (scikit-learn's ENGLISH_STOP_WORDS, inlined
--   below); a cascade needs >= 10 distinct adopters. An n-gram inside a longer cascading n-gram is a
--   cascade of its own (no pruning of overlapping n-grams: the paper does not prune).
-- * skill: fenced code blocks (text between a pair of ``` fences, non-greedy, fences paired from the
--   left, an unpaired last fence ignored), ASCII whitespace trimmed at both ends, identified by the MD5 of
--   that text (language tag included); empty blocks skipped; >= 5 distinct adopters.
-- * behaviour: four formatting patterns, each one item; >= 5 distinct adopters.
--   list: a line starting with -, * or + or a number followed by . or ), then a blank and text,
--   header: a line starting with 1-6 # (up to three leading blanks), then a blank and text (a "# comment"
--   line in a code block counts too),
--   emoji: a character in U+1F000-U+1FAFF or U+2600-U+27BF (pictographs, dingbats, symbols),
--   link: a markdown link [text](target) or a bare http(s):// URL.
-- cascade_adoptions_sample(meme_share = m): the same, but of the meme n-grams only those with
-- cityHash64(n-gram) % 1000000 < m (a hash sample of whole meme items, m per million; m >= 1000000: all),
-- filtered before the adoptions are grouped. The report reads it on a large society (report/cascades.py):
-- every adoption of a kept n-gram is there, so each kept cascade is whole; cascade_adoptions is m = 1000000.
CREATE OR REPLACE VIEW cascade_adoptions_sample AS
WITH
    texts AS (
        SELECT society, actor, occurred_at, text
        FROM
        (
            SELECT society, actor, occurred_at, arrayJoin([title, content]) AS text
            FROM events FINAL
            WHERE type IN ('post_created', 'comment_created')
        )
        WHERE text != ''
    ),
    memes AS (
        SELECT society, actor, occurred_at, 'meme' AS kind, arrayStringConcat(words, ' ') AS item
        FROM
        (
            SELECT society, actor, occurred_at, tokens, stops, arrayJoin([3, 4, 5]) AS n
            FROM
            (
                SELECT society, actor, occurred_at, tokens, arrayMap(w -> w IN (
                    'a', 'about', 'above', 'across', 'after', 'afterwards', 'again', 'against', 'all', 'almost', 'alone',
                    'along', 'already', 'also', 'although', 'always', 'am', 'among', 'amongst', 'amoungst', 'amount', 'an',
                    'and', 'another', 'any', 'anyhow', 'anyone', 'anything', 'anyway', 'anywhere', 'are', 'around', 'as',
                    'at', 'back', 'be', 'became', 'because', 'become', 'becomes', 'becoming', 'been', 'before',
                    'beforehand', 'behind', 'being', 'below', 'beside', 'besides', 'between', 'beyond', 'bill', 'both',
                    'bottom', 'but', 'by', 'call', 'can', 'cannot', 'cant', 'co', 'con', 'could', 'couldnt', 'cry', 'de',
                    'describe', 'detail', 'do', 'done', 'down', 'due', 'during', 'each', 'eg', 'eight', 'either', 'eleven',
                    'else', 'elsewhere', 'empty', 'enough', 'etc', 'even', 'ever', 'every', 'everyone', 'everything',
                    'everywhere', 'except', 'few', 'fifteen', 'fifty', 'fill', 'find', 'fire', 'first', 'five', 'for',
                    'former', 'formerly', 'forty', 'found', 'four', 'from', 'front', 'full', 'further', 'get', 'give', 'go',
                    'had', 'has', 'hasnt', 'have', 'he', 'hence', 'her', 'here', 'hereafter', 'hereby', 'herein',
                    'hereupon', 'hers', 'herself', 'him', 'himself', 'his', 'how', 'however', 'hundred', 'i', 'ie', 'if',
                    'in', 'inc', 'indeed', 'interest', 'into', 'is', 'it', 'its', 'itself', 'keep', 'last', 'latter',
                    'latterly', 'least', 'less', 'ltd', 'made', 'many', 'may', 'me', 'meanwhile', 'might', 'mill', 'mine',
                    'more', 'moreover', 'most', 'mostly', 'move', 'much', 'must', 'my', 'myself', 'name', 'namely',
                    'neither', 'never', 'nevertheless', 'next', 'nine', 'no', 'nobody', 'none', 'noone', 'nor', 'not',
                    'nothing', 'now', 'nowhere', 'of', 'off', 'often', 'on', 'once', 'one', 'only', 'onto', 'or', 'other',
                    'others', 'otherwise', 'our', 'ours', 'ourselves', 'out', 'over', 'own', 'part', 'per', 'perhaps',
                    'please', 'put', 'rather', 're', 'same', 'see', 'seem', 'seemed', 'seeming', 'seems', 'serious',
                    'several', 'she', 'should', 'show', 'side', 'since', 'sincere', 'six', 'sixty', 'so', 'some', 'somehow',
                    'someone', 'something', 'sometime', 'sometimes', 'somewhere', 'still', 'such', 'system', 'take', 'ten',
                    'than', 'that', 'the', 'their', 'them', 'themselves', 'then', 'thence', 'there', 'thereafter',
                    'thereby', 'therefore', 'therein', 'thereupon', 'these', 'they', 'thick', 'thin', 'third', 'this',
                    'those', 'though', 'three', 'through', 'throughout', 'thru', 'thus', 'to', 'together', 'too', 'top',
                    'toward', 'towards', 'twelve', 'twenty', 'two', 'un', 'under', 'until', 'up', 'upon', 'us', 'very',
                    'via', 'was', 'we', 'well', 'were', 'what', 'whatever', 'when', 'whence', 'whenever', 'where',
                    'whereafter', 'whereas', 'whereby', 'wherein', 'whereupon', 'wherever', 'whether', 'which', 'while',
                    'whither', 'who', 'whoever', 'whole', 'whom', 'whose', 'why', 'will', 'with', 'within', 'without',
                    'would', 'yet', 'you', 'your', 'yours', 'yourself', 'yourselves'
                    ), tokens) AS stops
                FROM
                (
                    SELECT society, actor, occurred_at, extractAll(lowerUTF8(text), '[\\p{L}\\p{N}]+') AS tokens
                    FROM texts
                )
            )
        )
        ARRAY JOIN
            arrayMap(i -> arraySlice(tokens, i, n), range(1, toUInt32(greatest(length(tokens) + 2, n + 1) - n))) AS words,
            arrayMap(i -> arraySum(arraySlice(stops, i, n)), range(1, toUInt32(greatest(length(tokens) + 2, n + 1) - n))) AS n_stop
        WHERE n_stop * 2 <= n AND lengthUTF8(arrayStringConcat(words, ' ')) >= 10
            AND ({meme_share:UInt32} >= 1000000 OR cityHash64(arrayStringConcat(words, ' ')) % 1000000 < {meme_share:UInt32})
    ),
    skills AS (
        SELECT society, actor, occurred_at, 'skill' AS kind, lower(hex(MD5(block))) AS item
        FROM texts
        ARRAY JOIN arrayFilter(b -> b != '',
                               arrayMap(b -> replaceRegexpAll(b, '^\\s+|\\s+$', ''),
                                        extractAll(text, '(?s)```(.*?)```'))) AS block
    ),
    behaviours AS (
        SELECT society, actor, occurred_at, 'behaviour' AS kind, pattern AS item
        FROM texts
        ARRAY JOIN arrayFilter(p -> p != '', [
            if(match(text, '(?m)^[ \\t]*([-*+]|[0-9]+[.)])[ \\t]+\\S'), 'list', ''),
            if(match(text, '(?m)^[ ]{0,3}#{1,6}[ \\t]+\\S'), 'header', ''),
            if(match(text, '[\\x{1F000}-\\x{1FAFF}\\x{2600}-\\x{27BF}]'), 'emoji', ''),
            if(match(text, '\\[[^\\]]+\\]\\([^)\\s]+\\)|https?://\\S'), 'link', '')]) AS pattern
    ),
    firsts AS (
        SELECT society, kind, item, actor, min(occurred_at) AS adopted_at
        FROM
        (
            SELECT * FROM memes
            UNION ALL
            SELECT * FROM skills
            UNION ALL
            SELECT * FROM behaviours
        )
        GROUP BY society, kind, item, actor
    )
SELECT society, kind, item, adopter.1 AS actor, adopter.2 AS adopted_at
FROM
(
    SELECT society, kind, item, groupArray((actor, adopted_at)) AS adopters
    FROM firsts
    GROUP BY society, kind, item
    HAVING length(adopters) >= if(kind = 'meme', 10, 5)
)
ARRAY JOIN adopters AS adopter;

-- cascade_adoptions: every adoption of every cascade, as defined above (every meme n-gram kept).
CREATE OR REPLACE VIEW cascade_adoptions AS
SELECT society, kind, item, actor, adopted_at FROM cascade_adoptions_sample(meme_share = 1000000);

-- cascades: one row per cascade: size = distinct adopters, seeded_at = first adoption, last_adopted_at.
CREATE OR REPLACE VIEW cascades AS
SELECT
    society,
    kind,
    item,
    count()          AS size,
    min(adopted_at)  AS seeded_at,
    max(adopted_at)  AS last_adopted_at
FROM cascade_adoptions
GROUP BY society, kind, item;

-- cascade_exposures: one row per (cascade, agent) where the agent adopted the item or at least one of its
-- predecessors did. Predecessors of v: agents u with an edge u -> v in the whole-history interaction
-- graph (u commented on v's post or comment), counted once however many comments. exposure = number of
-- predecessors that adopted strictly before v did (for an adopter), or that adopted at all (for a
-- non-adopter, i.e. up to the cascade's last adoption). hours = from the cascade's seed to v's adoption
-- (adopter) or to the cascade's last adoption (non-adopter, censored there).
-- This is the published fixed count, for reading in SQL. It is measured at the adoption, so a later
-- adopter has a larger count because it adopted later: models fitted on it find "saturation" even when
-- adoption ignores the network (issue 14, defect 3). The report fits the published models and a Cox model
-- with time-varying exposure plus a permutation null in report/saturation.py, from cascade_adoptions and
-- interaction_edges (the population there is every interaction-graph agent x cascade, as the public code).
CREATE OR REPLACE VIEW cascade_exposures AS
WITH
    successors AS (
        SELECT society, src, groupArray(dst) AS succ
        FROM (SELECT DISTINCT society, src, dst FROM interaction_edges)
        GROUP BY society, src
    ),
    spans AS (
        SELECT
            society, kind, item, actor, adopted_at,
            min(adopted_at) OVER (PARTITION BY society, kind, item) AS seeded_at,
            max(adopted_at) OVER (PARTITION BY society, kind, item) AS last_at
        FROM cascade_adoptions
    ),
    marked AS (
        SELECT
            a.society AS society, a.kind AS kind, a.item AS item, a.adopted_at AS at,
            a.seeded_at AS seeded_at, a.last_at AS last_at,
            arrayJoin(arrayPushFront(arrayMap(v -> (v, 0), s.succ), (a.actor, 1))) AS pair
        FROM spans AS a
        LEFT JOIN successors AS s ON a.society = s.society AND a.actor = s.src
    )
SELECT
    society,
    kind,
    item,
    agent,
    adopted,
    if(adopted = 1, arrayCount(t -> t < own_at, pred_at), length(pred_at)) AS exposure,
    (toUnixTimestamp64Micro(if(adopted = 1, own_at, last_at)) - toUnixTimestamp64Micro(seeded_at))
        / 3600000000.0 AS hours
FROM
(
    SELECT
        society, kind, item,
        pair.1                        AS agent,
        toUInt8(max(pair.2))          AS adopted,
        minIf(at, pair.2 = 1)         AS own_at,
        groupArrayIf(at, pair.2 = 0)  AS pred_at,
        any(seeded_at)                AS seeded_at,
        any(last_at)                  AS last_at
    FROM marked
    GROUP BY society, kind, item, agent
);

-- cooperation_threads: per post, its thread statistics and the quality flags, in two scopes: 'thread'
-- (post title, post body and every comment) and 'post' (title and body only, the single-agent baseline).
-- * participants: distinct agents among the post's author and its commenters (as the public Molt Dynamics
--   code counts them), minutes: from the post to its last comment (0 without comments).
-- * technical: a keyword of the public Molt Dynamics list at the start of a word, case-insensitive
--   (error, bug, fix, issue, problem, help, solution, solve, debug, crash, exception, fail, broken,
--   stuck, how to, implement, code, function, method, class, api, library), so "fixed" and "errors"
--   count but "prefix" and "rapid" do not (the public code matches anywhere in a word).
-- * qualifies: >= 5 comments, >= 3 participants, >= 30 minutes and a technical thread.
-- * has_code: a fenced block or inline code (``` ... ``` or `...`) in some text; has_comments: such a
--   code span contains a comment marker (#, // or /*); has_tests: "test", "assert" or "expect" at the
--   start of a word anywhere (case-insensitive); balanced: every text of the scope has balanced (), []
--   and {} (each text on its own, so a bracket never closes across two comments).
-- * quality = 0.3 has_code + 0.2 has_comments + 0.3 has_tests + 0.2 balanced, computed in integer tenths
--   so that success (quality > 0.5) has no rounding edge.
CREATE OR REPLACE VIEW cooperation_threads AS
WITH
    per_post AS (
        SELECT
            society,
            post_id,
            anyIf(actor, type = 'post_created')                 AS author,
            countIf(type = 'comment_created')                   AS comments,
            uniqExact(actor)                                    AS participants,
            if(comments = 0, 0.0,
               (toUnixTimestamp64Micro(maxIf(occurred_at, type = 'comment_created'))
                - toUnixTimestamp64Micro(minIf(occurred_at, type = 'post_created'))) / 60000000.0) AS minutes,
            [anyIf(title, type = 'post_created'), anyIf(content, type = 'post_created')] AS post_texts,
            groupArrayIf(content, type = 'comment_created')     AS comment_texts
        FROM events FINAL
        WHERE post_id != '' AND type IN ('post_created', 'comment_created')
        GROUP BY society, post_id
        HAVING countIf(type = 'post_created') > 0
    ),
    scoped AS (
        SELECT
            society, post_id, author, comments, participants, minutes,
            scope_texts.1 AS scope,
            scope_texts.2 AS texts,
            arrayExists(t -> match(t, '(?i)\\b(error|bug|fix|issue|problem|help|solution|solve|debug|crash|exception|fail|broken|stuck|how to|implement|code|function|method|class|api|library)'),
                        arrayConcat(post_texts, comment_texts)) AS thread_technical
        FROM per_post
        ARRAY JOIN [('thread', arrayConcat(post_texts, comment_texts)), ('post', post_texts)] AS scope_texts
    ),
    flagged AS (
        SELECT
            society, post_id, author, comments, participants, minutes, scope,
            arrayExists(t -> match(t, '(?i)\\b(error|bug|fix|issue|problem|help|solution|solve|debug|crash|exception|fail|broken|stuck|how to|implement|code|function|method|class|api|library)'),
                        texts) AS technical,
            comments >= 5 AND participants >= 3 AND minutes >= 30 AND thread_technical AS qualifies,
            toUInt8(arrayExists(t -> match(t, '```|`[^`]+`'), texts)) AS has_code,
            toUInt8(arrayExists(t -> arrayExists(s -> match(s, '#|//|/\\*'),
                                                 extractAll(t, '(?s)```.*?```|`[^`]+`')), texts)) AS has_comments,
            toUInt8(arrayExists(t -> match(t, '(?i)\\b(test|assert|expect)'), texts)) AS has_tests,
            toUInt8(arrayAll(t -> arrayFold((acc, c) -> if(acc = '!', acc,
                                                          if(c IN ('(', '[', '{'), concat(acc, c),
                                                             if(endsWith(acc, transform(c, [')', ']', '}'], ['(', '[', '{'], '')),
                                                                substring(acc, 1, length(acc) - 1), '!'))),
                                            splitByRegexp('', replaceRegexpAll(t, '[^()\\[\\]{}]', '')), '') = '',
                             texts)) AS balanced
        FROM scoped
    )
SELECT
    society, post_id, author, comments, participants, minutes, scope, technical, qualifies,
    has_code, has_comments, has_tests, balanced,
    3 * has_code + 2 * has_comments + 3 * has_tests + 2 * balanced AS quality_tenths,
    quality_tenths / 10.0  AS quality,
    quality_tenths > 5     AS success
FROM flagged;

-- cooperation_events: one row per cooperation event (a qualifying thread) with its thread-scope flags.
CREATE OR REPLACE VIEW cooperation_events AS
SELECT
    society, post_id, author, comments, participants, minutes,
    has_code, has_comments, has_tests, balanced, quality, success
FROM cooperation_threads
WHERE scope = 'thread' AND qualifies;

-- cooperation_baseline: the single-agent baseline, one row per technical post (keyword in its own title
-- or body) whose thread is not a cooperation event, with the flags of the post text alone.
CREATE OR REPLACE VIEW cooperation_baseline AS
SELECT
    society, post_id, author, comments, participants, minutes,
    has_code, has_comments, has_tests, balanced, quality, success
FROM cooperation_threads
WHERE scope = 'post' AND technical AND NOT qualifies;
