"""The order in which the aggregate agent computes windows, and the partials it must read back.

Windows are computed one after the other, from the society's first: a window's influence metrics compare
it with the window before (top-k churn, persisting super-nodes), and the agent remembers only the last
window it computed, ignoring any partial of a window at or before it. Computing a window as soon as its
partials were all there let a later window go first when a partial of an earlier one had not been taken:
the earlier window was then ignored for good (CI, stop 43: with two stream workers, a rebalance of the
aggregate's group, and window 00:10 of a 30-minute run never computed; Faust clears its stream buffer in a
rebalance and its fetcher does not always go back for what it cleared).

So the agent computes only the next window in order (``next_window``). A later window whose partials
are all there while the next one lacks some is a hole: every partition closes its windows in order, so
the partials the next window lacks were sent before and are on the partials topic; ``ReadBack`` says
which records of the topic, read backwards from the newest the agent took, fill the hole, and when the
reading can stop. The society's first window is checked the same way before it is computed (a first
window whose partials were all dropped would otherwise be taken for one that never existed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Next:
    """The window to compute next, or to wait for."""

    start_us: int
    missing: frozenset[int]  # partitions whose partial of it is not pending
    later_complete: int | None  # a later window whose partials are all pending

    @property
    def ready(self) -> bool:
        return not self.missing

    @property
    def hole(self) -> bool:
        """Partials of this window were dropped: a later window is complete without it."""
        return bool(self.missing) and self.later_complete is not None


def earliest_window(keys: Iterable[str]) -> int | None:
    """The earliest window with a pending partial, from the table's ``"<start>:<partition>"`` keys (needed
    only before the first window is computed: a scan of every key)."""
    return min((int(key.partition(":")[0]) for key in keys), default=None)


def next_window(
    last_us: int | None,
    window_us: int,
    partitions: int,
    has: Callable[[int, int], bool],
    *,
    earliest: int | None,
    recent: int | None,
) -> Next | None:
    """The window after ``last_us`` (``earliest``, the earliest pending one, before any was computed; None
    when there is none). ``has(start, partition)``: whether that partial is pending. ``recent``: the window
    of the partial just taken, the later window looked at for completeness (a window completes when its
    last partial is taken, so a hole shows then; O(partitions) per partial, never a scan of the table)."""
    start = earliest if last_us is None else last_us + window_us
    if start is None:
        return None
    every = range(partitions)
    missing = frozenset(q for q in every if not has(start, q))
    later = recent is not None and recent > start and all(has(recent, q) for q in every)
    return Next(start, missing, recent if later else None)


@dataclass
class ReadBack:
    """What to keep of the partials topic, read back in chunks from the newest record the agent took
    towards the topic's start: the partials of window ``start_us`` from ``missing`` partitions and, with
    ``earlier``, every partial of an earlier window (the first window's check).

    The partials of one partition are on the topic in window order (a rebuilt partition re-emits the
    windows it closed after its snapshot, in order), so once a chunk holds a partial of a missing partition
    for an earlier window, that partition's partial of ``start_us`` is in what was read: ``done`` is then
    true for it. With ``earlier`` the reading goes to the topic's start."""

    start_us: int
    missing: frozenset[int]
    earlier: bool = False
    unresolved: set[int] = field(init=False)

    def __post_init__(self) -> None:
        self.unresolved = set(self.missing)

    def keep(self, window_start_us: int, partition: int) -> bool:
        """Whether a partial read back fills what is missing (and note what it says of the rest)."""
        if window_start_us < self.start_us:
            self.unresolved.discard(partition)
            return self.earlier
        if window_start_us == self.start_us and partition in self.missing:
            self.unresolved.discard(partition)
            return True
        return False

    @property
    def done(self) -> bool:
        """Whether the chunks read so far hold everything there is to find (checked between chunks)."""
        return not self.earlier and not self.unresolved
