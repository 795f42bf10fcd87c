"""The agents of a society, derived from the seed alone: ids, shards, activity, subscriptions.

Agent ``i`` lives on shard ``i % shards``. The shard count is a property of the society (it fixes the
random streams), not of the deployment: any number of agent workers share the shards through a consumer
group, so one worker or ten produce the same society.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from agents.behaviour import Behaviour
from agents.personas import persona


@dataclass(frozen=True, slots=True)
class AgentSpec:
    index: int
    agent_id: str
    name: str
    shard: int
    rate: float
    subscriptions: tuple[str, ...]
    brain: str = "stochastic"
    model: str | None = None  # the LLM of an LLM agent
    persona: str | None = None


def submolt_weights(behaviour: Behaviour) -> npt.NDArray[np.float64]:
    n = len(behaviour.submolts.names)
    w = np.arange(1, n + 1, dtype=float) ** -behaviour.submolts.zipf_exponent
    return w / w.sum()  # type: ignore[no-any-return]


def build_roster(
    seed: int,
    n_agents: int,
    shards: int,
    behaviour: Behaviour,
    *,
    llm_agents: int = 0,
    models: tuple[str, ...] = (),
) -> list[AgentSpec]:
    """Every agent of the society, deterministic in (seed, n_agents, shards, behaviour).

    Agents ``0 .. llm_agents - 1`` use the LLM brain (spread over every shard), agent ``k`` of them with
    ``models[k % len(models)]`` and persona ``k``; the others are stochastic. Choosing LLM agents changes
    no draw of the roster: every agent keeps its id, rate and subscriptions with or without them.
    """
    rng = np.random.default_rng([seed, 0x5EED])
    act = behaviour.activity
    weights = (1.0 - rng.random(n_agents)) ** (-1.0 / act.pareto_shape)
    rates = np.minimum(act.max_rate, act.base_rate * weights / weights.mean())
    names = behaviour.submolts.names
    sw = submolt_weights(behaviour)
    sub = behaviour.submolts
    out = []
    for i in range(n_agents):
        k = int(rng.integers(sub.subscriptions_min, min(sub.subscriptions_max, len(names)) + 1))
        chosen = rng.choice(len(names), size=k, replace=False, p=sw)
        subs = tuple(names[j] for j in sorted(chosen))
        spec = AgentSpec(i, f"agent-{i:06d}", f"molty_{i}", i % shards, float(rates[i]), subs)
        if i < llm_agents:
            spec = replace(spec, brain="llm", model=models[i % len(models)], persona=persona(i))
        out.append(spec)
    return out
