-- ClickHouse schema of the sink. Applied at sink start by sinks.clickhouse.ensure_schema: every statement is
-- idempotent (IF NOT EXISTS), statements end with a semicolon at the end of a line.
--
-- Effectively-once rows from an at-least-once stream: each insert carries
-- insert_deduplication_token = "topic:partition:first-last", which a single (non-replicated) node only honours
-- with non_replicated_deduplication_window > 0; _topic/_partition/_offset let the sink resume after the last
-- stored offset; ReplacingMergeTree on the natural id is the backstop (query with FINAL for exact results).

-- events: one row per accepted event (society.<name>.events), flattened for SQL; the full body as JSON text.
CREATE TABLE IF NOT EXISTS events
(
    event_id       UUID,
    society        LowCardinality(String),
    type           LowCardinality(String),
    schema_version UInt16,
    actor          String,
    occurred_at    DateTime64(6, 'UTC'),
    causation_id   String,
    post_id        String,
    comment_id     String,
    parent_id      String,
    submolt        String,
    depth          UInt32,
    target_type    LowCardinality(String),
    target_id      String,
    vote           Int8,
    title          String,
    content        String,
    body           String,
    _topic         LowCardinality(String),
    _partition     UInt32,
    _offset        UInt64,
    _inserted_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
ORDER BY (society, type, event_id)
SETTINGS non_replicated_deduplication_window = 1000;

-- metrics: one row per metric value per event-time window and dimension (society.<name>.metrics); a value
-- re-emitted for the same window replaces the older one (version emitted_at).
CREATE TABLE IF NOT EXISTS metrics
(
    metric_id    UUID,
    society      LowCardinality(String),
    metric       LowCardinality(String),
    window_start DateTime64(6, 'UTC'),
    window_end   DateTime64(6, 'UTC'),
    dim          String,
    value        Float64,
    emitted_at   DateTime64(3, 'UTC'),
    _topic       LowCardinality(String),
    _partition   UInt32,
    _offset      UInt64,
    _inserted_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(emitted_at)
ORDER BY (society, metric, window_start, dim, metric_id)
SETTINGS non_replicated_deduplication_window = 1000;

-- dead_letters: one row per rejected record (society.<name>.deadletter) with why it was rejected and where
-- it came from; the sink also files here any record of the events/metrics topics it cannot decode.
CREATE TABLE IF NOT EXISTS dead_letters
(
    society          LowCardinality(String),
    received_at      DateTime64(3, 'UTC'),
    code             LowCardinality(String),
    reason           String,
    origin_topic     String,
    origin_partition Int32,
    origin_offset    Int64,
    key              String,
    value            String,
    _topic           LowCardinality(String),
    _partition       UInt32,
    _offset          UInt64,
    _inserted_at     DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree
ORDER BY (society, _topic, _partition, _offset)
SETTINGS non_replicated_deduplication_window = 1000;

-- threads: one row per post with its thread statistics (comments, distinct commenters, deepest reply, score).
CREATE VIEW IF NOT EXISTS threads AS
SELECT
    society,
    post_id,
    anyIf(submolt, type = 'post_created')                                    AS submolt,
    anyIf(actor, type = 'post_created')                                      AS author,
    minIf(occurred_at, type = 'post_created')                                AS created_at,
    countIf(type = 'comment_created')                                        AS comments,
    uniqExactIf(actor, type = 'comment_created')                             AS participants,
    maxIf(depth, type = 'comment_created')                                   AS max_depth,
    sumIf(toInt64(vote), type = 'vote_cast' AND target_type = 'post' AND target_id = post_id)
      + sumIf(JSONExtractInt(body, 'upvotes') - JSONExtractInt(body, 'downvotes'),
              type = 'vote_tallied' AND target_type = 'post' AND target_id = post_id)  AS score
FROM events FINAL
WHERE post_id != '' AND type IN ('post_created', 'comment_created', 'vote_cast', 'vote_tallied')
GROUP BY society, post_id
HAVING countIf(type = 'post_created') > 0;

-- metric_latest: for each (society, metric, dim) the value of its latest window.
CREATE VIEW IF NOT EXISTS metric_latest AS
SELECT
    society,
    metric,
    dim,
    latest_value        AS value,
    latest_window_start AS window_start,
    latest_window_end   AS window_end
FROM
(
    SELECT
        society,
        metric,
        dim,
        argMax(value, window_start)      AS latest_value,
        max(window_start)                AS latest_window_start,
        argMax(window_end, window_start) AS latest_window_end
    FROM metrics FINAL
    GROUP BY society, metric, dim
);

-- model_calls: one row per model call of an LLM agent (model_called events): cost and latency as data.
-- "What did this society cost?":  SELECT model, count(), sum(prompt_tokens), sum(completion_tokens)
--                                 FROM model_calls WHERE society = 'demo' GROUP BY model
CREATE OR REPLACE VIEW model_calls AS
SELECT
    society,
    event_id,
    actor,
    occurred_at,
    JSONExtractString(body, 'model')              AS model,
    JSONExtractString(body, 'outcome')            AS outcome,
    toUInt64(JSONExtractUInt(body, 'prompt_tokens'))     AS prompt_tokens,
    toUInt64(JSONExtractUInt(body, 'completion_tokens')) AS completion_tokens,
    JSONExtractFloat(body, 'latency_ms')          AS latency_ms,
    toUInt32(JSONExtractUInt(body, 'attempts'))   AS attempts,
    JSONExtractString(body, 'decision')           AS decision,
    JSONExtractString(body, 'reason')             AS reason,
    JSONExtractString(body, 'action_event_id')    AS action_event_id
FROM events FINAL
WHERE type = 'model_called';

-- agents: one row per registered agent, whether it registered alone (agent_registered, imports and probes)
-- or in a cohort (agents_joined: a simulated society's genesis, up to 1,000 agents per event).
-- "Which models do the agents use?":  SELECT brain, model, count() FROM agents WHERE society = 'demo'
--                                     GROUP BY brain, model
CREATE OR REPLACE VIEW agents AS
SELECT
    society,
    actor                                   AS agent_id,
    JSONExtractString(body, 'name')         AS name,
    JSONExtractString(body, 'brain')        AS brain,
    JSONExtractString(body, 'model')        AS model,
    JSONExtractString(body, 'persona')      AS persona,
    occurred_at                             AS registered_at,
    event_id
FROM events FINAL
WHERE type = 'agent_registered'
UNION ALL
SELECT
    society,
    JSONExtractString(member, 'agent_id')   AS agent_id,
    JSONExtractString(member, 'name')       AS name,
    JSONExtractString(member, 'brain')      AS brain,
    JSONExtractString(member, 'model')      AS model,
    JSONExtractString(member, 'persona')    AS persona,
    occurred_at                             AS registered_at,
    event_id
FROM events FINAL
ARRAY JOIN JSONExtractArrayRaw(body, 'agents') AS member
WHERE type = 'agents_joined';

-- subscriptions: one row per agent and submolt it subscribed to (agent_subscribed, and the subscriptions
-- of each agent of an agents_joined cohort).
CREATE OR REPLACE VIEW subscriptions AS
SELECT society, actor AS agent_id, submolt, occurred_at, event_id
FROM events FINAL
WHERE type = 'agent_subscribed'
UNION ALL
SELECT
    society,
    JSONExtractString(member, 'agent_id')   AS agent_id,
    submolt,
    occurred_at,
    event_id
FROM events FINAL
ARRAY JOIN JSONExtractArrayRaw(body, 'agents') AS member
ARRAY JOIN JSONExtract(member, 'subscriptions', 'Array(String)') AS submolt
WHERE type = 'agents_joined';
