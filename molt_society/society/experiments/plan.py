"""The plan of an experiment arm: its interventions, with what the experiment computes from the base.

``build_plan`` turns an arm of the spec into a ``schemas.arm_plan.ArmPlan`` for one seed:

- ``inject`` interventions with ``probes = n`` become ``n`` injections with the title and content of the
  existing probe tasks: Tier III counting chains (``probes.tasks.tier3``, seed 0), self-contained posts
  that ``probes.score`` can score, the same in every arm and seed (Tier I needs a question file, Tier II
  posts its premises as further comments, which an injection of one post cannot carry);
- ``ban_top_pagerank`` bans the ``k`` agents of highest PageRank (``algorithms.pagerank.pagerank``) of the
  base's interaction graph before the fork, built as the stream processor builds its edges
  (``streams.partition_state``): one edge per comment, from the commenter to the author of the parent
  comment, or of the post for a top-level comment; none for an imported reply without a parent, a reply to
  an unknown comment or a comment on an unknown post; self-edges dropped. Ties by agent id;
- the content rules (``spam_score``, ``near_duplicates``, ``terms``) remove the history's posts and
  comments that ``agents.moderation.Moderator`` flags, read in the order they occurred (a near duplicate is
  one of something earlier).

The base's history is read once per experiment (``BaseHistory``) and shared by every arm and seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from molt_society.algorithms.pagerank import interaction_edges, pagerank
from molt_society.probes.tasks import tier3
from molt_society.schemas.arm_plan import ArmPlan, Ban, Removal
from molt_society.schemas.experiment import (
    Arm,
    BanTopPagerank,
    Inject,
    Intervention,
    NearDuplicates,
    SpamScore,
    Terms,
)

CONTENT_RULES = (SpamScore, NearDuplicates, Terms)
PROBE_SEED = 0
"""The seed of the probe tasks an injection expands into: the same posts in every arm and seed."""


class Item(NamedTuple):
    """A post or comment of the base's history (``parent_id`` '' for a top-level comment or a post)."""

    kind: str  # "post" | "comment"
    item_id: str
    post_id: str
    actor: str
    parent_id: str
    parent_unknown: bool
    text: str


@dataclass
class BaseHistory:
    """The base's posts and comments before the fork, in the order they occurred."""

    items: list[Item] = field(default_factory=list)

    def edges(self) -> list[tuple[str, str, float]]:
        """The interaction graph's weighted edges, as the stream processor builds them."""
        post_author: dict[str, str] = {}
        comment_author: dict[str, tuple[str, str]] = {}  # comment id -> (post id, author)
        pairs: list[tuple[str, str]] = []
        for it in self.items:
            if it.kind == "post":
                post_author.setdefault(it.post_id, it.actor)
                continue
            if it.post_id not in post_author:
                continue  # a comment on an unknown post: rejected by the processor
            dst: str | None
            if it.parent_unknown:
                dst = None
            elif not it.parent_id:
                dst = post_author[it.post_id]
            else:
                parent = comment_author.get(it.parent_id)
                dst = parent[1] if parent is not None and parent[0] == it.post_id else None
            comment_author.setdefault(it.item_id, (it.post_id, it.actor))
            if dst is not None:
                pairs.append((it.actor, dst))
        return interaction_edges(pairs)


class Checker(Protocol):
    """``agents.moderation.Moderator``: ``check`` returns (rule, reason) or None, and remembers the text
    (whatever the outcome: a removed text still makes its copies near duplicates)."""

    def check(self, text: str) -> tuple[str, str] | None: ...


def default_moderator(rules: Sequence[SpamScore | NearDuplicates | Terms]) -> Checker:
    """``agents.moderation.Moderator`` for ``rules``."""
    from molt_society.agents.moderation import Moderator

    moderator: Checker = Moderator(list(rules))
    return moderator


