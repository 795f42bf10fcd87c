"""An experiment arm's interventions, as the agent workers apply them from the plan's fork tick on.

``society experiment`` writes an arm plan (``schemas.arm_plan``) and points ``Settings.arm_plan`` at it; the
agent worker builds an ``ArmRuntime`` from it and, for every tick ``t >= plan.fork_tick``:

1. **records** (shard 0, tick ``fork_tick``): one ``intervention_applied`` per intervention (actor
   ``experiment``; ``params`` its JSON, ``scope`` ``all`` | ``submolts:a,b`` | ``share:f``), one
   ``agent_banned`` per ban and one ``content_removed`` per removal of the plan (actor ``moderator``);
2. **bans**: the events of banned agents are refused (dropped after their brain decided), so they take no
   action while every other agent draws what it draws in the control (``ArmRuntime.refused``);
3. **feed policy**: an agent in a ``feed_policy`` intervention's scope sees, as a submolt's "hot" list, the
   policy's ranking (``algorithms.feed_policy``) of the candidates = that submolt's merged hot and new lists
   of the tick's feed view (deduplicated by post id), ``feed_size`` of them; the "new" list stays. Scope:
   the given ``submolts``, or a ``share`` of agents (``in_share``), or everyone; with several policies the
   first whose scope holds wins. The viewer is (agent, acting tick, society seed). ``following`` uses an
   *implicit-follow* variant: simulated agents emit no ``agent_followed``, so an agent follows the authors
   of the posts in the view whose recent comments include one of its own. ``personalised``: the agent's
   profile is ``profile_vector`` of the embeddings of its own texts visible in the view (its posts' title
   and excerpt, its comments' excerpts); no such text: the policy's hot fallback;
4. **moderation**: every post and comment a brain writes is checked (``agents.moderation.Moderator``); a
   text that breaks a rule is followed by a ``content_removed`` (same shard and tick, time 1 µs later,
   capped inside the tick). The near-duplicate memory of a shard's tick is the texts visible in the tick's
   feed view plus the shard's earlier texts of the same tick (its injections included): what a restarted
   worker sees again, so a redone tick removes the same content with the same event ids;
5. **injection** (shard 0, tick ``fork_tick + at``): the given post, or comment (on ``reply_to``, else on
   the top hot post of the submolt in the view), by ``author`` or by a new agent ``injected-<k>`` (``k``
   the intervention's index), registered first by an ``agents_joined`` (the stream processor needs no
   registration, but the warehouse and reports then know the agent). ``probes`` injections are expanded
   into title and content by the runner; one left in a plan is skipped with a warning;
6. **behaviour**: the stochastic agents in an intervention's share (``in_share`` salted with its index, so
   two shares are different agents; the first intervention holding an agent wins) run a ``StochasticBrain``
   of the overridden ``agents.behaviour.Behaviour``, their rates multiplied by ``rate_scale`` (capped at 1);
   LLM agents in the share get its ``model`` / ``temperature`` (``LLMBrain.tuning``).

The worker's own events (1, 5, 4's removals) are not a brain's: they skip the actor check brains' events
get. Their ids come from ``uuid7`` with generators seeded from (seed, tick[, shard], a constant) and their
times are fixed instants of the tick, so a restarted worker regenerates the same events (dropped
downstream as duplicates). Without a plan the worker never builds an ``ArmRuntime``: the control path
draws exactly what it drew before.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import overload
from uuid import UUID

import numpy as np
import numpy.typing as npt

from molt_society.agents.actions import comment_created, post_created
from molt_society.agents.behaviour import Behaviour
from molt_society.agents.brain import Brain, FeedView, TickContext
from molt_society.agents.llm_brain import AgentTuning
from molt_society.agents.moderation import Moderator
from molt_society.agents.roster import AgentSpec, Cohort, Roster, agent_id
from molt_society.agents.stochastic import StochasticBrain
from molt_society.algorithms import feed_policy as fp
from molt_society.runtime.logs import get_logger
from molt_society.schemas.arm_plan import ArmPlan
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import (
    AgentBanned,
    AgentBannedBody,
    AgentsJoined,
    AgentsJoinedBody,
    CommentCreated,
    ContentRemoved,
    ContentRemovedBody,
    Event,
    InterventionApplied,
    InterventionAppliedBody,
    JoinedAgent,
    PostCreated,
)
from molt_society.schemas.experiment import Behaviour as BehaviourOverride
from molt_society.schemas.experiment import FeedPolicy as FeedPolicyRule
from molt_society.schemas.experiment import Inject, Intervention, NearDuplicates, SpamScore, Terms
from molt_society.schemas.ids import uuid7

log = get_logger(__name__)

EXPERIMENT_ACTOR = "experiment"
MODERATOR_ACTOR = "moderator"
OWN_STREAM = 0x1F0E_A77
"""Salt of the generator of the worker's own events of a tick (records, injections)."""
REMOVAL_STREAM = 0x2E40_7ED
"""Salt of the generator of a shard's ``content_removed`` events of a tick."""
STOCHASTIC_OVERRIDES = (
    "rate_scale",
    "post_weight",
    "comment_weight",
    "vote_weight",
    "hot_share",
    "reply_prob",
)

