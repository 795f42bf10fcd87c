"""The agents of a society, derived from the seed alone: ids, shards, activity, subscriptions.

Agent ``i`` lives on shard ``i % shards``. The shard count is a property of the society (it fixes the
random streams), not of the deployment: any number of agent workers share the shards through a consumer
group, so one worker or ten produce the same society.

The roster is columnar, sized for millions of agents: one activity rate (float64) and one subscription
bitmask (uint64, bit ``j`` = submolt ``j``) per agent, about 16 bytes each, so 2.6 million agents take
about 42 MB. An agent's id and name are functions of its index. ``AgentSpec`` objects exist only for the
agents a brain is looking at (``Cohort``, a lazy sequence over the agents of one shard).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import overload

import numpy as np
import numpy.typing as npt

from molt_society.agents.behaviour import Behaviour
from molt_society.agents.personas import persona

MAX_SUBMOLTS = 64
"""Subscriptions are a 64-bit mask per agent: a behaviour names at most 64 starting submolts."""
_CHUNK = 65_536  # agents drawn at once (bounds the temporary arrays of the roster build)


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


def agent_id(index: int) -> str:
    return f"agent-{index:06d}"


def agent_index(actor: str) -> int | None:
    """The index of a roster agent id (``agent-000042`` -> 42), None for any other id."""
    if not actor.startswith("agent-") or not actor[6:].isdigit():
        return None
    digits = actor[6:]
    if len(digits) < 6 or (len(digits) > 6 and digits[0] == "0"):
        return None  # not the canonical spelling of any index
    return int(digits)


def submolt_weights(behaviour: Behaviour) -> npt.NDArray[np.float64]:
    n = len(behaviour.submolts.names)
    given = behaviour.submolts.weights
    if given is not None and len(given) == n and sum(given) > 0:
        w = np.asarray(given, dtype=float)
    else:
        w = np.arange(1, n + 1, dtype=float) ** -behaviour.submolts.zipf_exponent
    return w / w.sum()  # type: ignore[no-any-return]


@dataclass(frozen=True, eq=False)
class FittedColumns:
    """The fitted MoltBook model's columns (``Behaviour.population``), one value per agent:
    post and comment rates per hour, the second of the period the agent arrives at, and a heartbeat
    agent's period and phase in seconds (period 0: not a heartbeat agent)."""

    post_rate: npt.NDArray[np.float64]
    comment_rate: npt.NDArray[np.float64]
    join_s: npt.NDArray[np.float64]
    beat_s: npt.NDArray[np.float64]
    phase_s: npt.NDArray[np.float64]

    def nbytes(self) -> int:
        cols = (self.post_rate, self.comment_rate, self.join_s, self.beat_s, self.phase_s)
        return sum(int(c.nbytes) for c in cols)


@dataclass(frozen=True, eq=False)
class Roster:
    """Every agent of the society as columns; see the module docstring."""

    shards: int
    submolts: tuple[str, ...]
    rates: npt.NDArray[np.float64]
    subscription_bits: npt.NDArray[np.uint64]
    llm_agents: int = 0
    models: tuple[str, ...] = ()
    fitted: FittedColumns | None = None
    _by_mask: dict[int, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.rates)

    def subscriptions(self, index: int) -> tuple[str, ...]:
        bits = int(self.subscription_bits[index])
        subs = self._by_mask.get(bits)  # a few hundred distinct sets among millions of agents
        if subs is None:
            subs = self._by_mask[bits] = tuple(name for j, name in enumerate(self.submolts) if bits >> j & 1)
        return subs

    def spec(self, index: int) -> AgentSpec:
        spec = AgentSpec(
            index,
            agent_id(index),
            f"molty_{index}",
            index % self.shards,
            float(self.rates[index]),
            self.subscriptions(index),
        )
        if index < self.llm_agents:
            spec = replace(
                spec, brain="llm", model=self.models[index % len(self.models)], persona=persona(index)
            )
        return spec

    def brain_of(self, index: int) -> str:
        return "llm" if index < self.llm_agents else "stochastic"

    def cohort(self, shard: int) -> Cohort:
        """The agents of ``shard``, in index order."""
        return Cohort(self, np.arange(shard, len(self), self.shards, dtype=np.int64))

    def __iter__(self) -> Iterator[AgentSpec]:
        return (self.spec(i) for i in range(len(self)))

    def __getitem__(self, k: int) -> AgentSpec:
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        return self.spec(k % len(self))

    def everyone(self) -> Cohort:
        """Every agent, in index order (a roster of one shard is that shard's cohort)."""
        return Cohort(self, np.arange(len(self), dtype=np.int64))

    def nbytes(self) -> int:
        extra = self.fitted.nbytes() if self.fitted is not None else 0
        return int(self.rates.nbytes + self.subscription_bits.nbytes) + extra


