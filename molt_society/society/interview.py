"""``society interview``: ask one agent of a society a question, from its persona and its own past.

The agent is looked up in the society's stored registrations (``agents_joined`` / ``agent_registered``
events: name, persona, model, subscriptions; imported societies have them too), else rebuilt from the
society's recorded configuration (``society.fork.load_config``) the way the agent worker builds its
roster. Its posts and comments strictly before the interview's time (``--at``: ISO 8601 with a zone or a
tick number, the start of that tick; default the society's end) are read from ClickHouse through
``warehouse.reader`` (the running sink's read-only ``/query`` when a stack runs, else a read-only session
of this process), the newest ``MAX_HISTORY`` of them, texts cut. The prompt is built by
``agents.interview_prompt``, every society text quoted as data. The model is the agent's own (or
``--model``), on ``SOCIETY_LLM_BASE_URL``, else the running stack's model server, else a local model server
started for the interview and stopped after it; temperature 0 and a fixed seed by default, so the same
interview gives the same answer.

Nothing of the society changes: no topic is written, no table. The call is recorded as a ``model_called``
event of the agent (decision ``nothing``: an interview takes no action) in a side log,
``<state_dir>/<society>/interviews.jsonl``, one JSON line per interview with the question, the answer, the
time and the model.

Values in SQL: the readers take one statement and no parameters (the sink's ``/query`` included), so the
society name goes in as ``warehouse.quoted`` (validated) and every other text value as ``unhex('...')`` of
its UTF-8 bytes: only hexadecimal digits ever reach the SQL text; times go in as integers.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import orjson

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.interview_prompt import (
    MAX_HISTORY,
    HistoryItem,
    history_before,
    interview_prompt,
)
from molt_society.agents.llm_brain import call_body
from molt_society.agents.llm_client import ChatClient, ModelCall
from molt_society.agents.roster import agent_index, build_roster
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.runtime.stack_state import model_server_url
from molt_society.schemas.control import from_us, to_us
from molt_society.schemas.events import ModelCalled, format_time
from molt_society.schemas.ids import uuid7
from molt_society.schemas.society_name import BadSocietyName, check_society_name
from molt_society.schemas.wire import encode_event
from molt_society.society.fork import CONFIG_FIELDS, load_config
from molt_society.society.stored import held_line, stored_societies
from molt_society.warehouse import Reader, open_reader, quoted

log = get_logger(__name__)

LOG_FILE = "interviews.jsonl"
_AGENT_ID = re.compile(r"^[A-Za-z0-9_.:@\-]{1,128}$")  # schemas.events.Id
_TITLE_READ = 200  # characters read from ClickHouse (the prompt cuts again)
_CONTENT_READ = 400


class InterviewError(ValueError):
    """The interview cannot be asked (unknown society or agent, bad time); the message says why."""


@dataclass(frozen=True)
class Interviewee:
    agent_id: str
    name: str
    persona: str
    brain: str
    model: str | None
    subscriptions: tuple[str, ...]
    source: Literal["events", "configuration"]


@dataclass(frozen=True)
class Prepared:
    """Everything of an interview but the model's answer."""

    society: str
    agent: Interviewee
    at: datetime | None
    history: list[HistoryItem]
    prompt: str


@dataclass(frozen=True)
class Interview:
    prepared: Prepared
    question: str
    model: str
    call: ModelCall
    event: ModelCalled
    seed: int
    temperature: float
    max_tokens: int

    @property
    def answer(self) -> str:
        return self.call.text.strip()

    @property
    def ok(self) -> bool:
        return self.call.outcome == "ok"

    def record(self) -> dict[str, Any]:
        """The side log's line: the event in wire form, the question, the answer, the time, the model."""
        p = self.prepared
        return {
            "event": orjson.loads(encode_event(self.event)),
            "society": p.society,
            "agent": p.agent.agent_id,
            "question": self.question,
            "answer": self.answer,
            "at": format_time(p.at) if p.at is not None else None,
            "model": self.model,
            "seed": self.seed,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "persona_from": p.agent.source,
            "history_items": len(p.history),
            "prompt": p.prompt,
        }


def hex_text(value: str) -> str:
    """``value`` as an SQL expression made of hexadecimal digits only (``unhex('...')``, a String)."""
    return f"unhex('{value.encode().hex()}')"


def society_settings(settings: Settings, society: str) -> tuple[Settings, dict[str, Any]]:
    """The society's recorded configuration over ``settings`` ({} and ``settings`` when none is recorded:
    an imported society is interviewed from its events alone)."""
    try:
        cfg = load_config(settings, society)
    except FileNotFoundError:
        return settings, {}
    return settings.model_copy(update={k: cfg[k] for k in CONFIG_FIELDS if k in cfg}), cfg