Embed = Callable[[Sequence[str]], fp.FloatMatrix]


def in_share(agent: str, share: float, salt: int | None = None) -> bool:
    """True when ``agent`` is in a ``share`` of the agents: ``agent_key(agent) / 2**64 < share``, the key of
    ``"<agent>#<salt>"`` when salted (the same rule in every process)."""
    key = fp.agent_key(agent if salt is None else f"{agent}#{salt}")
    return key / 2**64 < share


def scope(iv: Intervention) -> str:
    """Who an intervention applies to, as ``intervention_applied.scope`` says it."""
    if isinstance(iv, FeedPolicyRule) and iv.submolts is not None:
        return "submolts:" + ",".join(iv.submolts)
    if isinstance(iv, FeedPolicyRule | BehaviourOverride) and iv.share is not None:
        return f"share:{iv.share:g}"
    if isinstance(iv, Inject):
        return f"submolts:{iv.submolt}"
    return "all"


def seeded(*parts: int) -> random.Random:
    """A ``random.Random`` seeded from integers (via numpy's SeedSequence: the same in every process)."""
    entropy = [p & (2**64 - 1) for p in parts]
    return random.Random(int(np.random.default_rng(entropy).integers(2**63)))


@dataclass
class _Own:
    """The worker's own events of one tick: their generator and the next instant (start + 1 µs each)."""

    society: str
    rng: random.Random
    start: datetime
    events: list[Event] = field(default_factory=list)

    def at(self) -> datetime:
        return self.start + timedelta(microseconds=len(self.events))

    def uid(self, at: datetime) -> UUID:
        return uuid7(at, self.rng)


def fork_records(plan: ArmPlan, own: _Own) -> None:
    """The fork tick's records: one event per intervention, ban and removal of the plan (into ``own``)."""
    for iv in plan.interventions:
        at = own.at()
        applied = InterventionAppliedBody(
            experiment=plan.experiment,
            arm=plan.arm,
            kind=iv.kind,
            params=iv.model_dump_json(),
            scope=scope(iv),
        )
        own.events.append(
            InterventionApplied(
                event_id=own.uid(at),
                society=own.society,
                actor=EXPERIMENT_ACTOR,
                occurred_at=at,
                body=applied,
            )
        )
    for ban in plan.bans:
        at = own.at()
        banned = AgentBannedBody(agent_id=ban.agent_id, rule=ban.rule, reason=ban.reason)
        own.events.append(
            AgentBanned(
                event_id=own.uid(at), society=own.society, actor=MODERATOR_ACTOR, occurred_at=at, body=banned
            )
        )
    for rm in plan.removals:
        at = own.at()
        removed = ContentRemovedBody(
            target_type=rm.target_type,
            target_id=rm.target_id,
            post_id=rm.post_id,
            rule=rm.rule,
            reason=rm.reason,
        )
        own.events.append(
            ContentRemoved(
                event_id=own.uid(at),
                society=own.society,
                actor=MODERATOR_ACTOR,
                occurred_at=at,
                causation_id=rm.target_id,
                body=removed,
            )
        )


def injected_author(k: int) -> str:
    """The new agent of the ``k``-th intervention of a plan (an injection with ``new_author``)."""
    return f"injected-{k}"