class Cohort(Sequence[AgentSpec]):
    """Some agents of a roster (one shard, or the part of it one brain drives), as a lazy sequence:
    ``cohort[k]`` builds the ``AgentSpec`` of its ``k``-th agent; ``rates`` is the column brains draw on."""

    def __init__(self, roster: Roster, indices: npt.NDArray[np.int64]) -> None:
        self.roster = roster
        self.indices = indices

    @property
    def rates(self) -> npt.NDArray[np.float64]:
        return self.roster.rates[self.indices]

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, k: int) -> AgentSpec: ...
    @overload
    def __getitem__(self, k: slice) -> Cohort: ...
    def __getitem__(self, k: int | slice) -> AgentSpec | Cohort:
        if isinstance(k, slice):
            return Cohort(self.roster, self.indices[k])
        return self.roster.spec(int(self.indices[k]))

    def __iter__(self) -> Iterator[AgentSpec]:
        return (self.roster.spec(int(i)) for i in self.indices)

    def of_brain(self, brain: str) -> Cohort:
        """The agents of this cohort that ``brain`` drives, in the same order."""
        llm = self.indices < self.roster.llm_agents
        return Cohort(self.roster, self.indices[llm if brain == "llm" else ~llm])

    def holds(self, index: int) -> bool:
        """True when the agent of ``index`` belongs to this cohort."""
        pos = int(np.searchsorted(self.indices, index))
        return pos < len(self.indices) and int(self.indices[pos]) == index


def build_roster(
    seed: int,
    n_agents: int,
    shards: int,
    behaviour: Behaviour,
    *,
    llm_agents: int = 0,
    models: tuple[str, ...] = (),
) -> Roster:
    """Every agent of the society, deterministic in (seed, n_agents, shards, behaviour).

    Agents ``0 .. llm_agents - 1`` use the LLM brain (spread over every shard), agent ``k`` of them with
    ``models[k % len(models)]`` and persona ``k``; the others are stochastic. Choosing LLM agents changes
    no draw of the roster: every agent keeps its id, rate and subscriptions with or without them.

    Subscriptions: agent ``i`` subscribes to ``k_i`` ~ uniform{min..max} submolts drawn without
    replacement with the submolts' Zipf weights (Efraimidis-Spirakis keys ``u ** (1 / w)``: the largest
    ``k_i`` keys are a weighted draw without replacement, the same law as successive sampling).
    """
    names = behaviour.submolts.names
    if len(names) > MAX_SUBMOLTS:
        raise ValueError(f"a behaviour names at most {MAX_SUBMOLTS} submolts, not {len(names)}")
    if llm_agents and not models:
        raise ValueError("LLM agents need at least one model name")
    rng = np.random.default_rng([seed, 0x5EED])
    act = behaviour.activity
    weights = (1.0 - rng.random(n_agents)) ** (-1.0 / act.pareto_shape)
    rates = np.minimum(act.max_rate, act.base_rate * weights / weights.mean())
    sub = behaviour.submolts
    w = submolt_weights(behaviour)
    hi = min(sub.subscriptions_max, len(names))
    bits = np.zeros(n_agents, dtype=np.uint64)
    place = np.left_shift(np.uint64(1), np.arange(len(names), dtype=np.uint64))
    for lo in range(0, n_agents, _CHUNK):
        m = min(_CHUNK, n_agents - lo)
        k = rng.integers(sub.subscriptions_min, hi + 1, size=m)
        keys = rng.random((m, len(names))) ** (1.0 / w)
        order = np.argsort(-keys, axis=1, kind="stable")
        chosen = np.arange(len(names))[None, :] < k[:, None]  # the first k_i of each row's order
        mask = np.zeros((m, len(names)), dtype=bool)
        np.put_along_axis(mask, order, chosen, axis=1)
        bits[lo : lo + m] = (mask * place).sum(axis=1, dtype=np.uint64)
    fitted = None
    if behaviour.population is not None:
        fitted = fitted_columns(seed, n_agents, behaviour)
        # an LLM agent of a fitted society wakes as often as it would act
        pop = behaviour.population
        per_tick = (fitted.post_rate + fitted.comment_rate * (1 + pop.vote_per_comment)) * (
            pop.tick_seconds / 3600
        )
        rates = np.minimum(1.0, per_tick)
    return Roster(shards, tuple(names), rates, bits, min(llm_agents, n_agents), models, fitted)


