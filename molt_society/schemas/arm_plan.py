"""The plan of one arm x seed of an experiment: what its agent workers apply, from the fork tick on.

``society experiment`` writes one plan per arm x seed (``<state>/<society>/arm-plan.json``) and points the
society's processes at it (``Settings.arm_plan``). It holds the arm's interventions as the spec gives them,
plus what the experiment computed from the base at the fork, so every worker applies the same thing:
the agents a ``ban_top_pagerank`` rule bans, and the history's posts and comments a moderation rule removes.

The agent worker of shard 0 publishes, in the fork tick, one ``intervention_applied`` event per
intervention, one ``agent_banned`` per ban and one ``content_removed`` per removal (``agents.interventions``),
so the log records every intervention and replays and forks reproduce it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from molt_society.schemas.events import Id, Text
from molt_society.schemas.experiment import Intervention


class _Plan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Ban(_Plan):
    """An agent banned at the fork (it takes no action from the fork tick on)."""

    agent_id: Id
    rule: Annotated[Text, Field(min_length=1, max_length=100)]
    reason: Annotated[Text, Field(max_length=2000)] = ""


class Removal(_Plan):
    """A post or comment of the history removed at the fork (it leaves the feeds)."""

    target_type: Literal["post", "comment"]
    target_id: Id
    post_id: Id
    rule: Annotated[Text, Field(min_length=1, max_length=100)]
    reason: Annotated[Text, Field(max_length=2000)] = ""


class ArmPlan(_Plan):
    """One arm x seed: its experiment, arm and seed, its fork tick, interventions, bans and removals."""

    experiment: Id
    arm: Id
    seed: int
    fork_tick: Annotated[int, Field(ge=1)]
    fork_at_us: int
    interventions: list[Intervention] = Field(default_factory=list)
    bans: list[Ban] = Field(default_factory=list)
    removals: list[Removal] = Field(default_factory=list)


def load_plan(path: str | Path) -> ArmPlan:
    """The plan in ``path`` (JSON); pydantic's ``ValidationError`` names what is wrong."""
    return ArmPlan.model_validate_json(Path(path).read_text(encoding="utf-8"))


def write_plan(plan: ArmPlan, path: str | Path) -> Path:
    """Write ``plan`` to ``path`` as JSON (sorted keys: the same plan is the same bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(plan.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path