def inject(k: int, iv: Inject, feed: FeedView, own: _Own) -> None:
    """The post or comment of injection ``k`` (into ``own``), preceded by the new author's registration."""
    if iv.probes is not None or iv.content is None:
        log.warning("interventions.inject_probes_skipped", index=k, probes=iv.probes)
        return
    post_id = iv.reply_to
    if iv.item == "comment" and post_id is None:
        hot = feed.lists(iv.submolt)["hot"]
        if not hot:
            log.warning("interventions.inject_no_post", index=k, submolt=iv.submolt)
            return
        post_id = hot[0]["post_id"]
    author = iv.author if iv.author is not None else injected_author(k)
    if iv.author is None:
        at = own.at()
        member = JoinedAgent(agent_id=author, name=author, brain="injected", subscriptions=(iv.submolt,))
        own.events.append(
            AgentsJoined(
                event_id=own.uid(at),
                society=own.society,
                actor=author,
                occurred_at=at,
                body=AgentsJoinedBody(agents=(member,)),
            )
        )
    at = own.at()
    eid = uuid7(at, own.rng)
    if iv.item == "post":
        own.events.append(
            post_created(
                eid, own.society, author, at, submolt=iv.submolt, title=iv.title or "", content=iv.content
            )
        )
    else:
        assert post_id is not None
        own.events.append(
            comment_created(
                eid,
                own.society,
                author,
                at,
                post_id=post_id,
                parent_id=None,
                depth=1,
                content=iv.content,
                cause=post_id,
            )
        )


def content_text(ev: Event) -> str | None:
    """The text a moderation rule judges: a post's title and content, a comment's content; None otherwise."""
    if isinstance(ev, PostCreated):
        return f"{ev.body.title}\n{ev.body.content}"
    if isinstance(ev, CommentCreated):
        return ev.body.content
    return None


def unique_items(feed: FeedView) -> list[FeedItem]:
    """Every post of the view once (first seen, submolts in the view's order, hot before new)."""
    seen: dict[str, FeedItem] = {}
    for lists in feed.submolts.values():
        for name in ("hot", "new"):
            for item in lists.get(name, []):
                seen.setdefault(item["post_id"], item)
    return list(seen.values())


def view_texts(feed: FeedView) -> list[str]:
    """The texts visible in a feed view: each post's ``title\\nexcerpt`` and its recent comments' excerpts."""
    out: list[str] = []
    for item in unique_items(feed):
        out.append(f"{item['title']}\n{item.get('excerpt', '')}")
        out.extend(str(c[4]) for c in item["recent"] if len(c) > 4 and c[4])
    return out


def removal(
    ev: PostCreated | CommentCreated, hit: tuple[str, str], end: datetime, rng: random.Random
) -> Event:
    """The ``content_removed`` of a brain's post or comment: 1 µs after it, at most the tick's last µs."""
    at = min(ev.occurred_at + timedelta(microseconds=1), end - timedelta(microseconds=1))
    if isinstance(ev, PostCreated):
        target: tuple[str, str] = ("post", ev.body.post_id)
    else:
        target = ("comment", ev.body.comment_id)
    body = ContentRemovedBody(
        target_type="post" if target[0] == "post" else "comment",
        target_id=target[1],
        post_id=ev.body.post_id,
        rule=hit[0],
        reason=hit[1],
    )
    return ContentRemoved(
        event_id=uuid7(at, rng),
        society=ev.society,
        actor=MODERATOR_ACTOR,
        occurred_at=at,
        causation_id=target[1],
        body=body,
    )


# ---------------------------------------------------------------------------------------------- feed policy
class _PostVectors:
    """``feed_policy.Embeddings`` over the runtime's current post vectors (replaced every tick)."""

    def __init__(self, owner: FeedPolicies) -> None:
        self.owner = owner

    def get(self, post_id: str, /) -> fp.FloatVector | None:
        return self.owner.post_vectors.get(post_id)


