"""A probe session: post the probes into a running society, later score the threads they started.

``inject`` registers the probing agents (``brain="probe"``), posts each probe at the society's current
event time (its newest tick, or its newest stored event if that is later or it has no clock) in one
community and, for Tier II, posts each premise as a top-level comment by a further probing agent. It
writes the run to ``<state_dir>/<society>/probes/<run_id>.json`` (the store of runs and their replies:
``report.probe_runs``). After that the probing agents never act again.

``score`` reads the probe threads from ClickHouse, scores them (``probes.score``; Tier I replies and
threads by the judge, ``probes.judge``), optionally measures Delta-help of several models on the commented
Tier I threads (``probes.helpfulness``), puts the paper's published values beside ours
(``probes.score.comparators``), writes ``<run_id>.results.json`` beside the run and returns it. It can be
run again later: a thread keeps growing while the society runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import secrets
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiokafka import TopicPartition

from molt_society.probes.helpfulness import ModelSpec, delta_help
from molt_society.probes.judge import ExactJudge, Judge
from molt_society.probes.score import (
    ProbeResult,
    ThreadVerdict,
    Verdict,
    comparators,
    external,
    score_judged,
    score_tier2,
    score_tier3,
    summarise,
)
from molt_society.probes.shared_memory import score_run
from molt_society.probes.tasks import Probe
from molt_society.report.probe_runs import ProbeError, ProbeRun, Reply, replies, run_dir, save_run
from molt_society.report.warehouse_source import Warehouse, quoted
from molt_society.runtime import kafka
from molt_society.runtime.lag import highwaters
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.events import (
    AgentRegistered,
    AgentRegisteredBody,
    AgentSubscribed,
    AgentSubscribedBody,
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
    partition_key,
)
from molt_society.schemas.ids import uuid7
from molt_society.schemas.topics import Role, topic_name
from molt_society.schemas.wire import encode_event


def society_now(wh: Warehouse, society: str, timeout: float = 60.0) -> datetime:
    """The society's current event time: its newest stored event (waiting up to ``timeout`` seconds for a
    society that has just started and has nothing stored yet)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = wh.query(
            "SELECT toUnixTimestamp64Micro(max(occurred_at)), count() FROM events "
            f"WHERE society = {quoted(society)}"
        ).rows
        if rows and int(rows[0][1]):
            return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(rows[0][0]))
        if time.monotonic() >= deadline:
            raise ProbeError(
                f"society {society!r} has no events after {timeout:.0f} s: "
                "start it (society run) before probing it"
            )
        time.sleep(0.5)


async def clock_now(bootstrap: str, society: str, timeout: float = 20.0) -> datetime | None:
    """The start of the society's newest tick (its ticks topic, shard 0), or None without ticks (a replay).

    This is the time the agents are at; the newest stored event can lag it by the sink's backlog, and a
    probe dated in the past would rank low in every feed and go unseen. Only the last two records are
    read (the last may be the final tick of a clock that stopped).
    """
    tp = TopicPartition(topic_name(society, Role.TICKS), 0)
    try:
        hw = (await highwaters(bootstrap, society, [tp.topic])).get(tp)
    except TimeoutError:  # a partition did not answer in time: as if it had no ticks
        hw = None
    if not hw:
        return None
    c = kafka.consumer(bootstrap, "reader")
    await c.start()
    newest: int | None = None
    try:
        c.assign([tp])
        c.seek(tp, max(0, hw - 2))
        deadline = time.monotonic() + timeout
        while await c.position(tp) < hw and time.monotonic() < deadline:
            batch = await c.getmany(tp, timeout_ms=300)
            for rec in batch.get(tp, []):
                tick = control.loads(rec.value)
                if not tick["final"]:
                    newest = max(newest or 0, int(tick["sim_time_us"]))
    finally:
        await c.stop()
    return None if newest is None else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=newest)


