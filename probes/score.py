"""Scoring of probe threads, as the Superminds Test reports it (``shared/notes/metrics.md``).

Only replies by agents other than the probing agents count ("external"). Per reply: does it follow the
task, is it correct. Per probe: replies, depth, any correct reply, and whether the thread as a whole got
it right. Per tier:

- ``no_reply_share``: probe posts with no external reply;
- ``replies_per_probe``: external replies per probe;
- ``follow_share``: replies that follow the task;
- ``individual_accuracy``: probes with at least one correct reply (all probes in the denominator);
- ``reply_accuracy``: correct replies among all replies;
- ``thread_accuracy``: probes whose thread as a whole is correct;
- ``mean_depth``: deepest external reply per probe (1 = top-level only).

Exact rules (Tiers II and III): a reply's answer is the last number in it (GSM8K-style). Tier II: a reply
follows the task when it states a number, is correct when its answer is the reference; the thread is
correct when the most common answer among its replies is the reference, alone. Tier III: a reply follows
when it states a number and is correct when its answer is its parent's number plus one (the post's
number is the start; a parent without a number has no successor); the thread is correct when a chain of
correct replies, each answering the previous, reaches the target. Tier I: the judge decides each reply;
the thread is correct when more than half of the task-following replies are correct.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from probes.tasks import Probe

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")


@dataclass(frozen=True)
class Reply:
    comment_id: str
    parent_id: str | None  # None: a top-level comment (answers the post)
    actor: str
    depth: int
    content: str


@dataclass(frozen=True)
class Verdict:
    follows: bool
    correct: bool


@dataclass(frozen=True)
class ProbeResult:
    post_id: str
    tier: object
    replies: int
    following: int
    correct: int
    any_correct: bool
    thread_correct: bool
    max_depth: int
    chain: int = 0  # Tier III: the longest chain of correct replies


@dataclass(frozen=True)
class TierResult:
    tier: object
    probes: int
    no_reply_share: float | None
    replies_per_probe: float | None
    follow_share: float | None
    individual_accuracy: float | None
    reply_accuracy: float | None
    thread_accuracy: float | None
    mean_depth: float | None


def last_number(text: str) -> float | None:
    found = _NUMBER.findall(text.replace(",", ""))
    return float(found[-1]) if found else None


def external(replies: Sequence[Reply], probe_agents: set[str]) -> list[Reply]:
    return [r for r in replies if r.actor not in probe_agents]


def score_tier2(post_id: str, probe: Probe, replies: Sequence[Reply]) -> ProbeResult:
    answers = [last_number(r.content) for r in replies]
    stated = [a for a in answers if a is not None]
    ref = float(probe.answer)
    correct = sum(1 for a in stated if a == ref)
    top = Counter(stated).most_common(2)
    thread = bool(top) and top[0][0] == ref and (len(top) == 1 or top[1][1] < top[0][1])
    return ProbeResult(post_id, 2, len(replies), len(stated), correct, correct > 0, thread, _depth(replies))


def score_tier3(post_id: str, probe: Probe, replies: Sequence[Reply]) -> ProbeResult:
    value: dict[str | None, float | None] = {None: float(probe.start)}  # None: the post
    for r in replies:
        value[r.comment_id] = last_number(r.content)
    ok: dict[str, bool] = {}
    for r in replies:
        mine, before = value[r.comment_id], value.get(r.parent_id)
        ok[r.comment_id] = mine is not None and before is not None and mine == before + 1
    # longest chain of correct replies from the post down (replies keep the depth order of a tree)
    chain: dict[str, int] = {}
    for r in sorted(replies, key=lambda r: r.depth):
        if ok[r.comment_id]:
            chain[r.comment_id] = 1 if r.parent_id is None else chain.get(r.parent_id, -(10**9)) + 1
    longest = max((c for c in chain.values() if c > 0), default=0)
    following = sum(1 for r in replies if value[r.comment_id] is not None)
    correct = sum(ok.values())
    return ProbeResult(
        post_id, 3, len(replies), following, correct, correct > 0, longest >= probe.target,
        _depth(replies), longest,
    )  # fmt: skip


def score_judged(
    post_id: str, probe: Probe, replies: Sequence[Reply], verdicts: Mapping[str, Verdict]
) -> ProbeResult:
    vs = [verdicts[r.comment_id] for r in replies if r.comment_id in verdicts]
    following = [v for v in vs if v.follows]
    correct = sum(1 for v in vs if v.correct)
    thread = bool(following) and 2 * sum(1 for v in following if v.correct) > len(following)
    return ProbeResult(
        post_id, probe.tier, len(replies), len(following), correct, correct > 0, thread, _depth(replies)
    )


def _depth(replies: Sequence[Reply]) -> int:
    return max((r.depth for r in replies), default=0)


def summarise(tier: object, results: Sequence[ProbeResult]) -> TierResult:
    n = len(results)
    replies = sum(r.replies for r in results)

    def share(k: float, d: float) -> float | None:
        return k / d if d else None

    return TierResult(
        tier=tier,
        probes=n,
        no_reply_share=share(sum(1 for r in results if r.replies == 0), n),
        replies_per_probe=share(replies, n),
        follow_share=share(sum(r.following for r in results), replies),
        individual_accuracy=share(sum(1 for r in results if r.any_correct), n),
        reply_accuracy=share(sum(r.correct for r in results), replies),
        thread_accuracy=share(sum(1 for r in results if r.thread_correct), n),
        mean_depth=share(sum(r.max_depth for r in results), n),
    )