class FeedPolicies:
    """The arm's ``feed_policy`` interventions: who each applies to and the policy object that ranks."""

    def __init__(
        self, rules: Iterable[FeedPolicyRule], *, seed: int, feed_size: int, embed: Embed | None
    ) -> None:
        self.seed = seed
        self.feed_size = feed_size
        self.embed: Embed = embed if embed is not None else fp.embed_texts
        self.post_vectors: dict[str, fp.FloatVector] = {}
        self.comment_vectors: dict[str, fp.FloatVector] = {}
        self.rules: list[tuple[FeedPolicyRule, fp.FeedPolicy]] = []
        for rule in rules:
            params = {"embeddings": _PostVectors(self)} if rule.policy == "personalised" else {}
            self.rules.append((rule, fp.policy(rule.policy, **params)))
        self.personalised = any(r.policy == "personalised" for r, _ in self.rules)

    def policy_for(self, agent: str, submolt: str) -> fp.FeedPolicy | None:
        """The policy ranking ``agent``'s hot list of ``submolt`` (the first whose scope holds), or None."""
        for rule, pol in self.rules:
            if rule.submolts is not None:
                if submolt in rule.submolts:
                    return pol
            elif rule.share is None or in_share(agent, rule.share):
                return pol
        return None

    def view(self, feed: FeedView, tick: int) -> FeedView:
        """The feed of acting tick ``tick`` as the policies show it (``feed`` itself without policies)."""
        if not self.rules:
            return feed
        if self.personalised:
            self._embed(feed)
        return PolicyFeedView(feed.tick, feed.submolts, policies=self, acting_tick=tick)

    def _embed(self, feed: FeedView) -> None:
        """Embed the view's posts and comment excerpts not embedded yet, in one batch; keep only the vectors
        of what the view shows (the memory stays the size of a feed)."""
        posts: dict[str, str] = {}
        comments: dict[str, str] = {}
        for item in unique_items(feed):
            posts[item["post_id"]] = fp.post_text(item)
            for c in item["recent"]:
                if len(c) > 4 and c[4]:
                    comments[str(c[0])] = str(c[4])
        todo_p = [p for p in posts if p not in self.post_vectors]
        todo_c = [c for c in comments if c not in self.comment_vectors]
        fresh: dict[tuple[str, str], fp.FloatVector] = {}
        if todo_p or todo_c:
            vectors = self.embed([posts[p] for p in todo_p] + [comments[c] for c in todo_c])
            fresh = {
                key: vectors[k]
                for k, key in enumerate([("p", p) for p in todo_p] + [("c", c) for c in todo_c])
            }
        self.post_vectors = {
            p: self.post_vectors[p] if p in self.post_vectors else fresh[("p", p)] for p in posts
        }
        self.comment_vectors = {
            c: self.comment_vectors[c] if c in self.comment_vectors else fresh[("c", c)] for c in comments
        }


@dataclass
class _Authorship:
    """Who wrote what in one view: posts by author, comments by author, and the implicit follows."""

    posts: dict[str, list[str]] = field(default_factory=dict)
    comments: dict[str, list[str]] = field(default_factory=dict)
    follows: dict[str, set[str]] = field(default_factory=dict)


def authorship(feed: FeedView) -> _Authorship:
    """The posts and comments (with an excerpt) of each author in the view, and per agent the authors of the
    posts it commented on (``recent`` comments: the implicit follows)."""
    out = _Authorship()
    for item in unique_items(feed):
        out.posts.setdefault(item["author"], []).append(item["post_id"])
        for c in item["recent"]:
            who = str(c[1])
            out.follows.setdefault(who, set()).add(item["author"])
            if len(c) > 4 and c[4]:
                out.comments.setdefault(who, []).append(str(c[0]))
    return out


@dataclass(frozen=True)
class PolicyFeedView(FeedView):
    """A feed view whose "hot" lists are ranked by the arm's feed policies for the agents in their scope."""

    policies: FeedPolicies = field(compare=False, kw_only=True)
    acting_tick: int = field(kw_only=True)
    _cache: dict[tuple[str, str], tuple[dict[str, list[FeedItem]], bool]] = field(
        default_factory=dict, compare=False, repr=False, kw_only=True
    )
    _who: list[_Authorship] = field(default_factory=list, compare=False, repr=False, kw_only=True)

    def lists_for(self, agent_id: str, submolt: str) -> dict[str, list[FeedItem]]:
        return self._ranked(agent_id, submolt)[0]

    def policy_ranked(self, agent_id: str, submolt: str) -> bool:
        return self._ranked(agent_id, submolt)[1]

    def _ranked(self, agent_id: str, submolt: str) -> tuple[dict[str, list[FeedItem]], bool]:
        key = (agent_id, submolt)
        found = self._cache.get(key)
        if found is None:
            base = self.lists(submolt)
            pol = self.policies.policy_for(agent_id, submolt)
            if pol is None:
                found = (base, False)
            else:
                candidates = list({i["post_id"]: i for i in base["hot"] + base["new"]}.values())
                hot = pol.rank(candidates, self.policies.feed_size, self.viewer(agent_id, pol))
                found = ({"new": base["new"], "hot": hot}, True)
            self._cache[key] = found
        return found

    def authorship(self) -> _Authorship:
        if not self._who:
            self._who.append(authorship(self))
        return self._who[0]

    def viewer(self, agent_id: str, pol: fp.FeedPolicy) -> fp.Viewer:
        """The viewer ``pol`` ranks for: follows only for ``following``, a profile for ``personalised``."""
        follows: frozenset[str] = frozenset()
        profile: fp.FloatVector | None = None
        if pol.name == "following":
            follows = frozenset(self.authorship().follows.get(agent_id, ()))
        elif pol.name == "personalised":
            who = self.authorship()
            vectors = [self.policies.post_vectors[p] for p in who.posts.get(agent_id, [])]
            vectors += [self.policies.comment_vectors[c] for c in who.comments.get(agent_id, [])]
            profile = fp.profile_vector(np.stack(vectors)) if vectors else None
        return fp.Viewer(agent_id, self.acting_tick, self.policies.seed, follows, profile)


