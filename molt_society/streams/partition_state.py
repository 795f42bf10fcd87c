"""The state of one events partition: validation, the thread registry, feeds and event-time windows.

Its parts, each in a module of its own: the accepted event ids (``streams.event_ids``), a thread
(``streams.thread``), what it answers (``streams.outcomes``), the event-time windows and what an event
changes in them (``streams.windows``), and the bytes of its snapshots (``streams.snapshot_codec``). Here:
each event body's handler (``_BY_BODY``), watermarks, feeds and the snapshot's document.

One ``PartitionState`` exists per partition a stream worker owns. It is pure (no I/O; a direct replay
gives it a store for its idle threads, ``streams.cold_threads``, which changes nothing it returns): the
processor feeds it records and ships what it returns. Because it depends only on the records of its
partition, in order, it can be rebuilt at any time by replaying the partition's accepted events and
applied watermarks, which is how a worker that takes over a partition recovers: from its newest snapshot
(``to_snapshot`` / ``from_snapshot``, written by ``streams.snapshots``) and the log after it, so the log
below the snapshot can be trimmed.

Contract:

- ``accept_action`` returns ``Accepted`` (publish the bytes to the events topic), ``Duplicate`` (an event id
  seen before with the same bytes: a redelivery; publish nothing) or ``Rejected`` (dead-letter it with the
  reason).
- An event id names one event: ``EventIds`` remembers every accepted id with a fingerprint of its bytes,
  shared by all the partitions a worker owns, so the same id with other bytes (another post id, another
  body) is rejected as ``conflicting_event_id`` whatever partition it comes on. With ``society`` set, an
  event of another society is rejected; with ``check_keys``, so is a record whose Kafka key is not its
  ``partition_key`` or that is not on the partition Kafka's default partitioner gives that key: no record
  can write into another society or another thread's partition.
- Watermarks are checked (``accept_watermark``: shape, bounds, registered producers, and at most
  ``MAX_WINDOWS_PER_MARK`` windows closed by one mark) before they count.
- State is kept per thread (post), per open window and per accepted event id (``EventIds``).
- Numbers that accumulate saturate: a thread's score stays within a signed 64-bit integer.
- Interventions of an experiment (``intervention_applied``, ``content_removed``, ``agent_banned``) are
  stored and counted by type, but their actor (``experiment``, ``moderator``) is not an agent: it is not
  active and adds no interaction edge. A ``content_removed`` takes its post out of the feeds for good (later
  comments and votes on it are accepted, it stays out) or its comment out of the post's ``recent`` list; the
  first removal of a target counts in the window's ``removed``, a repeated one changes nothing. A removal in
  an archived thread is accepted and changes nothing (the thread left the feeds already); one in a thread
  that does not exist is rejected as ``unknown_post``, like any other event of it.
- Metric windows close on watermarks (``apply_watermark``), so a replay closes them exactly where the live
  run did. Window statistics of threads are those of the events accepted when the window closes; with
  in-order producers (the simulation barrier, replay) that is exactly the state at the window's end.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any, ClassVar

import orjson

from molt_society.algorithms.feeds import hot_score, hot_window
from molt_society.algorithms.kafka_partition import kafka_partition
from molt_society.schemas.control import (
    FeedItem,
    FeedSnapshot,
    InvalidControl,
    Watermark,
    WindowPartial,
    parse_watermark,
    to_us,
)
from molt_society.schemas.events import (
    AgentBannedBody,
    AgentFollowedBody,
    AgentRegisteredBody,
    AgentsJoinedBody,
    AgentSubscribedBody,
    CommentCreatedBody,
    ContentRemovedBody,
    Event,
    InterventionAppliedBody,
    ModelCalledBody,
    PostCreatedBody,
    SubmoltCreatedBody,
    VoteCastBody,
    VoteTalliedBody,
    partition_key,
)
from molt_society.schemas.wire import InvalidEvent, decode_event, quote
from molt_society.streams.cold_threads import ColdThreads
from molt_society.streams.event_ids import EventIds
from molt_society.streams.feed_updates import FeedPublisher, FeedUpdate
from molt_society.streams.feed_window import FeedWindow
from molt_society.streams.outcomes import Accepted, Duplicate, MarkApplied, Outcome, Rejected
from molt_society.streams.snapshot_codec import SNAPSHOT_VERSION, decode, encode, gc_paused
from molt_society.streams.thread import Thread
from molt_society.streams.windows import (
    BANNED,
    COUNTED,
    INTERVENTION,
    NOT_COUNTED,
    REMOVED,
    Effect,
    WindowAcc,
)

RECENT_COMMENTS = 8
# what a feed item carries of the texts, so that agents read what they answer (characters)
POST_EXCERPT = 200
COMMENT_EXCERPT = 120
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_WINDOWS_PER_MARK = 100_000
"""Valid producers mark every tick or window boundary, so a mark closes a few windows; 100,000 hourly
windows are 11 years (69 days of 60 s windows). Closing 100,000 takes about 2 s and 20 MB of partials;
a mark that would close more is forged or broken (an origin at the epoch would close 490,000)."""


_Handler = Callable[["PartitionState", Any, str, int], "Effect | Rejected"]
"""Checks and applies one event body (the state, the body, its actor, its event time in microseconds)."""


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
        society: str | None = None,
        check_keys: bool = False,
        registered: frozenset[str] | None = None,
        event_ids: EventIds | None = None,
        cold: ColdThreads | None = None,
        hot_threads: int = 50_000,
    ) -> None:
        """``society``: reject events of other societies (None: accept any). ``check_keys``: the record's
        key must be the event's ``partition_key`` and this partition the one Kafka's default partitioner
        gives it (the processor; not the in-process society, which places records itself).
        ``registered``: the producers whose watermarks count (None: any). ``event_ids``: the id index
        shared with the worker's other partitions (None: this partition's own). ``cold``: where threads
        beyond the ``hot_threads`` most recently used go (``streams.cold_threads``; None: all in memory)."""
        self.partition = partition
        self.partitions = partitions
        self.window_us = window_us
        self.feed_size = feed_size
        self.window = hot_window(feed_size)
        self.max_event_bytes = max_event_bytes
        self.max_future_us = max_future_us
        self.society = society
        self.check_keys = check_keys
        self.registered = registered
        self.event_ids = event_ids if event_ids is not None else EventIds()
        self.threads: dict[str, Thread] = {}  # in memory; with ``cold``, least recently used first
        self.cold = cold
        self.hot_threads = max(1, hot_threads)
        # Threads idle for thread_ttl_us of event time are archived: their details are dropped (the
        # histograms keep counting them) and later events in them are dead-lettered as archived.
        self.thread_ttl_us = thread_ttl_us
        self.archived: set[str] = set()
        self._last_archive_us = -(2**62)
        # per submolt the hot_window(feed_size) newest posts, (created_us, post_id), sorted: order-independent
        self.submolt_posts: dict[str, FeedWindow] = {}
        self.windows: dict[int, WindowAcc] = {}
        self.next_close_us: int | None = None  # start of the oldest window not yet closed
        self.producer_marks: dict[str, Watermark] = {}
        self.producers: frozenset[str] = frozenset()
        self.last_feed_tick = -1
        self.dirty_submolts: set[str] = set()
        self._feed_cache: dict[str, dict[str, list[FeedItem]]] = {}
        self._feed_publisher = FeedPublisher()  # what the feed readers hold (not in snapshots: a fresh
        # state's first update is a full one)
        # cumulative thread histograms, kept incrementally
        self.size_hist: Counter[int] = Counter()
        self.participants_hist: Counter[int] = Counter()
        self.depth_hist: Counter[int] = Counter()
        self.accepted = 0
        self.rejected = 0
        self.duplicates = 0
        self.late = 0

    # ------------------------------------------------------------------ events
    def accept_action(self, raw: bytes | None, now_us: int, key: bytes | None = None) -> Outcome:
        """Validate one record (``key``: its Kafka key) and, when valid and new, apply it."""
        try:
            ev = decode_event(raw, max_bytes=self.max_event_bytes)
        except InvalidEvent as exc:
            return self._reject(exc.reason, exc.code)
        assert raw is not None  # decode_event rejects a record without a value
        occurred = to_us(ev.occurred_at)
        if occurred > now_us + self.max_future_us:
            ahead = (occurred - now_us) / 1e6
            return self._reject(
                f"event time {ev.occurred_at.isoformat()} is {ahead:,.0f} s in the future "
                f"(limit {self.max_future_us / 1e6:,.0f} s)",
                "future_event_time",
            )
        misplaced = self._misplaced(ev, key)
        if misplaced is not None:
            return misplaced
        eid = str(ev.event_id)
        uid = ev.event_id.int
        fingerprint = EventIds.fingerprint(raw)
        seen = self.event_ids.get(uid)
        if seen is not None:
            return self._seen(eid, fingerprint, *EventIds.unpack(seen))
        effect = self._BY_BODY[type(ev.body)](self, ev.body, ev.actor, occurred)
        if isinstance(effect, Rejected):
            return effect
        self.event_ids.add(uid, fingerprint, self.partition)
        self.accepted += 1
        if not effect.counted:
            return Accepted(eid, ev.type, occurred, False)
        late = not self._count(ev.type, ev.actor, occurred, effect)
        return Accepted(eid, ev.type, occurred, late)

    def _count(self, etype: str, actor: str, occurred: int, effect: Effect) -> bool:
        """The window accounting of a counted event, in one place: False when its window already closed
        (the event is stored, but its window's metrics were emitted: it is late)."""
        acc = self._window_acc(occurred)
        if acc is None:
            self.late += 1
            return False
        acc.counts[etype] += 1
        if effect.joined:  # cohort members are new agents, not active ones
            acc.joined += effect.joined
        elif effect.agent:
            acc.active.add(actor)
        else:  # an intervention: its actor is the experiment or a moderator
            if effect.removed is not None:
                acc.removed[effect.removed] += 1
            acc.banned += effect.banned
        if effect.touched is not None:
            acc.touched.add(effect.touched)
        if effect.edge is not None:
            acc.edges[effect.edge] += 1
        return True

    def _reject(self, reason: str, code: str) -> Rejected:
        self.rejected += 1
        return Rejected(reason, code)

    def _misplaced(self, ev: Event, key: bytes | None) -> Rejected | None:
        """A rejection when the event belongs to another society, key or partition, else None."""
        if self.society is not None and ev.society != self.society:
            return self._reject(
                f"event of society {ev.society!r} sent to society {self.society!r}", "wrong_society"
            )
        if not self.check_keys:
            return None
        text = partition_key(ev)
        expected = text.encode()
        if key != expected:
            return self._reject(
                f"record key {quote(key)} is not the event's partition key {quote(expected)}", "key_mismatch"
            )
        if text in self.threads and not isinstance(ev.body, PostCreatedBody):
            return None  # an event of a thread whose post this partition accepted under the same key
        right = kafka_partition(expected, self.partitions)
        if right != self.partition and (
            isinstance(ev.body, PostCreatedBody) or self.cold is None or text not in self.cold
        ):
            return self._reject(
                f"record is on partition {self.partition}, but Kafka's default partitioner puts key "
                f"{quote(expected)} on partition {right} of {self.partitions}",
                "wrong_partition",
            )
        return None

    def _seen(self, eid: str, fingerprint: int, known: int, partition: int) -> Duplicate | Rejected:
        """An id accepted before: the same bytes are a redelivery, other bytes another event's claim."""
        if fingerprint == known:
            self.duplicates += 1
            return Duplicate(eid)
        where = "this partition" if partition == self.partition else f"partition {partition}"
        return self._reject(
            f"event id {eid} was already accepted on {where} for an event with other content; "
            "an event id names one event",
            "conflicting_event_id",
        )

    def _post(self, body: PostCreatedBody, actor: str, occurred: int) -> Effect | Rejected:
        exists = self._has_thread(body.post_id)
        if exists or body.post_id in self.archived:
            archived = " (archived)" if not exists else ""
            return self._reject(f"post {body.post_id} already exists{archived}", "duplicate_post_id")
        t = Thread(
            body.post_id,
            body.submolt,
            actor,
            body.title[:200],
            occurred,
            last_us=occurred,
            excerpt=body.content[:POST_EXCERPT],
        )
        self.threads[body.post_id] = t
        self._cool()
        window = self.submolt_posts.get(body.submolt)
        if window is None:
            window = self.submolt_posts[body.submolt] = FeedWindow(self.window)
        window.add(occurred, body.post_id, hot_score(t.score, occurred))
        self.dirty_submolts.add(body.submolt)
        self.size_hist[0] += 1
        self.participants_hist[0] += 1
        self.depth_hist[0] += 1
        return Effect(touched=body.post_id)

    def _comment(self, body: CommentCreatedBody, actor: str, occurred: int) -> Effect | Rejected:
        t = self._thread(body.post_id)
        if t is None:
            return self._missing_thread("comment on", body.post_id)
        if self._idle_too_long(t, occurred):
            return self._missing_thread("event in", body.post_id)
        if body.comment_id in t.comments:
            return self._reject(f"comment {body.comment_id} already exists", "duplicate_comment_id")
        parent_author: str | None
        if body.parent_unknown:  # imported: the source gives the depth, not the parent
            parent_author, parent_depth = None, body.depth - 1
        elif body.parent_id is None:
            parent_author, parent_depth = t.author, 0
        else:
            parent = t.comments.get(body.parent_id)
            if parent is None:
                return self._reject(
                    f"reply to comment {body.parent_id}, which does not exist in post {body.post_id}",
                    "unknown_parent",
                )
            parent_author, parent_depth = parent
        if body.depth != parent_depth + 1:
            return self._reject(
                f"depth {body.depth} does not match its parent (expected {parent_depth + 1})", "bad_depth"
            )
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
        edge = (actor, parent_author) if parent_author is not None and actor != parent_author else None
        return Effect(touched=t.post_id, edge=edge)

    def _vote(self, body: VoteCastBody | VoteTalliedBody, actor: str, occurred: int) -> Effect | Rejected:
        """Individual votes and imported vote counts: same thread checks, same effect on the score."""
        tally = isinstance(body, VoteTalliedBody)
        t = self._thread(body.post_id)
        if t is None:
            return self._missing_thread("vote tally in" if tally else "vote in", body.post_id)
        if self._idle_too_long(t, occurred):
            return self._missing_thread("event in", body.post_id)
        if body.target_type == "comment" and body.target_id not in t.comments:
            return self._reject(
                f"{'vote tally of' if tally else 'vote on'} comment {body.target_id}, "
                f"which does not exist in post {body.post_id}",
                "unknown_target",
            )
        if not tally and body.target_type == "post" and body.target_id != body.post_id:
            return self._reject("a post vote's target_id must equal its post_id", "bad_target")
        delta: int
        if isinstance(body, VoteCastBody):
            t.last_us = max(t.last_us, occurred)
            delta = body.value
        else:
            delta = body.upvotes - body.downvotes
        if body.target_type == "post":
            # saturate: tallies of up to 2**53 each may add up beyond what a feed (int64) can carry
            t.score = min(max(t.score + delta, INT64_MIN), INT64_MAX)
            t.cached_item = None
            if (window := self.submolt_posts.get(t.submolt)) is not None:
                window.rescore(t.post_id, hot_score(t.score, t.created_us))
            self.dirty_submolts.add(t.submolt)
        return COUNTED

    def _remove(self, body: ContentRemovedBody, actor: str, occurred: int) -> Effect | Rejected:
        """A moderator's removal: the post leaves the feeds, or the comment its post's ``recent`` list."""
        t = self._thread(body.post_id)
        if t is None:
            if body.post_id in self.archived:
                return INTERVENTION  # stored; the archived thread is in no feed
            return self._missing_thread("removal in", body.post_id)
        if body.target_type == "post":
            if body.target_id != body.post_id:
                return self._reject("a post removal's target_id must equal its post_id", "bad_target")
        elif body.target_id not in t.comments:
            return self._reject(
                f"removal of comment {body.target_id}, which does not exist in post {body.post_id}",
                "unknown_target",
            )
        if self._idle_too_long(t, occurred):
            return INTERVENTION  # archived by now (whether or not reclaimed yet): it left the feeds
        if body.target_type == "post":
            if t.removed:
                return INTERVENTION
            t.removed = True
            if (window := self.submolt_posts.get(t.submolt)) is not None:
                window.remove(t.created_us, t.post_id)
        else:
            if body.target_id in t.removed_comments:
                return INTERVENTION
            t.removed_comments = t.removed_comments | {body.target_id}
            t.recent = [r for r in t.recent if r[0] != body.target_id]
            t.cached_item = None
        self.dirty_submolts.add(t.submolt)
        return REMOVED[body.target_type]

    def _intervention(self, body: InterventionAppliedBody, actor: str, occurred: int) -> Effect:
        """An intervention taking effect: stored and counted; it changes no thread (the agent workers and
        feed policies apply it)."""
        return INTERVENTION

    def _ban(self, body: AgentBannedBody, actor: str, occurred: int) -> Effect:
        """A ban: stored and counted (the agent workers stop the agent); it changes no thread."""
        return BANNED

    def _joined(self, body: AgentsJoinedBody, actor: str, occurred: int) -> Effect:
        """A cohort: counted as one event, its members as new agents (none of them as active)."""
        return Effect(joined=len(body.agents))

    def _counted(self, body: object, actor: str, occurred: int) -> Effect:
        """Registrations, submolts, subscriptions, follows: counted actions that change no thread."""
        return COUNTED

    def _not_counted(self, body: object, actor: str, occurred: int) -> Effect:
        """A model call is data, not an action: stored, counted by no metric."""
        return NOT_COUNTED

    _BY_BODY: ClassVar[dict[type, _Handler]] = {
        PostCreatedBody: _post,
        CommentCreatedBody: _comment,
        VoteCastBody: _vote,
        VoteTalliedBody: _vote,
        AgentsJoinedBody: _joined,
        AgentRegisteredBody: _counted,
        SubmoltCreatedBody: _counted,
        AgentSubscribedBody: _counted,
        AgentFollowedBody: _counted,
        ModelCalledBody: _not_counted,
        InterventionAppliedBody: _intervention,
        ContentRemovedBody: _remove,
        AgentBannedBody: _ban,
    }
    """Each event body's handler: it checks and applies the event and says what it counts (``_count``)."""

    def _thread(self, post_id: str, keep: bool = True) -> Thread | None:
        """The thread of ``post_id``, or None; from the cold store when it went there (``keep``: back in
        memory as the most recently used, else only read)."""
        threads = self.threads
        t = threads.get(post_id)
        if self.cold is None:
            return t
        if t is not None:
            if keep:
                threads[post_id] = threads.pop(post_id)  # the most recently used go last
            return t
        raw = self.cold.get(post_id)
        if raw is None:
            return None
        t = Thread.of_row(orjson.loads(raw))
        if keep:
            threads[post_id] = t
            self._cool()
        return t

    def _has_thread(self, post_id: str) -> bool:
        return post_id in self.threads or (self.cold is not None and post_id in self.cold)

    def _cool(self) -> None:
        """With a cold store and more than ``hot_threads`` threads in memory, the least recently used
        quarter of them goes there (in one transaction)."""
        threads, cold = self.threads, self.cold
        if cold is None or len(threads) <= self.hot_threads:
            return
        out = list(islice(threads, len(threads) - self.hot_threads * 3 // 4))
        cold.put((pid, t.last_us, orjson.dumps(t.row())) for pid in out for t in (threads.pop(pid),))

    def _every_thread(self) -> Iterator[Thread]:
        """Every thread, those in memory first (then the cold store's, by post id)."""
        yield from self.threads.values()
        if self.cold is not None:
            for pid, raw in self.cold.stored():
                if pid not in self.threads:
                    yield Thread.of_row(orjson.loads(raw))

    def _idle_too_long(self, t: Thread, occurred: int) -> bool:
        """An event more than the TTL after the thread's last one finds it archived, whether or not the
        thread's details were already reclaimed: the outcome depends on event times only."""
        if self.thread_ttl_us is None or occurred - t.last_us <= self.thread_ttl_us:
            return False
        self.archived.add(t.post_id)
        return True

    def _missing_thread(self, what: str, post_id: str) -> Rejected:
        if post_id in self.archived:
            return self._reject(
                f"{what} post {post_id}, which was archived after "
                f"{(self.thread_ttl_us or 0) / 1e6:,.0f} s of event time without activity",
                "thread_archived",
            )
        return self._reject(f"{what} post {post_id}, which does not exist", "unknown_post")

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
    def accept_watermark(self, raw: bytes | None, now_us: int) -> MarkApplied | Rejected:
        """Check a watermark record (``schemas.control.parse_watermark``) and apply it if it may count."""
        try:
            mark = parse_watermark(
                raw, registered=self.registered, now_us=now_us, max_future_us=self.max_future_us
            )
        except InvalidControl as exc:
            return self._reject(exc.reason, "bad_control")
        closing = self._windows_closed_by(mark)
        if closing > MAX_WINDOWS_PER_MARK:
            return self._reject(
                f"watermark of {mark['producer']} would close {closing:,} event-time windows at once "
                f"(at most {MAX_WINDOWS_PER_MARK:,}): its watermark_us or origin_us is implausible",
                "bad_control",
            )
        partials, tick = self.apply_watermark(mark, mark["origin_us"])
        return MarkApplied(partials, tick)

    def _windows_closed_by(self, mark: Watermark) -> int:
        """How many windows ``mark`` closes at most (if every other producer were as far)."""
        start = self.next_close_us
        if start is None:
            start = self._window_start(mark["origin_us"])
        return max(0, (mark["watermark_us"] - start) // self.window_us + 1)

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
        if self.cold is not None:  # a stored copy is the thread as it went cold unless it is in memory
            gone = [pid for pid in self.cold.idle(before_us) if pid not in self.threads]
            self.cold.drop([*gone, *idle])  # an idle thread in memory may have an older copy there
            idle.extend(gone)
        if idle:
            self.archived.update(idle)
            archived = set(idle)
            for submolt, window in self.submolt_posts.items():  # a window holds only threads
                if window.retain(lambda p: p not in archived):
                    self.dirty_submolts.add(submolt)

    def _close(self, start: int) -> WindowPartial:
        acc = self.windows.pop(start, None) or WindowAcc()
        touched = []
        for pid in sorted(acc.touched):
            t = self._thread(pid, keep=False)
            if t is not None:
                touched.append([pid, len(t.comments), len(t.participants), t.max_depth])
        return {
            "window_start_us": start,
            "window_end_us": start + self.window_us,
            "partition": self.partition,
            "partitions": self.partitions,
            "counts": dict(sorted(acc.counts.items())),
            "active_agents": sorted(acc.active),
            "joined_agents": acc.joined,
            "removed": dict(sorted(acc.removed.items())),
            "banned": acc.banned,
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
            self._refresh_feed(submolt)
        self.dirty_submolts.clear()
        wm = min((m["watermark_us"] for m in self.producer_marks.values()), default=0)
        return {
            "tick": tick,
            "partition": self.partition,
            "watermark_us": wm,
            "submolts": dict(self._feed_cache),
        }

    def feed_update(self, tick: int) -> FeedUpdate:
        """The feeds record of ``tick``: what changed since the previous one (``streams.feed_updates``)."""
        return self.feed_update_of(self.feed_snapshot(tick))

    def feed_update_of(self, snap: FeedSnapshot) -> FeedUpdate:
        """The feeds record of a feed taken earlier (``feed_snapshot``): a rebuild takes the feed at the
        last mark, as the live worker published it, before applying the events after that mark."""
        return self._feed_publisher.update(
            snap["submolts"], snap["tick"], self.partition, snap["watermark_us"]
        )

    def _refresh_feed(self, submolt: str) -> None:
        window = self.submolt_posts.get(submolt)
        n = self.feed_size
        self._feed_cache[submolt] = {
            "new": [self._item(p) for p in window.top_new(n)] if window else [],
            "hot": [self._item(p) for p in window.top_hot(n)] if window else [],
        }

    def _item(self, post_id: str) -> FeedItem:
        t = self._thread(post_id, keep=False)
        assert t is not None, post_id  # a feed window holds only threads
        return t.item()

    # --------------------------------------------------------------- snapshots
    def to_snapshot(self) -> bytes:
        """Everything a replay of this partition's log would rebuild, as bytes (``from_snapshot``; the format
        is ``streams.snapshot_codec``'s): threads, archive, newest posts per submolt, open windows, producer
        marks, histograms and counters, and this partition's accepted event ids with their fingerprints,
        so that a redelivery of an event older than the snapshot is still a duplicate and a conflicting id
        still conflicts. The feed cache is not stored: it is recomputed from the threads, which gives the
        same feed (``feed_snapshot``)."""
        with gc_paused():
            return encode(self._snapshot_doc(), self.event_ids.of_partition(self.partition))

    def _snapshot_doc(self) -> dict[str, Any]:
        return {
            "v": SNAPSHOT_VERSION,
            "partition": self.partition,
            "partitions": self.partitions,
            "window_us": self.window_us,
            "society": self.society,
            "threads": [t.row() for t in self._every_thread()],
            "archived": sorted(self.archived),
            "last_archive_us": self._last_archive_us,
            "submolt_posts": {s: w.newest for s, w in self.submolt_posts.items()},
            "windows": [[start, *acc.row()] for start, acc in self.windows.items()],
            "next_close_us": self.next_close_us,
            "producer_marks": self.producer_marks,
            "producers": sorted(self.producers),
            "last_feed_tick": self.last_feed_tick,
            "dirty_submolts": sorted(self.dirty_submolts),
            "feed_submolts": list(self._feed_cache),
            "size_hist": list(self.size_hist.items()),
            "participants_hist": list(self.participants_hist.items()),
            "depth_hist": list(self.depth_hist.items()),
            "counters": [self.accepted, self.rejected, self.duplicates, self.late],
        }

    @classmethod
    def from_snapshot(cls, raw: bytes, partition: int, partitions: int, **config: Any) -> PartitionState:
        """A state equal to the one ``to_snapshot`` saved, built with this worker's configuration (the
        keyword arguments of ``PartitionState``). Its event ids join ``config["event_ids"]``.

        Raises ``ValueError`` when the bytes are not a snapshot, or one of another partition, partition
        count or window length: its windows and checks would not be this worker's.
        """
        with gc_paused():
            doc, ids = decode(raw)
            state = cls(partition, partitions, **config)
            mine = (SNAPSHOT_VERSION, partition, partitions, state.window_us)
            theirs = (doc["v"], doc["partition"], doc["partitions"], doc["window_us"])
            if mine != theirs:
                what = "(version, partition, partitions, window_us)"
                raise ValueError(f"snapshot of {what} = {theirs}, this worker has {mine}")
            state._restore(doc)
            add = state.event_ids.add
            for uid, fingerprint in ids:
                add(uid, fingerprint, partition)
            return state

    def _restore(self, doc: dict[str, Any]) -> None:
        for row in doc["threads"]:
            t = Thread.of_row(row)
            self.threads[t.post_id] = t
        self.archived = set(doc["archived"])
        self._last_archive_us = doc["last_archive_us"]
        threads = self.threads
        self.submolt_posts = {
            s: FeedWindow.of(self.window, posts, lambda p: hot_score(threads[p].score, threads[p].created_us))
            for s, posts in doc["submolt_posts"].items()
        }
        for start, *row in doc["windows"]:
            self.windows[start] = WindowAcc.of_row(row)
        self.next_close_us = doc["next_close_us"]
        self.producer_marks = doc["producer_marks"]
        self.producers = frozenset(doc["producers"])
        self.last_feed_tick = doc["last_feed_tick"]
        for submolt in doc["feed_submolts"]:  # the cached feeds, recomputed in their order
            self._refresh_feed(submolt)
        self.dirty_submolts = set(doc["dirty_submolts"])
        self.size_hist = Counter(dict(doc["size_hist"]))
        self.participants_hist = Counter(dict(doc["participants_hist"]))
        self.depth_hist = Counter(dict(doc["depth_hist"]))
        self.accepted, self.rejected, self.duplicates, self.late = doc["counters"]
