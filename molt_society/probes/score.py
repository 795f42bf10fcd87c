"""Scoring of probe threads, as the Superminds Test (arXiv 2604.22452) defines it.

Only replies by agents other than the probing agents count ("external"). Per reply: does it follow the
task, is it correct. Per probe: replies, depth, any correct reply, and whether the thread as a whole got
it right. Per tier:

- ``no_reply_share``: probe posts with no external reply (the paper: 98.4% of Tier I posts, 93 of 103 =
  90.3% of Tier II posts and 35 of 50 = 70% of Tier III posts had none);
- ``replies_per_probe``: external replies per probe;
- ``follow_share``: replies that follow the task;
- ``individual_accuracy``: probes with at least one correct reply, all probes in the denominator (the
  paper's Acc_individual, its equation 2);
- ``reply_accuracy``: correct replies among all external replies (the paper's Acc_int of Tier II, its
  equation 5; for Tier III the share of replies that "correctly follow the counting sequence");
- ``thread_accuracy``: probes whose thread *as a whole* is correct (Tier I: the paper's Acc_joint, its
  equation 3: a judge reads the whole thread, ``probes.judge``; this is a verdict of its own, not derived
  from the replies' verdicts, so a thread can be right where no single reply is);
- ``mean_depth``: deepest external reply per probe (1 = top-level only).

Exact rules (Tiers II and III):

- Tier II: a reply's answer is the last number in it (GSM8K-style); it follows the task when it states a
  number, is correct when its answer is the reference; the thread is correct when the most common answer
  among its replies is the reference, alone.
- Tier III (paper, section 4.1 and appendix 6.3): "each subsequent agent needs only read the most recent
  number in the thread and produce the next one in sequence", counting by ``step`` (1, 2 or 3) from the
  post's number. Replies are read in time order, whatever their nesting (MoltBook threads are read as a
  page, newest last). A reply with exactly one number follows the format ("Each reply must contain ONLY
  one number") and is correct when that number is the most recent number plus the step; its number, right
  or wrong, becomes the most recent number. A reply with several numbers is "wrong format", one with none
  is off-topic: neither changes the most recent number. (A reply with one number is read as a count even
  when it is spam, "Joined 6 days ago": the next agent reads it as the most recent number.) ``chain`` is
  the longest run of correct continuations in a row; the thread is correct when it reaches ``target``
  (our summary: the paper reports reply counts only).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from molt_society.probes.tasks import Probe
from molt_society.report.probe_runs import Reply

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict on one reply: on the task, correct, and whether it states an answer at all (the
    paper's ``offers_answer``; such replies are left out of the Delta-help context)."""

    follows: bool
    correct: bool
    offers_answer: bool = False


@dataclass(frozen=True)
class ThreadVerdict:
    """A judge's verdict on a whole thread (the paper's collective judgment, appendix 7.3)."""

    correct: bool
    final_answer: str | None = None


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
    chain: int = 0  # Tier III: the longest run of correct continuations
    wrong_format: int = 0  # Tier III: replies with more than one number


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


def numbers(text: str) -> list[float]:
    return [float(x) for x in _NUMBER.findall(text.replace(",", ""))]


def last_number(text: str) -> float | None:
    found = numbers(text)
    return found[-1] if found else None


def external(replies: Sequence[Reply], probe_agents: set[str]) -> list[Reply]:
    return [r for r in replies if r.actor not in probe_agents]


def in_time_order(replies: Sequence[Reply]) -> list[Reply]:
    return sorted(replies, key=lambda r: r.occurred_us)  # stable: ties keep the given order


def score_tier2(post_id: str, probe: Probe, replies: Sequence[Reply]) -> ProbeResult:
    answers = [last_number(r.content) for r in replies]
    stated = [a for a in answers if a is not None]
    ref = float(probe.answer)
    correct = sum(1 for a in stated if a == ref)
    top = Counter(stated).most_common(2)
    thread = bool(top) and top[0][0] == ref and (len(top) == 1 or top[1][1] < top[0][1])
    return ProbeResult(post_id, 2, len(replies), len(stated), correct, correct > 0, thread, _depth(replies))