# ---------------------------------------------------------------------------------------------- behaviour
class ScaledCohort(Cohort):
    """A cohort whose activity rates are multiplied by ``scale`` (capped at 1)."""

    def __init__(self, roster: Roster, indices: npt.NDArray[np.int64], scale: float) -> None:
        super().__init__(roster, indices)
        self.scale = scale

    @property
    def rates(self) -> npt.NDArray[np.float64]:
        return np.minimum(1.0, self.roster.rates[self.indices] * self.scale)

    @overload
    def __getitem__(self, k: int) -> AgentSpec: ...
    @overload
    def __getitem__(self, k: slice) -> Cohort: ...
    def __getitem__(self, k: int | slice) -> AgentSpec | Cohort:
        if isinstance(k, slice):
            return ScaledCohort(self.roster, self.indices[k], self.scale)
        spec = self.roster.spec(int(self.indices[k]))
        return replace(spec, rate=min(1.0, spec.rate * self.scale))

    def __iter__(self) -> Iterator[AgentSpec]:
        return (self[k] for k in range(len(self)))


def overridden(behaviour: Behaviour, iv: BehaviourOverride) -> Behaviour:
    """``behaviour`` with the stochastic parameters ``iv`` overrides (weights, hot_share, reply_prob)."""
    actions = {
        name: value
        for name, value in (
            ("post", iv.post_weight),
            ("comment", iv.comment_weight),
            ("vote", iv.vote_weight),
        )
        if value is not None
    }
    targets = {
        name: value
        for name, value in (("hot_share", iv.hot_share), ("reply_prob", iv.reply_prob))
        if value is not None
    }
    return behaviour.model_copy(
        update={
            "actions": behaviour.actions.model_copy(update=actions),
            "targets": behaviour.targets.model_copy(update=targets),
        }
    )


def _stochastic(iv: BehaviourOverride) -> bool:
    return any(getattr(iv, name) is not None for name in STOCHASTIC_OVERRIDES)