def ranked_agents(edges: Iterable[tuple[str, str, float]]) -> list[tuple[str, float]]:
    """Every node of the graph by decreasing PageRank, ties by id ascending."""
    return sorted(pagerank(edges).items(), key=lambda item: (-item[1], item[0]))


def bans(history: BaseHistory, rule: BanTopPagerank, fork_tick: int) -> list[Ban]:
    """The ``rule.k`` agents of highest PageRank in the base before the fork."""
    ranked = ranked_agents(history.edges())
    return [
        Ban(
            agent_id=agent,
            rule="ban_top_pagerank",
            reason=f"PageRank {score:.6g}, rank {i} of {len(ranked)} before tick {fork_tick}",
        )
        for i, (agent, score) in enumerate(ranked[: rule.k], start=1)
    ]


def removals(history: BaseHistory, moderator: Checker) -> list[Removal]:
    """The history's posts and comments that ``moderator`` flags, in the order they occurred."""
    out: list[Removal] = []
    for it in history.items:
        flagged = moderator.check(it.text)
        if flagged is not None:
            rule, reason = flagged
            out.append(
                Removal(
                    target_type="post" if it.kind == "post" else "comment",
                    target_id=it.item_id,
                    post_id=it.post_id,
                    rule=rule,
                    reason=reason[:2000],
                )
            )
    return out


def content_of(history: BaseHistory, agents: Iterable[str]) -> list[Removal]:
    """Every post and comment of ``agents`` in the history, in the order they occurred (a ban with
    ``remove_content``)."""
    banned = frozenset(agents)
    return [
        Removal(
            target_type="post" if it.kind == "post" else "comment",
            target_id=it.item_id,
            post_id=it.post_id,
            rule="ban_top_pagerank",
            reason=f"content of the banned agent {it.actor}",
        )
        for it in history.items
        if it.actor in banned
    ]


def expand_probes(interventions: Sequence[Intervention]) -> list[Intervention]:
    """Injections of ``probes`` tasks replaced by one injection per task, with its title and content."""
    out: list[Intervention] = []
    for iv in interventions:
        if not isinstance(iv, Inject) or iv.probes is None:
            out.append(iv)
            continue
        doc: dict[str, Any] = iv.model_dump(exclude={"probes", "title", "content"})
        for probe in tier3(iv.probes, PROBE_SEED):
            out.append(Inject.model_validate({**doc, "title": probe.title, "content": probe.content}))
    return out


def build_plan(
    *,
    experiment: str,
    arm: Arm,
    seed: int,
    fork_tick: int,
    fork_at_us: int,
    history: BaseHistory,
    moderator_for: Callable[[Sequence[SpamScore | NearDuplicates | Terms]], Checker] = default_moderator,
) -> ArmPlan:
    """The plan of ``arm`` x ``seed`` (see module docstring)."""
    planned_bans: dict[str, Ban] = {}
    hidden: list[str] = []  # banned agents whose history content goes too
    for iv in arm.interventions:
        if isinstance(iv, BanTopPagerank):
            for ban in bans(history, iv, fork_tick):
                planned_bans.setdefault(ban.agent_id, ban)
                if iv.remove_content:
                    hidden.append(ban.agent_id)
    content = [iv for iv in arm.interventions if isinstance(iv, CONTENT_RULES)]
    planned_removals = removals(history, moderator_for(content)) if content else []
    removed = {r.target_id for r in planned_removals}
    planned_removals += [r for r in content_of(history, hidden) if r.target_id not in removed]
    return ArmPlan(
        experiment=experiment,
        arm=arm.name,
        seed=seed,
        fork_tick=fork_tick,
        fork_at_us=fork_at_us,
        interventions=expand_probes(arm.interventions),
        bans=list(planned_bans.values()),
        removals=planned_removals,
    )


def needs_history(arms: Iterable[Arm]) -> bool:
    """Whether any arm needs the base's history (a ban or a content rule)."""
    return any(isinstance(iv, (BanTopPagerank, *CONTENT_RULES)) for a in arms for iv in a.interventions)
