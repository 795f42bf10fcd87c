-- experiments: one row per arm x seed of a controlled experiment (`society experiment SPEC.toml`,
-- society.experiment). The runner writes a row with status 'started' before the pair runs and one with
-- status 'done' once its history was verified; a newer version replaces the older one, so query with FINAL.
-- A pair is the society `society` (<experiment>.<arm>.s<seed>), forked from `base_society` at `fork_tick`
-- (whose start is `fork_at`) and run for `ticks` ticks with the simulation seed `run_seed`.
-- Compare arms by joining with the metrics of their societies, e.g.
--   SELECT e.arm, avg(m.value) FROM experiments AS e FINAL
--   JOIN metrics AS m ON m.society = e.society
--   WHERE e.experiment = 'x' AND e.status = 'done' AND m.metric = 'events_total' AND m.window_start >= e.fork_at
--   GROUP BY e.arm
CREATE TABLE IF NOT EXISTS experiments
(
    experiment       String,
    arm              String,
    seed             UInt32,
    society          String,
    control          UInt8,
    run_seed         UInt32,
    base_society     String,
    fork_tick        UInt32,
    fork_at          DateTime64(6, 'UTC'),
    ticks            UInt32,
    status           LowCardinality(String),
    history_events   UInt64,
    history_verified UInt8,
    spec_sha256      String,
    started_at       DateTime64(6, 'UTC'),
    finished_at      Nullable(DateTime64(6, 'UTC')),
    wall_seconds     Float64,
    version          UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (experiment, arm, seed);