# ---------------------------------------------------------------------------------------------- the arm
class ArmRuntime:
    """One arm plan, applied by an agent worker (module docstring). ``embed``: the text embedding of the
    ``personalised`` policy (default ``feed_policy.embed_texts``; tests pass a cheap one)."""

    def __init__(
        self,
        plan: ArmPlan,
        *,
        seed: int,
        roster: Roster,
        behaviour: Behaviour,
        feed_size: int,
        embed: Embed | None = None,
    ) -> None:
        self.plan = plan
        self.seed = seed
        self.roster = roster
        ivs = plan.interventions
        self.feeds = FeedPolicies(
            (iv for iv in ivs if isinstance(iv, FeedPolicyRule)), seed=seed, feed_size=feed_size, embed=embed
        )
        self.rules = [iv for iv in ivs if isinstance(iv, SpamScore | NearDuplicates | Terms)]
        self.injections = [(k, iv) for k, iv in enumerate(ivs) if isinstance(iv, Inject)]
        self.behaviours = [(k, iv) for k, iv in enumerate(ivs) if isinstance(iv, BehaviourOverride)]
        self.override_brains = {
            k: StochasticBrain(overridden(behaviour, iv)) for k, iv in self.behaviours if _stochastic(iv)
        }
        self.banned = frozenset(b.agent_id for b in plan.bans)
        self._groups: dict[int, list[tuple[Brain, Cohort]]] = {}

    @property
    def embeds(self) -> bool:
        """True when building a tick's view embeds texts (worth running off the event loop)."""
        return self.feeds.personalised

    def active(self, tick: int) -> bool:
        return tick >= self.plan.fork_tick

    def own_events(self, shard: int, feed: FeedView, ctx: TickContext) -> list[Event]:
        """The worker's own events of shard ``shard``'s tick: the fork records and the injections due
        (shard 0 only)."""
        if shard != 0 or not self.active(ctx.tick):
            return []
        own = _Own(ctx.society, seeded(self.seed, ctx.tick, OWN_STREAM), ctx.start)
        if ctx.tick == self.plan.fork_tick:
            fork_records(self.plan, own)
        for k, iv in self.injections:
            if ctx.tick == self.plan.fork_tick + iv.at:
                inject(k, iv, feed, own)
        return own.events

    def view(self, feed: FeedView, tick: int) -> FeedView:
        """The feed the brains see in acting tick ``tick`` (the policies' view)."""
        return self.feeds.view(feed, tick)

    def tuning(self, agent: str) -> AgentTuning | None:
        """The model and temperature overrides of an LLM agent (the first behaviour share holding it)."""
        for k, iv in self.behaviours:
            if (iv.model is not None or iv.temperature is not None) and in_share(agent, iv.share, salt=k):
                return AgentTuning(iv.model, iv.temperature)
        return None

    def brains(
        self, shard: int, brains: Mapping[str, Brain], cohort: Callable[[int, str], Cohort]
    ) -> list[tuple[Brain, Cohort]]:
        """Each brain with the agents of ``shard`` it drives under the arm: the worker's brains without the
        stochastic agents an override takes, then one overridden stochastic brain per
        ``behaviour`` intervention with its share's agents (built once per shard)."""
        groups = self._groups.get(shard)
        if groups is None:
            groups = self._groups[shard] = self._build_groups(shard, brains, cohort)
        return groups

    def _build_groups(
        self, shard: int, brains: Mapping[str, Brain], cohort: Callable[[int, str], Cohort]
    ) -> list[tuple[Brain, Cohort]]:
        out: list[tuple[Brain, Cohort]] = []
        taken: dict[int, list[int]] = {k: [] for k in self.override_brains}
        for name, brain in brains.items():
            keep = cohort(shard, name).indices  # banned agents stay: their draws keep everyone else's
            if name == "stochastic" and self.override_brains:
                mask = np.ones(len(keep), dtype=bool)
                for pos, index in enumerate(keep.tolist()):
                    k = self._override_of(agent_id(index))
                    if k is not None:
                        taken[k].append(index)
                        mask[pos] = False
                keep = keep[mask]
            out.append((brain, Cohort(self.roster, keep)))
        for k, indices in taken.items():
            iv = next(b for j, b in self.behaviours if j == k)
            members = np.array(indices, dtype=np.int64)
            out.append((self.override_brains[k], ScaledCohort(self.roster, members, iv.rate_scale or 1.0)))
        return out

    def refused(self, ev: Event) -> bool:
        """A banned agent's action, which the platform refuses (``ArmRuntime.brains`` keeps banned agents in
        the cohorts, so every other agent draws the same random numbers as in the control: common random
        numbers stay common; only the banned agents' own events are dropped)."""
        return ev.actor in self.banned

    def _override_of(self, agent: str) -> int | None:
        """The first stochastic override whose share holds ``agent``."""
        for k, iv in self.behaviours:
            if k in self.override_brains and in_share(agent, iv.share, salt=k):
                return k
        return None

    def moderate(
        self,
        events: Sequence[Event],
        feed: FeedView,
        shard: int,
        ctx: TickContext,
        prior: Sequence[Event] = (),
    ) -> list[Event]:
        """``events`` (a brain's, of ``shard``'s tick), each post or comment breaking a rule followed by its
        ``content_removed``. The near-duplicate memory: ``feed``'s texts, ``prior`` (the shard's own events
        of the tick), then the events checked so far."""
        if not self.rules:
            return list(events)
        mod = Moderator(self.rules)
        for seen in view_texts(feed):
            mod.remember(seen)
        for ev in prior:
            if (own := content_text(ev)) is not None:
                mod.remember(own)
        rng = seeded(self.seed, shard, ctx.tick, REMOVAL_STREAM)
        end = ctx.start + timedelta(seconds=ctx.seconds)
        out: list[Event] = []
        for ev in events:
            out.append(ev)
            text = content_text(ev)
            if text is None:
                continue
            hit = mod.check(text)
            if hit is not None and isinstance(ev, PostCreated | CommentCreated):
                out.append(removal(ev, hit, end, rng))
        return out