def fitted_columns(seed: int, n_agents: int, behaviour: Behaviour) -> FittedColumns:
    """The fitted model's columns, from their own random stream (the other columns draw as before).

    Rates are lognormal with the fitted means and sigmas (their logs correlated by ``rate_correlation``:
    the agents that comment most also post); a share ``initial_share`` of the agents is there
    from the start, the others arrive over the fitted period with a density growing as
    ``exp(growth_per_day * day)``; a share ``heartbeat_share`` posts on a schedule whose period is lognormal
    around ``heartbeat_hours`` (sigma 0.5), at a random phase.

    The comment rate, the post rate's own part and the arrival time are drawn together from a scrambled
    Sobol' sequence (randomised quasi-Monte Carlo), handed to the agents in a random order, and the rate
    quantiles are kept within the population's own ``[1/2n, 1 - 1/2n]``: a handful of heavy commenters
    write a large share of the comments (the top 1% write ~44% on MoltBook), and with independent draws
    which few agents are heavy, and when they arrive, moved that share by +-0.07 from seed to seed;
    spread evenly over the quantiles it moves by about half that (BENCHMARKS.md, "fit")."""
    pop = behaviour.population
    assert pop is not None
    rng = np.random.default_rng([seed, 0xF17ED])
    if n_agents == 0:
        empty = np.zeros(0)
        return FittedColumns(empty, empty, empty, empty, empty)

    def lognormal(mean: float, sigma: float, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return mean * np.exp(sigma * z - sigma * sigma / 2)

    from scipy.stats import norm, qmc  # here: 0.6 s of every agent worker's start, for fitted societies only

    sobol = qmc.Sobol(d=3, scramble=True, rng=rng)
    points = sobol.random_base2(max(0, int(n_agents - 1).bit_length()))[:n_agents]
    points = points[rng.permutation(n_agents)]
    edge = 0.5 / n_agents
    z_comment = norm.ppf(np.clip(points[:, 0], edge, 1 - edge))
    rho = pop.rate_correlation
    z_post = rho * z_comment + np.sqrt(1 - rho * rho) * norm.ppf(np.clip(points[:, 1], edge, 1 - edge))
    post = lognormal(pop.post_per_hour, pop.post_sigma, z_post)
    comment = lognormal(pop.comment_per_hour, pop.comment_sigma, z_comment)
    period = pop.hours * 3600
    # one uniform for the arrival: below initial_share the agent is there from the start
    share0 = pop.initial_share
    u = np.clip((points[:, 2] - share0) / max(1.0 - share0, 1e-12), 0.0, 1.0)
    g = pop.growth_per_day / 86400
    later = np.log1p(u * np.expm1(g * period)) / g if abs(g) > 1e-12 else u * period
    join = np.where(points[:, 2] < share0, 0.0, later)
    beat = np.where(
        rng.random(n_agents) < pop.heartbeat_share,
        pop.heartbeat_hours * 3600 * np.exp(0.5 * rng.standard_normal(n_agents)),
        0.0,
    )
    phase = rng.random(n_agents) * np.maximum(beat, 1.0)
    return FittedColumns(post, comment, join, beat, phase)