def parse_at(value: str | None, s: Settings, cfg: dict[str, Any]) -> datetime | None:
    """The interview's time: ISO 8601 with a zone, or a tick number (that tick's start: the history of the
    ticks before it); None: the society's recorded end, if any."""
    if value is None:
        end = cfg.get("end_us")
        return from_us(int(end)) if end is not None else None
    v = value.strip()
    if v.isdigit():
        if cfg.get("mode", s.mode) != "sim":
            raise InterviewError("a real-time society has no ticks: give --at as an ISO 8601 time")
        return datetime.fromisoformat(s.sim_start) + timedelta(seconds=int(v) * s.tick_seconds)
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        raise InterviewError(f"--at {value!r}: expected a tick number or an ISO 8601 time") from None
    if t.tzinfo is None:
        raise InterviewError(f"--at {value!r} has no time zone; write it as e.g. 2026-01-28T01:00:00Z")
    return t.astimezone(UTC)


def stored_agent(reader: Reader, society: str, agent_id: str) -> Interviewee | None:
    """The agent as its society's registration events recorded it, None when they do not hold it."""
    q, a = quoted(society), hex_text(agent_id)
    rows = reader.query(
        f"SELECT name, brain, model, persona FROM agents WHERE society = {q} AND agent_id = {a} "
        "ORDER BY registered_at LIMIT 1"
    ).rows
    if not rows:
        return None
    name, brain, model, persona = (str(v or "") for v in rows[0])
    subs = reader.query(
        f"SELECT DISTINCT submolt FROM subscriptions WHERE society = {q} AND agent_id = {a} "
        "ORDER BY submolt LIMIT 64"
    ).rows
    return Interviewee(
        agent_id, name or agent_id, persona, brain or "stochastic", model or None,
        tuple(str(r[0]) for r in subs), "events",
    )  # fmt: skip


def roster_agent(s: Settings, agent_id: str) -> Interviewee | None:
    """The agent as the society's configuration builds it (the agent worker's roster), None when the
    roster has no such agent."""
    index = agent_index(agent_id)
    if index is None or index >= s.agents:
        return None
    roster = build_roster(
        s.seed,
        s.agents,
        s.shards,
        load_behaviour(s.behaviour_file),
        llm_agents=s.llm_agents,
        models=s.model_names,
    )
    spec = roster.spec(index)
    return Interviewee(
        spec.agent_id, spec.name, spec.persona or "", spec.brain, spec.model, spec.subscriptions,
        "configuration",
    )  # fmt: skip


def find_agent(reader: Reader, s: Settings, cfg: dict[str, Any], society: str, agent_id: str) -> Interviewee:
    """The agent from the stored events, else from the configuration; ``InterviewError`` when the society
    has no such agent."""
    if not _AGENT_ID.fullmatch(agent_id):
        raise InterviewError(f"{agent_id[:140]!r} is not an agent id (letters, digits, _ . : @ -)")
    found = stored_agent(reader, society, agent_id) or (roster_agent(s, agent_id) if cfg else None)
    if found is None:
        size = f" its {s.agents} agents are agent-000000 .. {_last_id(s.agents)};" if cfg else ""
        raise InterviewError(
            f"agent {agent_id!r} is not in society {society!r}:{size} no registration of it is stored"
        )
    return found


def _last_id(n: int) -> str:
    return f"agent-{max(0, n - 1):06d}"


def society_end(reader: Reader, society: str) -> tuple[int, int | None]:
    """The number of the society's stored events and the microsecond just after its last one."""
    rows = reader.query(
        "SELECT count(), toUnixTimestamp64Micro(max(occurred_at)) FROM events "
        f"WHERE society = {quoted(society)}"
    ).rows
    n = int(rows[0][0])
    return n, (int(rows[0][1]) + 1 if n else None)


def read_history(
    reader: Reader, society: str, agent_id: str, before: datetime | None, limit: int = MAX_HISTORY
) -> list[HistoryItem]:
    """The agent's newest ``limit`` posts and comments strictly before ``before``, newest first, texts cut;
    a comment carries the title and community of its post."""
    q = quoted(society)
    until = (
        ""
        if before is None
        else f"AND occurred_at < fromUnixTimestamp64Micro(toInt64({to_us(before)}), 'UTC')"
    )
    rows = reader.query(
        "SELECT type, toUnixTimestamp64Micro(occurred_at), submolt, post_id, "
        f"substringUTF8(title, 1, {_TITLE_READ}), substringUTF8(content, 1, {_CONTENT_READ}) "
        f"FROM events FINAL WHERE society = {q} AND actor = {hex_text(agent_id)} "
        f"AND type IN ('post_created', 'comment_created') {until} "
        f"ORDER BY occurred_at DESC, event_id DESC LIMIT {max(0, int(limit))}"
    ).rows
    posts = _post_titles(reader, q, {str(r[3]) for r in rows if r[0] == "comment_created" and r[3]})
    items = []
    for kind, at_us, submolt, post_id, title, content in rows:
        on_title, on_submolt = posts.get(str(post_id), ("", ""))
        items.append(
            HistoryItem(
                "post" if kind == "post_created" else "comment",
                from_us(int(at_us)),
                str(submolt or on_submolt),
                str(title or ""),
                str(content or ""),
                on_title,
            )
        )
    return history_before(items, before, limit)