def _agent(rnd: random.Random) -> tuple[str, str]:
    """An id and a name that look like any other agent's (roster ids are digits only: no clash)."""
    while True:
        tag = f"{rnd.getrandbits(24):06x}"
        if not tag.isdigit():
            return f"agent-{tag}", f"molty_{rnd.randrange(10**4, 10**6)}"


def probe_events(
    probes: list[Probe], society: str, submolt: str, at: datetime, rnd: random.Random
) -> tuple[list[Event], list[dict[str, Any]]]:
    """The events that post ``probes`` at event time ``at``, and the run's record of each probe."""
    events: list[Event] = []
    records = []
    t = at
    for probe in probes:
        agents = []
        for _ in range(1 + len(probe.premises)):
            agent_id, name = _agent(rnd)
            agents.append(agent_id)
            t += timedelta(microseconds=1)
            body = AgentRegisteredBody(name=name, brain="probe")
            events.append(
                AgentRegistered(
                    event_id=uuid7(t, rnd), society=society, actor=agent_id, occurred_at=t, body=body
                )
            )
            events.append(
                AgentSubscribed(
                    event_id=uuid7(t, rnd),
                    society=society,
                    actor=agent_id,
                    occurred_at=t,
                    body=AgentSubscribedBody(submolt=submolt),
                )
            )
        t += timedelta(microseconds=1)
        pid = uuid7(t, rnd)
        events.append(
            PostCreated(
                event_id=pid,
                society=society,
                actor=agents[0],
                occurred_at=t,
                body=PostCreatedBody(
                    post_id=str(pid), submolt=submolt, title=probe.title, content=probe.content
                ),
            )
        )
        premise_ids = []
        for agent_id, text in zip(agents[1:], probe.premises, strict=True):
            t += timedelta(microseconds=1)
            cid = uuid7(t, rnd)
            premise_ids.append(str(cid))
            events.append(
                CommentCreated(
                    event_id=cid,
                    society=society,
                    actor=agent_id,
                    occurred_at=t,
                    causation_id=str(pid),
                    body=CommentCreatedBody(comment_id=str(cid), post_id=str(pid), depth=1, content=text),
                )
            )
        records.append({**asdict(probe), "post_id": str(pid), "agents": agents, "premise_ids": premise_ids})
    return events, records


async def publish(bootstrap: str, society: str, events: list[Event], keys: RecordKeys) -> None:
    producer = kafka.producer(bootstrap, "small", keys=keys)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic_name(society, Role.ACTIONS), encode_event(ev), key=partition_key(ev).encode()
            )
            for ev in events
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def inject(
    settings: Settings,
    wh: Warehouse,
    bootstrap: str,
    society: str,
    probes: list[Probe],
    *,
    submolt: str,
    seed: int | None = None,
) -> ProbeRun:
    """Post ``probes`` into the running society and record the run (see module docstring)."""
    if not probes:
        raise ProbeError("no probes to post")
    stored = society_now(wh, society)
    ticking = asyncio.run(clock_now(bootstrap, society))
    at = max(stored, ticking or stored) + timedelta(milliseconds=1)
    rnd = random.Random(seed if seed is not None else secrets.randbits(64))
    events, records = probe_events(probes, society, submolt, at, rnd)
    asyncio.run(publish(bootstrap, society, events, RecordKeys(settings.state_dir)))
    run = ProbeRun(f"{at:%Y%m%dT%H%M%S}-{rnd.getrandbits(20):05x}", society, submolt, at.isoformat(), records)
    save_run(settings, run)
    return run


def _probe(rec: dict[str, Any]) -> Probe:
    return Probe(
        tier=rec["tier"],
        title=str(rec["title"]),
        content=str(rec["content"]),
        answer=str(rec["answer"]),
        premises=tuple(rec["premises"]),
        start=int(rec["start"]),
        target=int(rec["target"]),
        answer_type="multipleChoice" if rec.get("answer_type") == "multipleChoice" else "exactMatch",
        question=str(
            rec.get("question") or ""
        ),  # runs written before these fields: the title is the question
        step=int(rec.get("step") or 1),
    )


