"""The state of one events partition: validation, the thread registry, feeds and event-time windows.

One ``PartitionState`` exists per partition a stream worker owns. It is pure (no I/O): the processor feeds
it records and ships what it returns. Because it depends only on the records of its partition, in order,
it can be rebuilt at any time by replaying the partition's accepted events (``rebuild=True``), which is
how a worker that takes over a partition recovers: from the log, not from a snapshot.

Contract:

- ``accept_action`` returns ``Accepted`` (publish the bytes to the events topic), ``Duplicate`` (an event id
  seen before: a redelivery; publish nothing) or ``Rejected`` (dead-letter it with the reason).
- State is kept per thread (post) and per open window, never per event ever seen outside its thread.
- Metric windows close on watermarks (``apply_watermark``), so a replay closes them exactly where the live
  run did. Window statistics of threads are those of the events accepted when the window closes; with
  in-order producers (the simulation barrier, replay) that is exactly the state at the window's end.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from schemas.control import FeedItem, FeedSnapshot, Watermark, WindowPartial, to_us
from schemas.events import (
    AgentFollowedBody,
    AgentRegisteredBody,
    AgentSubscribedBody,
    CommentCreatedBody,
    ModelCalledBody,
    PostCreatedBody,
    SubmoltCreatedBody,
    VoteCastBody,
    VoteTalliedBody,
)
from schemas.wire import InvalidEvent, decode_event
from streams.feeds import HOT_WINDOW, hot_score, rank_hot, rank_new

RECENT_COMMENTS = 8
# what a feed item carries of the texts, so that agents read what they answer (characters)
POST_EXCERPT = 200
COMMENT_EXCERPT = 120


@dataclass(slots=True)
class Thread:
    post_id: str
    submolt: str
    author: str
    title: str
    created_us: int
    score: int = 0
    comments: dict[str, tuple[str, int]] = field(default_factory=dict)  # comment id -> (author, depth)
    participants: set[str] = field(default_factory=set)
    max_depth: int = 0
    event_ids: set[str] = field(default_factory=set)
    recent: list[list[Any]] = field(default_factory=list)  # [comment id, author, depth, occurred_us, text]
    excerpt: str = ""  # the start of the post's content
    last_us: int = 0  # event time of the thread's newest event
    cached_item: FeedItem | None = None  # the feed item, rebuilt only after the thread changed

    def item(self) -> FeedItem:
        if self.cached_item is None:
            self.cached_item = self._build_item()
        return self.cached_item

    def _build_item(self) -> FeedItem:
        return {
            "post_id": self.post_id,
            "author": self.author,
            "submolt": self.submolt,
            "title": self.title,
            "created_us": self.created_us,
            "score": self.score,
            "comments": len(self.comments),
            "hot": hot_score(self.score, self.created_us),
            "recent": list(self.recent),
            "excerpt": self.excerpt,
        }


@dataclass(frozen=True, slots=True)
class Accepted:
    event_id: str
    event_type: str
    occurred_us: int
    late: bool


@dataclass(frozen=True, slots=True)
class Duplicate:
    event_id: str


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: str
    code: str


Outcome = Accepted | Duplicate | Rejected


@dataclass(slots=True)
class WindowAcc:
    """What one partition saw of one event-time window."""

    counts: Counter[str] = field(default_factory=Counter)
    active: set[str] = field(default_factory=set)
    edges: Counter[tuple[str, str]] = field(default_factory=Counter)
    touched: set[str] = field(default_factory=set)


class PartitionState:
    """Validation and derived state of one partition (see module docstring)."""

    def __init__(
        self,
        partition: int,
        partitions: int,
        *,
        window_us: int,
        feed_size: int,
        max_event_bytes: int,
        max_future_us: int,
        thread_ttl_us: int | None = None,
    ) -> None:
        self.partition = partition
        self.partitions = partitions
        self.window_us = window_us
        self.feed_size = feed_size
        self.max_event_bytes = max_event_bytes
        self.max_future_us = max_future_us
        self.threads: dict[str, Thread] = {}
        # Threads idle for thread_ttl_us of event time are archived: their details are dropped (the
        # histograms keep counting them) and later events in them are dead-lettered as archived.
        self.thread_ttl_us = thread_ttl_us
        self.archived: set[str] = set()
        self._last_archive_us = -(2**62)
        # per submolt the HOT_WINDOW newest posts as (created_us, post_id), sorted: order-independent
        self.submolt_posts: dict[str, list[tuple[int, str]]] = {}
        # event ids of non-thread events: registrations, subscriptions, follows (per agent, not per thread)
        self.other_ids: set[str] = set()
        self.windows: dict[int, WindowAcc] = {}
        self.next_close_us: int | None = None  # start of the oldest window not yet closed
        self.producer_marks: dict[str, Watermark] = {}
        self.producers: frozenset[str] = frozenset()
        self.last_feed_tick = -1
        self.dirty_submolts: set[str] = set()
        self._feed_cache: dict[str, dict[str, list[FeedItem]]] = {}
        # cumulative thread histograms, kept incrementally
        self.size_hist: Counter[int] = Counter()
        self.participants_hist: Counter[int] = Counter()
        self.depth_hist: Counter[int] = Counter()
        self.accepted = 0
        self.rejected = 0
        self.duplicates = 0
        self.late = 0

    # ------------------------------------------------------------------ events
    def accept_action(self, raw: bytes | None, now_us: int) -> Outcome:
        """Validate one record and, when valid and new, apply it."""
        try:
            ev = decode_event(raw, max_bytes=self.max_event_bytes)
        except InvalidEvent as exc:
            self.rejected += 1
            return Rejected(exc.reason, exc.code)
        occurred = to_us(ev.occurred_at)
        if occurred > now_us + self.max_future_us:
            self.rejected += 1
            ahead = (occurred - now_us) / 1e6
            return Rejected(
                f"event time {ev.occurred_at.isoformat()} is {ahead:,.0f} s in the future "
                f"(limit {self.max_future_us / 1e6:,.0f} s)",
                "future_event_time",
            )
        eid = str(ev.event_id)
        body = ev.body
        actor = ev.actor
        touched: str | None = None
        edge: tuple[str, str] | None = None
        if isinstance(body, PostCreatedBody):
            existing = self.threads.get(body.post_id)
            if existing is not None or body.post_id in self.archived:
                if existing is None:
                    self.rejected += 1
                    return Rejected(f"post {body.post_id} already exists (archived)", "duplicate_post_id")
                if eid in existing.event_ids:
                    return self._dup(eid)
                self.rejected += 1
                return Rejected(f"post {body.post_id} already exists", "duplicate_post_id")
            t = Thread(
                body.post_id,
                body.submolt,
                actor,
                body.title[:200],
                occurred,
                last_us=occurred,
                excerpt=body.content[:POST_EXCERPT],
            )
            t.event_ids.add(eid)  # every event id of the thread, so a redelivery is recognised
            self.threads[body.post_id] = t
            newest = self.submolt_posts.setdefault(body.submolt, [])
            bisect.insort(newest, (occurred, body.post_id))
            if len(newest) > HOT_WINDOW:
                del newest[0]
            self.dirty_submolts.add(body.submolt)
            self.size_hist[0] += 1
            self.participants_hist[0] += 1
            self.depth_hist[0] += 1
            touched = body.post_id
        elif isinstance(body, CommentCreatedBody):
            thread = self.threads.get(body.post_id)
            if thread is None:
                return self._missing_thread("comment on", body.post_id)
            t = thread
            if self._idle_too_long(t, occurred):
                return self._missing_thread("event in", body.post_id)
            if body.comment_id in t.comments:
                if eid in t.event_ids:
                    return self._dup(eid)
                self.rejected += 1
                return Rejected(f"comment {body.comment_id} already exists", "duplicate_comment_id")
            parent_author: str | None
            if body.parent_unknown:  # imported: the source gives the depth, not the parent
                parent_author, parent_depth = None, body.depth - 1
            elif body.parent_id is None:
                parent_author, parent_depth = t.author, 0
            else:
                parent = t.comments.get(body.parent_id)
                if parent is None:
                    self.rejected += 1
                    return Rejected(
                        f"reply to comment {body.parent_id}, which does not exist in post {body.post_id}",
                        "unknown_parent",
                    )
                parent_author, parent_depth = parent
            if body.depth != parent_depth + 1:
                self.rejected += 1
                return Rejected(
                    f"depth {body.depth} does not match its parent (expected {parent_depth + 1})", "bad_depth"
                )
            t.event_ids.add(eid)
            t.last_us = max(t.last_us, occurred)
            old_size, old_part, old_depth = len(t.comments), len(t.participants), t.max_depth
            t.comments[body.comment_id] = (actor, body.depth)
            t.participants.add(actor)
            t.max_depth = max(t.max_depth, body.depth)
            # newest comments by (event time, id): the same whatever order the partition saw them in
            bisect.insort(
                t.recent,
                [body.comment_id, actor, body.depth, occurred, body.content[:COMMENT_EXCERPT]],
                key=lambda r: (r[3], r[0]),
            )
            if len(t.recent) > RECENT_COMMENTS:
                del t.recent[0]
            t.cached_item = None
            self._move(self.size_hist, old_size, len(t.comments))
            self._move(self.participants_hist, old_part, len(t.participants))
            self._move(self.depth_hist, old_depth, t.max_depth)
            self.dirty_submolts.add(t.submolt)
            touched = t.post_id
            if parent_author is not None and actor != parent_author:
                edge = (actor, parent_author)  # interaction graph: commenter -> replied-to author
        elif isinstance(body, VoteCastBody | VoteTalliedBody):
            # individual votes and imported vote counts: same thread checks, same effect on the score
            tally = isinstance(body, VoteTalliedBody)
            thread = self.threads.get(body.post_id)
            if thread is None:
                return self._missing_thread("vote tally in" if tally else "vote in", body.post_id)
            t = thread
            if self._idle_too_long(t, occurred):
                return self._missing_thread("event in", body.post_id)
            if body.target_type == "comment" and body.target_id not in t.comments:
                self.rejected += 1
                return Rejected(
                    f"{'vote tally of' if tally else 'vote on'} comment {body.target_id}, "
                    f"which does not exist in post {body.post_id}",
                    "unknown_target",
                )
            if not tally and body.target_type == "post" and body.target_id != body.post_id:
                self.rejected += 1
                return Rejected("a post vote's target_id must equal its post_id", "bad_target")
            if eid in t.event_ids:
                return self._dup(eid)
            t.event_ids.add(eid)
            delta: int
            if isinstance(body, VoteCastBody):
                t.last_us = max(t.last_us, occurred)
                delta = body.value
            else:
                delta = body.upvotes - body.downvotes
            if body.target_type == "post":
                t.score += delta
                t.cached_item = None
                self.dirty_submolts.add(t.submolt)
        else:
            if eid in self.other_ids:
                return self._dup(eid)
            self.other_ids.add(eid)
            assert isinstance(
                body,
                AgentRegisteredBody
                | SubmoltCreatedBody
                | AgentSubscribedBody
                | AgentFollowedBody
                | ModelCalledBody,
            )
            if isinstance(body, ModelCalledBody):  # a model call is data, not an action: no metric counts it
                self.accepted += 1
                return Accepted(eid, ev.type, occurred, False)
        acc = self._window_acc(occurred)
        if acc is None:
            self.late += 1  # stored, but its window's metrics were already emitted
        else:
            acc.counts[ev.type] += 1
            acc.active.add(actor)
            if touched is not None:
                acc.touched.add(touched)
            if edge is not None:
                acc.edges[edge] += 1
        self.accepted += 1
        return Accepted(eid, ev.type, occurred, acc is None)

    def _idle_too_long(self, t: Thread, occurred: int) -> bool:
        """An event more than the TTL after the thread's last one finds it archived, whether or not the
        thread's details were already reclaimed: the outcome depends on event times only."""
        if self.thread_ttl_us is None or occurred - t.last_us <= self.thread_ttl_us:
            return False
        self.archived.add(t.post_id)
        return True

    def _missing_thread(self, what: str, post_id: str) -> Rejected:
        self.rejected += 1
        if post_id in self.archived:
            return Rejected(
                f"{what} post {post_id}, which was archived after "
                f"{(self.thread_ttl_us or 0) / 1e6:,.0f} s of event time without activity",
                "thread_archived",
            )
        return Rejected(f"{what} post {post_id}, which does not exist", "unknown_post")

    def _dup(self, eid: str) -> Duplicate:
        self.duplicates += 1
        return Duplicate(eid)

    @staticmethod
    def _move(hist: Counter[int], old: int, new: int) -> None:
        if old != new:
            hist[old] -= 1
            if hist[old] == 0:
                del hist[old]
            hist[new] += 1

    def _window_start(self, occurred_us: int) -> int:
        return occurred_us - occurred_us % self.window_us

    def _window_acc(self, occurred_us: int) -> WindowAcc | None:
        """The accumulator of the event's window, or None when that window is already closed (late)."""
        start = self._window_start(occurred_us)
        if self.next_close_us is not None and start < self.next_close_us:
            return None
        acc = self.windows.get(start)
        if acc is None:
            acc = self.windows[start] = WindowAcc()
        return acc

    # -------------------------------------------------------------- watermarks
    def apply_watermark(
        self, mark: Watermark, origin_us: int | None
    ) -> tuple[list[WindowPartial], int | None]:
        """Record a producer's watermark; return the partials of windows it closes and a completed tick.

        The partition's watermark is the minimum over the producers the marks name. Windows whose end is
        at or before it close, in order, each as one partial (empty windows too, so the aggregator hears
        from every partition for every window). ``origin_us`` (the society's first instant) fixes where the
        first window starts. The second value is the newest tick that every producer has finished, when
        that advanced, else None.
        """
        if mark.get("handoff"):
            # the producer retires; its successors start from its watermark and tick
            self.producer_marks.pop(mark["producer"], None)
            self.producers = (self.producers - {mark["producer"]}) | frozenset(mark["producers"])
            for p in mark["producers"]:
                prev_p = self.producer_marks.get(p)
                if prev_p is None or mark["watermark_us"] >= prev_p["watermark_us"]:
                    self.producer_marks[p] = {**mark, "producer": p, "handoff": False}
        else:
            prev = self.producer_marks.get(mark["producer"])
            if prev is None or mark["watermark_us"] >= prev["watermark_us"]:
                self.producer_marks[mark["producer"]] = mark
            self.producers = self.producers | frozenset(mark["producers"])
        if any(p not in self.producer_marks for p in self.producers):
            return [], None
        marks = [self.producer_marks[p] for p in self.producers]
        wm = min(m["watermark_us"] for m in marks)
        tick = min(m["tick"] for m in marks)
        final = all(m.get("final", False) for m in marks)
        if self.next_close_us is None:
            first = origin_us if origin_us is not None else min(self.windows, default=wm)
            self.next_close_us = self._window_start(first)
        partials: list[WindowPartial] = []
        while self.next_close_us + self.window_us <= wm or (final and self.next_close_us < wm):
            partials.append(self._close(self.next_close_us))
            self.next_close_us += self.window_us
        if (
            partials
            and self.thread_ttl_us is not None
            and wm - self._last_archive_us >= self.thread_ttl_us // 8
        ):
            # Reclaim memory of threads idle for the TTL: no event can reach them any more (events are not
            # earlier than the watermark, and _idle_too_long rejects them), so when this scan runs changes
            # nothing but memory. It walks every thread, hence at most every eighth of the TTL.
            self._last_archive_us = wm
            self._archive_idle(wm - self.thread_ttl_us)
        completed = tick if tick > self.last_feed_tick else None
        if completed is not None:
            self.last_feed_tick = tick
        return partials, completed

    def _archive_idle(self, before_us: int) -> None:
        idle = [pid for pid, t in self.threads.items() if t.last_us < before_us]
        for pid in idle:
            del self.threads[pid]
            self.archived.add(pid)
        if idle:
            for submolt, newest in self.submolt_posts.items():
                kept = [(c, p) for c, p in newest if p in self.threads]
                if len(kept) != len(newest):
                    self.submolt_posts[submolt] = kept
                    self.dirty_submolts.add(submolt)

    def _close(self, start: int) -> WindowPartial:
        acc = self.windows.pop(start, None) or WindowAcc()
        touched = []
        for pid in sorted(acc.touched):
            t = self.threads.get(pid)
            if t is not None:
                touched.append([pid, len(t.comments), len(t.participants), t.max_depth])
        return {
            "window_start_us": start,
            "window_end_us": start + self.window_us,
            "partition": self.partition,
            "partitions": self.partitions,
            "counts": dict(sorted(acc.counts.items())),
            "active_agents": sorted(acc.active),
            "edges": [[s, d, w] for (s, d), w in sorted(acc.edges.items())],
            "size_hist": {str(k): v for k, v in sorted(self.size_hist.items())},
            "participants_hist": {str(k): v for k, v in sorted(self.participants_hist.items())},
            "depth_hist": {str(k): v for k, v in sorted(self.depth_hist.items())},
            "threads_touched": touched,
        }

    # ------------------------------------------------------------------- feeds
    def feed_snapshot(self, tick: int) -> FeedSnapshot:
        """This partition's top posts per submolt, new and hot, as of now (end of ``tick``)."""
        for submolt in self.dirty_submolts:
            items = [self.threads[p].item() for _, p in self.submolt_posts.get(submolt, ())]
            self._feed_cache[submolt] = {
                "new": rank_new(items, self.feed_size),
                "hot": rank_hot(items, self.feed_size),
            }
        self.dirty_submolts.clear()
        wm = min((m["watermark_us"] for m in self.producer_marks.values()), default=0)
        return {
            "tick": tick,
            "partition": self.partition,
            "watermark_us": wm,
            "submolts": dict(self._feed_cache),
        }