def _post_titles(reader: Reader, q: str, post_ids: set[str]) -> dict[str, tuple[str, str]]:
    if not post_ids:
        return {}
    ids = ", ".join(hex_text(p) for p in sorted(post_ids))
    rows = reader.query(
        f"SELECT post_id, any(substringUTF8(title, 1, {_TITLE_READ})), any(submolt) FROM events "
        f"WHERE society = {q} AND type = 'post_created' AND post_id IN ({ids}) GROUP BY post_id"
    ).rows
    return {str(p): (str(t or ""), str(s or "")) for p, t, s in rows}


def prepare(settings: Settings, society: str, agent_id: str, question: str, at: str | None) -> Prepared:
    """The agent, its history before the interview's time and the prompt (no model call)."""
    try:
        check_society_name(society)
    except BadSocietyName as exc:
        raise InterviewError(str(exc)) from None
    if not question.strip():
        raise InterviewError("the question is empty")
    s, cfg = society_settings(settings, society)
    when = parse_at(at, s, cfg)
    reader = open_reader(settings, society)
    try:
        stored, end_us = society_end(reader, society)
        if not stored and not cfg:
            raise InterviewError(
                f"society {society!r} has no stored events and no recorded configuration; "
                + held_line(stored_societies(reader))
            )
        if when is None and end_us is not None:
            when = from_us(end_us)
        agent = find_agent(reader, s, cfg, society, agent_id)
        history = read_history(reader, society, agent.agent_id, when)
    finally:
        reader.close()
    text = interview_prompt(
        name=agent.name,
        persona=agent.persona,
        subscriptions=agent.subscriptions,
        history=history,
        question=question,
        at=when,
    )
    return Prepared(society, agent, when, history, text)


@contextmanager
def model_endpoint(
    settings: Settings, society: str, base_url: str | None = None
) -> Iterator[tuple[str, ...]]:
    """The model server(s) to ask: ``base_url``, else ``SOCIETY_LLM_BASE_URL``, else the running stack's
    local server, else a local server started here (``society.model_server``) and stopped afterwards."""
    urls = tuple(u.strip().rstrip("/") for u in (base_url or "").split(",") if u.strip())
    urls = urls or settings.llm_base_urls
    running = model_server_url(settings)
    if urls or running:
        yield urls or (running or "",)
        return
    from molt_society.society.model_server import LocalModelServer

    log_file = settings.state_dir / society / "interview-model-server.log"
    server = LocalModelServer.from_settings(settings, log_file).start()
    try:
        yield (server.base_url,)
    finally:
        server.stop()


async def ask(
    urls: Sequence[str], api_key: str | None, model: str, prompt: str, *,
    max_tokens: int, temperature: float, seed: int, timeout_s: float, max_attempts: int,
) -> ModelCall:  # fmt: skip
    """One chat completion of ``prompt`` (a user message, as the LLM brain sends its prompts)."""
    async with ChatClient(
        list(urls), api_key, concurrency=1, timeout_s=timeout_s, max_attempts=max_attempts
    ) as client:
        return await client.complete(
            model,
            [{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
        )


def call_event(society: str, agent_id: str, call: ModelCall) -> ModelCalled:
    """The interview's ``model_called`` event: the agent's call, which takes no action."""
    now = datetime.now(UTC)
    return ModelCalled(
        event_id=uuid7(now),
        society=society,
        actor=agent_id,
        occurred_at=now,
        body=call_body(
            call,
            "nothing" if call.outcome == "ok" else "failed",
            None if call.outcome == "ok" else f"model call {call.outcome}: {call.error or ''}",
        ),
    )


def interview(
    settings: Settings,
    society: str,
    agent_id: str,
    question: str,
    *,
    at: str | None = None,
    model: str | None = None,
    seed: int = 0,
    temperature: float = 0.0,
    max_tokens: int = 200,
    base_url: str | None = None,
) -> Interview:
    """Ask the question (see module docstring) and append the record to the side log."""
    p = prepare(settings, society, agent_id, question, at)
    s, _ = society_settings(settings, society)
    chosen = model or p.agent.model or s.model_names[0]
    with model_endpoint(settings, society, base_url) as urls:
        call = asyncio.run(
            ask(
                urls, settings.llm_api_key, chosen, p.prompt,
                max_tokens=max_tokens, temperature=temperature, seed=seed,
                timeout_s=settings.llm_timeout_seconds, max_attempts=settings.llm_max_attempts,
            )
        )  # fmt: skip
    done = Interview(
        p, question, chosen, call, call_event(society, p.agent.agent_id, call), seed, temperature, max_tokens
    )
    append_record(settings, society, done.record())
    log.info("interview.done", society=society, agent=p.agent.agent_id, outcome=call.outcome)
    return done


def log_path(settings: Settings, society: str) -> Path:
    """``<state_dir>/<society>/interviews.jsonl``."""
    return settings.state_dir / check_society_name(society) / LOG_FILE


def append_record(settings: Settings, society: str, record: dict[str, Any]) -> Path:
    """Append one JSON line to the society's interview log."""
    path = log_path(settings, society)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as out:
        out.write(orjson.dumps(record) + b"\n")
    return path


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Model text for a terminal: control characters (escape sequences included) shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