def score_tier3(post_id: str, probe: Probe, replies: Sequence[Reply]) -> ProbeResult:
    """See the module docstring: the most recent number in the thread, plus the step."""
    latest = float(probe.start)
    following = correct = wrong_format = run = longest = 0
    for r in in_time_order(replies):
        said = numbers(r.content)
        if len(said) > 1:
            wrong_format += 1
            continue
        if not said:
            continue
        following += 1
        if said[0] == latest + probe.step:
            correct += 1
            run += 1
            longest = max(longest, run)
        else:
            run = 0
        latest = said[0]
    return ProbeResult(
        post_id, 3, len(replies), following, correct, correct > 0, longest >= probe.target,
        _depth(replies), longest, wrong_format,
    )  # fmt: skip


def score_judged(
    post_id: str,
    probe: Probe,
    replies: Sequence[Reply],
    verdicts: Mapping[str, Verdict],
    thread: ThreadVerdict | None,
) -> ProbeResult:
    """Tier I: each reply by its verdict (Acc_individual); the thread by the judge's verdict on the thread
    as a whole (Acc_joint). A thread without replies, or whose judgment failed, is not correct."""
    vs = [verdicts[r.comment_id] for r in replies if r.comment_id in verdicts]
    following = sum(1 for v in vs if v.follows)
    correct = sum(1 for v in vs if v.correct)
    joint = bool(replies) and thread is not None and thread.correct
    return ProbeResult(
        post_id, probe.tier, len(replies), following, correct, correct > 0, joint, _depth(replies)
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


# --- the paper's values, as comparators --------------------------------------------------------------

SOURCE = "Superminds Test (Li et al., arXiv 2604.22452)"


@dataclass(frozen=True)
class Published:
    value: float
    source: str
    llm_judge_only: bool = False  # depends on the paper's LLM judge: not shown beside the exact judge


PUBLISHED: dict[tuple[str, str], Published] = {
    ("1", "no_reply_share"): Published(
        0.984, f"{SOURCE}, section 4.2.1 and Table 2: 98.4% of 2,158 HLE posts received no comments"
    ),
    ("1", "individual_accuracy"): Published(
        0.0019, f"{SOURCE}, Table 2: Acc_individual 0.19% of 2,158 (judge: gpt-5-mini)", llm_judge_only=True
    ),
    ("1", "thread_accuracy"): Published(
        0.0014, f"{SOURCE}, Table 2: Acc_joint 0.14% of 2,158 (judge: gpt-5-mini)", llm_judge_only=True
    ),
    ("2", "no_reply_share"): Published(
        93 / 103, f"{SOURCE}, Figure 3: 93 of 103 posts (90.3%) received no external comment"
    ),
    ("2", "replies_per_probe"): Published(17 / 103, f"{SOURCE}, Figure 3: 17 external comments, 103 posts"),
    ("2", "reply_accuracy"): Published(
        11 / 17, f"{SOURCE}, Figure 3: 11 of 17 external comments solved it (Acc_int, eq. 5)"
    ),
    ("3", "no_reply_share"): Published(
        35 / 50, f"{SOURCE}, Figure 4: 35 of 50 counting posts (70%) received no external comment"
    ),
    ("3", "replies_per_probe"): Published(17 / 50, f"{SOURCE}, Figure 4: 17 external comments, 50 posts"),
    ("3", "reply_accuracy"): Published(
        6 / 17, f"{SOURCE}, Figure 4: 6 of 17 comments correctly follow the counting sequence"
    ),
}


@dataclass(frozen=True)
class Comparator:
    tier: str
    metric: str
    ours: float | None
    published: float
    source: str


def comparators(tiers: Mapping[str, Mapping[str, object]], judge: str) -> list[Comparator]:
    """Our tier values beside the paper's, where the paper published one computed the same way. Tier I
    accuracies depend on the paper's LLM judge (its prompts, appendix 7.3) and are shown only beside an
    LLM judge's (the judge model may differ: the paper's was gpt-5-mini)."""
    out = []
    for (tier, metric), pub in PUBLISHED.items():
        if tier not in tiers or (pub.llm_judge_only and judge != "llm"):
            continue
        ours = tiers[tier].get(metric)
        out.append(Comparator(tier, metric, float(ours) if isinstance(ours, int | float) else None,
                              pub.value, pub.source))  # fmt: skip
    return out
