"""Shapes only imported dumps produce: vote tallies and replies whose parent the source does not give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from molt_society.schemas import events as E
from molt_society.schemas.ids import uuid7
from molt_society.schemas.wire import encode_event
from molt_society.streams.partition_state import Accepted, Duplicate, PartitionState, Rejected

T0 = datetime(2026, 1, 28, tzinfo=UTC)


def _state() -> PartitionState:
    return PartitionState(
        0, 1, window_us=3_600_000_000, feed_size=5, max_event_bytes=65536, max_future_us=2**62
    )


def test_vote_tally_adds_to_the_post_score_once() -> None:
    st = _state()
    post = E.PostCreated(
        event_id=uuid7(T0),
        society="s",
        actor="a",
        occurred_at=T0,
        body={"post_id": "p", "submolt": "g", "title": "t"},
    )
    tally = E.VoteTallied(
        event_id=uuid7(T0 + timedelta(seconds=1)),
        society="s",
        actor="platform",
        occurred_at=T0 + timedelta(seconds=1),
        body={"target_type": "post", "target_id": "p", "post_id": "p", "upvotes": 9, "downvotes": 2},
    )
    assert isinstance(st.accept_action(encode_event(post), now_us=2**62), Accepted)
    assert isinstance(st.accept_action(encode_event(tally), now_us=2**62), Accepted)
    assert isinstance(st.accept_action(encode_event(tally), now_us=2**62), Duplicate)
    assert st.threads["p"].score == 9 - 2
    bad = tally.model_copy(
        update={
            "event_id": uuid7(T0),
            "body": tally.body.model_copy(update={"target_type": "comment", "target_id": "x"}),
        }
    )
    out = st.accept_action(encode_event(bad), now_us=2**62)
    assert isinstance(out, Rejected)
    assert out.code == "unknown_target"


def test_reply_with_unknown_parent_keeps_its_depth_and_makes_no_edge() -> None:
    st = _state()
    post = E.PostCreated(
        event_id=uuid7(T0),
        society="s",
        actor="a",
        occurred_at=T0,
        body={"post_id": "p", "submolt": "g", "title": "t"},
    )
    reply = E.CommentCreated(
        event_id=uuid7(T0),
        society="s",
        actor="b",
        occurred_at=T0 + timedelta(seconds=5),
        body={"comment_id": "c", "post_id": "p", "depth": 3, "parent_unknown": True},
    )
    st.accept_action(encode_event(post), now_us=2**62)
    assert isinstance(st.accept_action(encode_event(reply), now_us=2**62), Accepted)
    assert st.threads["p"].max_depth == 3
    acc = st.windows[T0.timestamp() * 1_000_000 // 3_600_000_000 * 3_600_000_000]
    assert not acc.edges  # the replied-to author is unknown: no interaction edge is invented
