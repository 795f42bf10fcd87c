"""What a waiting tick barrier waits for: which workers hold the work the missing feeds need.

The feed of tick ``t`` on partition ``p`` needs every agent shard to have acted on tick ``t`` (its actions
and watermark on ``p``) and the stream worker owning ``p`` to have processed them. Both groups commit what
they are done with, so their lags say who holds the tick up:

- the agent workers (group ``society.<name>.agents`` on the ticks topic, one record per shard and tick):
  the clock has published at most tick ``t + 1``, which waits for this very feed, so a shard with more
  than one tick uncommitted has not finished tick ``t``;
- the stream workers (group ``society.<name>.streams`` on the actions topic): actions of a missing
  partition not yet committed are not processed yet.

When neither holds anything, the feed was published and its reader did not get it (``FeedCache`` checks
and replaces such a reader by itself). The processes are named from the stack (role, index, pid).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from molt_society.runtime import kafka
from molt_society.runtime.lag import LagReader
from molt_society.schemas.topics import Role, topic_name


@dataclass
class Pending:
    """Per shard, ticks an agent worker has not finished (beyond the one waiting for this feed); per missing
    partition, actions a stream worker has not processed."""

    ticks: dict[int, int] = field(default_factory=dict)
    actions: dict[int, int] = field(default_factory=dict)


async def pending(lag: LagReader, society: str, missing: list[int]) -> Pending:
    """The groups' uncommitted work that the feeds of ``missing`` partitions wait for."""
    t_ticks, t_actions = topic_name(society, Role.TICKS), topic_name(society, Role.ACTIONS)
    hws = await lag.highwaters([t_ticks, t_actions], partial=True)
    ticks = {tp: hw for tp, hw in hws.items() if tp.topic == t_ticks}
    actions = {tp: hw for tp, hw in hws.items() if tp.topic == t_actions and tp.partition in missing}
    done_t = await lag.committed(kafka.group_id(society, "agents"), list(ticks))
    done_a = await lag.committed(kafka.group_id(society, "streams"), list(actions))
    out = Pending()
    for tp, hw in ticks.items():
        behind = hw - (done_t[tp] or 0) - 1
        if behind > 0:
            out.ticks[tp.partition] = behind
    for tp, hw in actions.items():
        left = hw - (done_a[tp] or 0)
        if left > 0:
            out.actions[tp.partition] = left
    return out


def _ranges(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in sorted(numbers))


def describe(p: Pending, workers: dict[str, list[str]]) -> str:
    """``p`` in words, naming the workers of each role (``{"agents": ["agent worker 0 (pid 12)"], ...}``)."""
    said: list[str] = []
    if p.ticks:
        who = " / ".join(workers.get("agents", [])) or "the agent workers"
        said.append(
            f"{who}: shard{'s' if len(p.ticks) > 1 else ''} {_ranges(list(p.ticks))} "
            f"{'have' if len(p.ticks) > 1 else 'has'} not finished "
            f"{sum(p.ticks.values())} tick{'s' if sum(p.ticks.values()) > 1 else ''}"
        )
    if p.actions:
        who = " / ".join(workers.get("streams", [])) or "the stream workers"
        n = sum(p.actions.values())
        said.append(
            f"{who}: {n:,} action{'s' if n > 1 else ''} of partition{'s' if len(p.actions) > 1 else ''} "
            f"{_ranges(list(p.actions))} not processed"
        )
    if not said:
        return "every worker is done with it: the feed was published and not read yet"
    return "waiting on " + "; ".join(said)
