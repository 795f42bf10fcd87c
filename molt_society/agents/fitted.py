"""The fitted MoltBook model: the stochastic brain of a behaviour fitted to a real dump.

A behaviour with a ``[population]`` section (written by ``society calibrate --fit``) is run by this brain
instead of ``agents.stochastic``. Per tick and agent (``agents.roster.FittedColumns``), with ``h`` the
tick's length in hours and ``c`` the daily cycle's weight of the tick's hour (UTC, mean 1):

- an agent acts only once it has arrived (its ``join_s`` falls before the tick's end): newcomers arrive
  over the fitted period, so the active population grows;
- posts ~ Poisson(post_rate * h * c); a heartbeat agent instead posts once at each beat of its own period
  (skipping a beat with ``heartbeat_skip``), whatever the hour: the regular, "autonomous" posters;
- comments ~ Poisson(comment_rate * h * c), votes ~ Poisson(comment_rate * vote_per_comment * h * c):
  counts, not one draw, so the few agents that write a large share of the comments can write several in
  one tick;
- a comment or vote picks a submolt among the agent's subscriptions (the dump's popularity), then the
  "new" list with ``new_share`` (else "hot"), then a post with rank weights ``r ** -rank_exponent``; it
  replies to a comment of the thread with ``reply_prob`` (the newest with ``chain_prob``);
- an agent's further comments in one tick stay in the thread of its previous one with ``repeat_share``
  (agents that post several comments in one thread);
- a post's author answers each comment another agent left on it during the previous tick (as far as the
  feed's ``recent`` comments show) with ``return_share``: in MoltBook nine replies in ten are the post's
  author answering a commenter, and they are what makes the reply graph reciprocal;
- text comes from the text model fitted on the dump's texts (``agents.text_model``; a comment from the
  text it answers), or the bag of words when the behaviour names none.

Sub-tick timing. Agents act on the feed as of the end of the previous tick, so a comment always falls in
a later tick than its post. To keep the time from a post to its first comment what the dump shows
rather than up to one tick, a post is placed ``Exp(post_lead_seconds)`` before its tick's end and a
comment on a post without comments ``Exp(first_delay_seconds)`` after its tick's start (both within the
tick); other comments and votes fall uniformly in their tick. The hour, the day and every gap longer
than a tick are unchanged by this placement.

All randomness comes from the tick context's generator, as in every brain: the same seed gives the same
society whatever the number of workers.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np

from molt_society.agents.actions import comment_created, post_created, vote_cast
from molt_society.agents.behaviour import Behaviour
from molt_society.agents.brain import FeedView, TickContext
from molt_society.agents.genesis import genesis_events
from molt_society.agents.roster import AgentSpec, Cohort, agent_index
from molt_society.agents.stochastic import StochasticBrain, bag_of_words_text
from molt_society.agents.text_model import TextModel
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import Event
from molt_society.schemas.ids import uuid7

TITLE_CHARS = 300
"""A post's title is at most this long (the event contract's bound)."""


def tick_counts(
    cohort: Cohort, behaviour: Behaviour, ctx: TickContext
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Posts, comments and votes of each agent of ``cohort`` in this tick (see module docstring)."""
    pop = behaviour.population
    cols = cohort.roster.fitted
    if pop is None or cols is None:
        raise ValueError("tick_counts needs a fitted behaviour and a roster built from it")
    idx = cohort.indices
    t0 = ctx.tick * ctx.seconds
    t1 = t0 + ctx.seconds
    hour = int(((ctx.start.timestamp() + ctx.seconds / 2) // 3600) % 24)
    weights = np.asarray(pop.hourly, dtype=float)
    cycle = float(weights[hour] * 24 / max(weights.sum(), 1e-12))
    scale = ctx.seconds / 3600 * cycle
    here = cols.join_s[idx] < t1
    beat = cols.beat_s[idx]
    posts = ctx.rng.poisson(np.where(beat > 0, 0.0, cols.post_rate[idx] * scale))
    safe = np.maximum(beat, 1.0)
    phase = cols.phase_s[idx]
    beats = (beat > 0) & (np.floor((t1 - phase) / safe) > np.floor((t0 - phase) / safe))
    beats &= ctx.rng.random(len(idx)) >= pop.heartbeat_skip
    comments = ctx.rng.poisson(cols.comment_rate[idx] * scale)
    votes = ctx.rng.poisson(cols.comment_rate[idx] * pop.vote_per_comment * scale)
    return (posts + beats) * here, comments * here, votes * here


class FittedBrain(StochasticBrain):
    """See module docstring. ``decide``, ``decide_now`` and the choice of a submolt are the classic brain's;
    what an agent does in a tick, and how, is this model's."""

    def __init__(self, behaviour: Behaviour, text: TextModel | None = None) -> None:
        if behaviour.population is None:
            raise ValueError("the fitted brain needs a behaviour with a [population] section")
        super().__init__(behaviour)
        self.pop = behaviour.population
        path = behaviour.text_model_path()
        self.text = text if text is not None else (TextModel.load(path) if path is not None else None)
        self._main = behaviour.submolts.names[0]

    def events(self, agents: Sequence[AgentSpec], feed: FeedView, ctx: TickContext) -> Iterator[Event]:
        py = random.Random(int(ctx.rng.integers(2**63)))
        if ctx.tick == 0:
            yield from genesis_events(agents, ctx, py)
            return
        if not isinstance(agents, Cohort):
            raise TypeError("the fitted brain acts on a roster's cohort (agents.roster.Cohort)")
        posts, comments, votes = tick_counts(agents, self.b, ctx)
        for k in np.flatnonzero(posts + comments + votes).tolist():
            agent = agents[k]
            for _ in range(int(posts[k])):
                yield self._write_post(agent, ctx, py)
            last: FeedItem | None = None
            for _ in range(int(comments[k])):
                if last is None or py.random() >= self.pop.repeat_share:
                    last = self._pick(agent, feed, py)
                if last is not None:
                    yield self._write_comment(agent, last, ctx, py)
            for _ in range(int(votes[k])):
                if (item := self._pick(agent, feed, py)) is not None:
                    yield self._cast_vote(agent, item, ctx, py)
        if self.pop.return_share > 0:
            for author, item, comment in self._answers(agents, feed, ctx):
                if py.random() < self.pop.return_share:
                    yield self._write_comment(author, item, ctx, py, parent=comment)

    # ------------------------------------------------------------------ pieces
    def _at(self, ctx: TickContext, py: random.Random, kind: Literal["early", "late", "any"]) -> datetime:
        span = max(1, int(ctx.seconds * 1_000_000))
        if kind == "any":
            us = py.randrange(span)
        else:
            mean = self.pop.post_lead_seconds if kind == "late" else self.pop.first_delay_seconds
            off = min(span - 1, int(py.expovariate(1.0 / mean) * 1_000_000)) if mean > 0 else 0
            us = span - 1 - off if kind == "late" else off
        return ctx.start + timedelta(microseconds=us)

    def _write_post(self, agent: AgentSpec, ctx: TickContext, py: random.Random) -> Event:
        at = self._at(ctx, py, "late")
        submolt = self._submolt(agent, py)
        if self.text is not None:
            title, content = self.text.post(py, submolt)
            title = title[:TITLE_CHARS]
        else:
            title, content = bag_of_words_text(py, 3, 8), bag_of_words_text(py, 8, 40)
        return post_created(
            uuid7(at, py), ctx.society, agent.agent_id, at, submolt=submolt, title=title, content=content
        )

    def _pick(self, agent: AgentSpec, feed: FeedView, py: random.Random) -> FeedItem | None:
        first, second = ("new", "hot") if py.random() < self.pop.new_share else ("hot", "new")
        for sub in (self._submolt(agent, py), self._main):
            lists = feed.lists_for(agent.agent_id, sub)
            if items := lists[first] or lists[second]:
                return py.choices(items, cum_weights=self._rank_cum[: len(items)])[0]
        return None

    def _answers(
        self, cohort: Cohort, feed: FeedView, ctx: TickContext
    ) -> Iterator[tuple[AgentSpec, FeedItem, list[Any]]]:
        """Comments other agents left during the previous tick on posts of this cohort's agents, in feed
        order, each with its post and the post's author: what the author may answer."""
        since_us = int((ctx.start.timestamp() - ctx.seconds) * 1_000_000)
        seen: set[str] = set()
        for lists in feed.submolts.values():
            for items in lists.values():
                for item in items:
                    if item["post_id"] in seen:
                        continue
                    seen.add(item["post_id"])
                    index = agent_index(item["author"])
                    if index is None or not cohort.holds(index):
                        continue
                    fresh = [c for c in item["recent"] if c[1] != item["author"] and int(c[3]) >= since_us]
                    if fresh:
                        author = cohort.roster.spec(index)
                        yield from ((author, item, c) for c in fresh)

    def _write_comment(
        self,
        agent: AgentSpec,
        item: FeedItem,
        ctx: TickContext,
        py: random.Random,
        parent: list[Any] | None = None,
    ) -> Event:
        t = self.b.targets
        recent = item["recent"]
        parent_id: str | None = None
        depth = 1
        cause = item["post_id"]
        answered = f"{item['title']}\n{item.get('excerpt', '')}"
        if parent is None and recent and py.random() < t.reply_prob:
            parent = recent[-1] if py.random() < t.chain_prob else py.choice(recent)
        if parent is not None:
            parent_id, depth, cause = parent[0], int(parent[2]) + 1, parent[0]
            answered = str(parent[4]) if len(parent) > 4 else ""
        at = self._at(ctx, py, "early" if item["comments"] == 0 else "any")
        content = self.text.comment(py, answered) if self.text is not None else bag_of_words_text(py, 4, 30)
        return comment_created(
            uuid7(at, py),
            ctx.society,
            agent.agent_id,
            at,
            post_id=item["post_id"],
            parent_id=parent_id,
            depth=depth,
            content=content,
            cause=cause,
        )

    def _cast_vote(self, agent: AgentSpec, item: FeedItem, ctx: TickContext, py: random.Random) -> Event:
        t = self.b.targets
        value: Literal[1, -1] = 1 if py.random() < t.upvote_prob else -1
        recent = item["recent"]
        target_type: Literal["post", "comment"] = "post"
        target_id = item["post_id"]
        if recent and py.random() < t.comment_vote_prob:
            target_type, target_id = "comment", str(py.choice(recent)[0])
        at = self._at(ctx, py, "any")
        return vote_cast(
            uuid7(at, py),
            ctx.society,
            agent.agent_id,
            at,
            post_id=item["post_id"],
            target_type=target_type,
            target_id=target_id,
            value=value,
        )


def stochastic_brain(behaviour: Behaviour) -> FittedBrain | StochasticBrain:
    """The brain of a behaviour's stochastic agents: the fitted model when it has a population."""
    return FittedBrain(behaviour) if behaviour.population is not None else StochasticBrain(behaviour)