@dataclass
class Judged:
    """The judge's work on the Tier I threads: per-reply verdicts, per-thread verdicts, Delta-help."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    threads: dict[str, ThreadVerdict | None] = field(default_factory=dict)
    help: list[dict[str, Any]] = field(default_factory=list)


async def _judge(
    judge: Judge,
    threads: list[tuple[str, Probe, list[Reply]]],
    help_models: list[ModelSpec],
    help_max_tokens: int,
) -> Judged:
    """Every reply and every thread of the Tier I probes judged, with the judge opened once, and then (if
    asked) Delta-help of each model, its responses judged by the same judge."""
    out = Judged()
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(judge, contextlib.AbstractAsyncContextManager):  # e.g. the LLM judge's client
            await stack.enter_async_context(judge)
        per_reply = await asyncio.gather(*(judge.judge_replies(p, rs) for _, p, rs in threads))
        per_thread = await asyncio.gather(*(judge.judge_thread(p, rs) for _, p, rs in threads))
        for (post_id, _, _), vs, tv in zip(threads, per_reply, per_thread, strict=True):
            out.verdicts.update(vs)
            out.threads[post_id] = tv
        if help_models:
            got = await delta_help(
                help_models,
                [(p, rs, out.verdicts) for _, p, rs in threads],
                judge,
                max_tokens=help_max_tokens,
            )
            out.help = [asdict(h) for h in got]
    return out


def score(
    settings: Settings,
    wh: Warehouse,
    run: ProbeRun,
    judge: Judge | None = None,
    *,
    help_models: list[ModelSpec] | None = None,
    help_max_tokens: int = 512,
) -> dict[str, Any]:
    """Score every probe of ``run`` (see module docstring) and write the results beside the run.
    ``help_models``: measure Delta-help of these models on the commented Tier I threads."""
    judge = judge or ExactJudge()
    threads = replies(wh, run)
    probes = [
        (rec["post_id"], _probe(rec), external(threads[rec["post_id"]], run.agents)) for rec in run.probes
    ]
    tier1 = [(post_id, probe, rs) for post_id, probe, rs in probes if probe.tier == 1]
    judged = asyncio.run(_judge(judge, tier1, help_models or [], help_max_tokens)) if tier1 else Judged()
    per_tier: dict[str, list[ProbeResult]] = {}
    for post_id, probe, rs in probes:
        if probe.tier == 2:
            result = score_tier2(post_id, probe, rs)
        elif probe.tier == 3:
            result = score_tier3(post_id, probe, rs)
        elif probe.tier == 1:
            result = score_judged(post_id, probe, rs, judged.verdicts, judged.threads.get(post_id))
        else:  # shared-memory probes: scored below, per type
            continue
        per_tier.setdefault(str(probe.tier), []).append(result)
    doc: dict[str, Any] = {
        "run_id": run.run_id,
        "society": run.society,
        "judge": judge.name,
        "scored_at": datetime.now(UTC).isoformat(),
        "tiers": {t: asdict(summarise(int(t), rs)) for t, rs in sorted(per_tier.items())},
        "probes": [asdict(r) for rs in per_tier.values() for r in rs],
    }
    doc["published"] = [asdict(c) for c in comparators(doc["tiers"], judge.name)]
    if help_models:
        doc["delta_help"] = judged.help
    failures = getattr(judge, "failures", None)
    if isinstance(failures, int):
        doc["judge_failures"] = failures
    if any(p["tier"] == "memory" for p in run.probes):
        # three probe types, scored against the record before the probes (whole-period leaders)
        external_replies = {post_id: rs for post_id, _, rs in probes}
        doc["shared_memory"] = score_run(wh, run.society, run.probes, external_replies, run.posted_at)
    path = run_dir(settings, run.society) / f"{run.run_id}.results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return doc
