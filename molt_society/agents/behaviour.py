"""Parameters of the stochastic behaviour model, read from a TOML file (``behaviour.toml`` by default)."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from molt_society.runtime.settings import FEED_SIZE_MAX


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Activity(_Section):
    pareto_shape: float = Field(gt=0.5)
    base_rate: float = Field(gt=0, le=1)
    max_rate: float = Field(gt=0, le=1)


class Actions(_Section):
    post: float = Field(ge=0)
    comment: float = Field(ge=0)
    vote: float = Field(ge=0)


class Targets(_Section):
    hot_share: float = Field(ge=0, le=1)
    rank_exponent: float = Field(ge=0)
    reply_prob: float = Field(ge=0, le=1)
    chain_prob: float = Field(ge=0, le=1)
    upvote_prob: float = Field(ge=0, le=1)
    comment_vote_prob: float = Field(ge=0, le=1)


class Submolts(_Section):
    names: list[str] = Field(min_length=1)
    zipf_exponent: float = Field(ge=0)
    weights: list[float] | None = Field(
        default=None, description="popularity of each submolt (a fitted behaviour's); else Zipf"
    )
    subscriptions_min: int = Field(ge=1)
    subscriptions_max: int = Field(ge=1)


class Population(_Section):
    """The fitted MoltBook model's agents (``agents.fitted``): rates per agent and per hour of simulated
    time, so a fitted behaviour holds at any population and tick length."""

    agents: int = Field(ge=1, description="the fitted population (the dump's distinct authors)")
    hours: float = Field(gt=0, description="the fitted period, in hours")
    start: str = Field(description="the fitted period's first instant (ISO 8601)")
    tick_seconds: float = Field(default=300.0, gt=0)
    post_per_hour: float = Field(ge=0, description="mean posts per agent and hour")
    post_sigma: float = Field(ge=0, le=6, description="lognormal sigma of an agent's post rate")
    comment_per_hour: float = Field(ge=0, description="mean comments per agent and hour")
    comment_sigma: float = Field(ge=0, le=6, description="lognormal sigma of an agent's comment rate")
    rate_correlation: float = Field(
        default=0.0, ge=-0.99, le=0.99, description="correlation of an agent's log post and comment rates"
    )
    vote_per_comment: float = Field(ge=0, description="votes an agent casts per comment it writes")
    heartbeat_share: float = Field(ge=0, le=1, description="agents that post on a schedule")
    heartbeat_hours: float = Field(gt=0, description="median period of a heartbeat agent")
    heartbeat_skip: float = Field(ge=0, lt=1, description="chance a heartbeat agent skips a beat")
    initial_share: float = Field(ge=0, le=1, description="agents present at the start")
    growth_per_day: float = Field(ge=-5, le=10, description="log growth of newcomers' arrivals per day")
    hourly: list[float] = Field(min_length=24, max_length=24, description="activity by hour of day (UTC)")
    new_share: float = Field(ge=0, le=1, description="comments and votes picked from the 'new' list")
    repeat_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="an agent's further comment in a tick goes to the thread of its previous one",
    )
    return_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="comments an author writes as a reply to a comment on one of its own posts in the feed",
    )
    feed_size: int | None = Field(
        default=None,
        ge=1,
        le=FEED_SIZE_MAX,
        description="posts per submolt in each feed list at the fitted population and tick"
        " (SOCIETY_FEED_SIZE), enough for the busiest ticks; scaled with both (feed_size_for)",
    )
    post_lead_seconds: float = Field(
        ge=0, description="mean seconds before its tick's end a post is placed (sub-tick timing)"
    )
    first_delay_seconds: float = Field(
        ge=0, description="mean seconds after its tick's start the first comment of a thread is placed"
    )

    def feed_size_for(self, agents: int, tick_seconds: float) -> int | None:
        """The feed size of a society of ``agents`` with ticks of ``tick_seconds``: the fitted one, scaled by
        the posts a tick brings (proportional to both), so that a feed list spans the same stretch of
        simulated time and a post gets the same attention at any size (at most ``FEED_SIZE_MAX``)."""
        if self.feed_size is None:
            return None
        scale = agents / self.agents * tick_seconds / self.tick_seconds
        return max(1, min(FEED_SIZE_MAX, round(self.feed_size * scale)))


class TextSource(_Section):
    model: str = Field(description="the fitted text model (agents.text_model), relative to this file")


class Behaviour(_Section):
    activity: Activity
    actions: Actions
    targets: Targets
    submolts: Submolts
    population: Population | None = None
    text: TextSource | None = None
    fit: dict[str, Any] | None = Field(
        default=None, description="the fit's record: the dump, its moments, the fitted society's, distances"
    )
    source: Path | None = Field(default=None, exclude=True, description="the file it was read from")

    def text_model_path(self) -> Path | None:
        """The text model's file, resolved against the behaviour file's folder."""
        if self.text is None:
            return None
        path = Path(self.text.model)
        return path if path.is_absolute() or self.source is None else self.source.parent / path


def load_behaviour(path: Path | None = None) -> Behaviour:
    """The behaviour parameters in ``path``, or the calibrated defaults shipped with the package."""
    if path is None:
        text = resources.files(__package__).joinpath("behaviour.toml").read_text()
        return Behaviour.model_validate(tomllib.loads(text))
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"behaviour file {path}: {exc}") from None
    return Behaviour.model_validate(doc).model_copy(update={"source": path.resolve()})
