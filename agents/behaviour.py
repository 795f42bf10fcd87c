"""Parameters of the stochastic behaviour model, read from a TOML file (``behaviour.toml`` by default)."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


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
    subscriptions_min: int = Field(ge=1)
    subscriptions_max: int = Field(ge=1)


class Behaviour(_Section):
    activity: Activity
    actions: Actions
    targets: Targets
    submolts: Submolts


def load_behaviour(path: Path | None = None) -> Behaviour:
    """The behaviour parameters in ``path``, or the calibrated defaults shipped with the package."""
    if path is None:
        text = resources.files(__package__).joinpath("behaviour.toml").read_text()
    else:
        text = Path(path).read_text()
    return Behaviour.model_validate(tomllib.loads(text))
