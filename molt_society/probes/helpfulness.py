"""Tier I helpfulness, Delta-help, across several models (Superminds Test, equation 4 and Table 4).

For each model M: Delta-help(M) = Acc(M(q + C*_q)) - Acc(M(q)), over the Tier I questions whose probe got
at least one external comment (the paper's 35 commented questions). C*_q is the thread without the
comments that state an answer (the paper removed "comments containing explicit answers", 11 of 102): we
leave out every comment the judge says offers an answer, and every comment it could not judge. M is asked
with the paper's system prompt (appendix 7.1: Explanation / Answer / Confidence) and, with context, its
user prompt of appendix 7.2 (the thread in time order as ``[author]: text``); its response is judged
against the reference by the run's judge (``probes.judge``: the exact judge reads the ``Answer:`` line;
the LLM judge uses the paper's 7.1 judge prompt). Calls are made at temperature 0.

A question counts for a model only when both its calls were answered and judged (a paired comparison);
the others are counted in ``failed``. Models are named ``NAME`` (the default server) or ``NAME@URL`` (an
OpenAI-compatible base URL, e.g. ``http://127.0.0.1:8080/v1``), comma-separated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from molt_society.agents.llm_client import ChatClient
from molt_society.probes.judge import Judge
from molt_society.probes.score import Verdict, in_time_order
from molt_society.probes.tasks import Probe
from molt_society.report.probe_runs import Reply
from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

SYSTEM = (
    "Your response should be in the following format:\n"
    "Explanation: {your explanation for your answer choice}\n"
    "Answer: {your chosen answer}\n"
    "Confidence: {your confidence score between 0% and 100% for your answer}"
)


class ModelSpecError(ValueError):
    pass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    base_url: str
    api_key: str | None = None


def parse_models(spec: str, default_url: str | None, api_key: str | None = None) -> list[ModelSpec]:
    """``NAME`` or ``NAME@URL`` items, comma-separated; a bare name uses ``default_url``."""
    out = []
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        name, _, url = item.partition("@")
        url = url.strip() or (default_url or "")
        if not name.strip():
            raise ModelSpecError(f"{item!r}: no model name")
        if not url.startswith(("http://", "https://")):
            raise ModelSpecError(f"{item!r}: no model server URL (give NAME@http://host:port/v1)")
        out.append(ModelSpec(name.strip(), url, api_key))
    if not out:
        raise ModelSpecError("no models named")
    return out


@dataclass(frozen=True)
class HelpResult:
    model: str
    base_url: str
    questions: int  # commented questions with both calls answered and judged
    baseline_accuracy: float | None  # Acc(M(q))
    context_accuracy: float | None  # Acc(M(q + C*_q))
    delta_help: float | None
    failed: int  # commented questions left out: a call or a judgment failed
    comments_kept: int
    comments_removed: int  # comments stating an answer (or not judged)


def context_prompt(question: str, kept: Sequence[Reply]) -> str:
    """The paper's user prompt with discussion context (appendix 7.2)."""
    lines = "\n".join(f"[{r.actor}]: {r.content}" for r in in_time_order(kept))
    return (
        f"{question}\n\nBelow is a discussion thread from a social media platform where users discussed this "
        "question. You may use their insights as additional context, but be aware that some comments may "
        f"be incorrect.\n\n--- Discussion Thread ({len(kept)} comments) ---\n"
        + (lines + "\n" if lines else "")
        + "--- End of Discussion ---"
    )


def kept_comments(replies: Sequence[Reply], verdicts: Mapping[str, Verdict]) -> list[Reply]:
    """C*_q: the comments the judge found to state no answer."""
    return [r for r in replies if r.comment_id in verdicts and not verdicts[r.comment_id].offers_answer]


async def _ask(client: ChatClient, model: str, user: str, max_tokens: int) -> str | None:
    call = await client.complete(
        model,
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        max_tokens=max_tokens,
        temperature=0.0,
    )
    if call.outcome != "ok":
        log.warning("delta_help.call_failed", model=model, outcome=call.outcome, error=call.error)
        return None
    return call.text


async def _pair(
    client: ChatClient, model: str, probe: Probe, context: list[Reply], judge: Judge, max_tokens: int
) -> tuple[bool, bool] | None:
    """(baseline correct, with-context correct) for one question, or None when a call or judgment failed."""
    base, ctx = await asyncio.gather(
        _ask(client, model, probe.task, max_tokens),
        _ask(client, model, context_prompt(probe.task, context), max_tokens),
    )
    if base is None or ctx is None:
        return None
    b, c = await judge.judge_response(probe, base), await judge.judge_response(probe, ctx)
    return None if b is None or c is None else (b, c)


async def delta_help(
    models: Sequence[ModelSpec],
    threads: Sequence[tuple[Probe, Sequence[Reply], Mapping[str, Verdict]]],
    judge: Judge,
    *,
    max_tokens: int = 512,
) -> list[HelpResult]:
    """Delta-help of each model on the commented Tier I threads (see the module docstring); ``judge`` must
    be open (``async with``) if it needs to be."""
    commented = [(p, rs, vs) for p, rs, vs in threads if p.tier == 1 and rs]
    contexts = [(p, kept_comments(rs, vs), len(rs)) for p, rs, vs in commented]
    kept = sum(len(k) for _, k, _ in contexts)
    removed = sum(n for _, _, n in contexts) - kept
    out = []
    for m in models:
        async with ChatClient(m.base_url, m.api_key, max_attempts=2) as client:
            got = await asyncio.gather(
                *(_pair(client, m.name, p, k, judge, max_tokens) for p, k, _ in contexts)
            )
        pairs = [g for g in got if g is not None]
        n = len(pairs)
        base_acc = sum(b for b, _ in pairs) / n if n else None
        ctx_acc = sum(c for _, c in pairs) / n if n else None
        out.append(
            HelpResult(
                m.name, m.base_url, n, base_acc, ctx_acc,
                None if base_acc is None or ctx_acc is None else ctx_acc - base_acc,
                len(got) - n, kept, removed,
            )
        )  # fmt: skip
    return out
