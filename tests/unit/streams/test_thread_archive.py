"""Threads idle for longer than the TTL (event time) are archived; events in them are dead-lettered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from molt_society.schemas import control
from molt_society.schemas import events as E
from molt_society.schemas.ids import uuid7
from molt_society.schemas.wire import encode_event
from molt_society.streams.partition_state import Accepted, PartitionState, Rejected

T0 = datetime(2026, 1, 28, tzinfo=UTC)
HOUR = 3_600_000_000


def _state() -> PartitionState:
    return PartitionState(
        0, 1, window_us=HOUR, feed_size=5, max_event_bytes=65536, max_future_us=2**62, thread_ttl_us=2 * HOUR
    )


def _post(pid: str, at: datetime) -> bytes:
    ev = E.PostCreated(
        event_id=uuid7(at),
        society="s",
        actor="a",
        occurred_at=at,
        body={"post_id": pid, "submolt": "g", "title": "t"},
    )
    return encode_event(ev)


def _comment(pid: str, cid: str, at: datetime) -> bytes:
    ev = E.CommentCreated(
        event_id=uuid7(at),
        society="s",
        actor="b",
        occurred_at=at,
        body={"comment_id": cid, "post_id": pid, "depth": 1},
    )
    return encode_event(ev)


def _mark(at: datetime) -> control.Watermark:
    return control.watermark("p", ["p"], control.to_us(at), 0, control.to_us(T0))


def test_idle_thread_is_archived_and_later_comment_dead_lettered() -> None:
    st = _state()
    assert isinstance(st.accept_action(_post("old", T0), now_us=2**62), Accepted)
    assert isinstance(st.accept_action(_post("busy", T0), now_us=2**62), Accepted)
    assert isinstance(
        st.accept_action(_comment("busy", "c1", T0 + timedelta(hours=2)), now_us=2**62), Accepted
    )
    st.apply_watermark(_mark(T0 + timedelta(hours=3)), control.to_us(T0))
    # "old" was idle for 3 h > 2 h TTL; "busy" had activity 1 h before the watermark
    assert "old" not in st.threads
    assert "old" in st.archived
    assert "busy" in st.threads
    out = st.accept_action(_comment("old", "c2", T0 + timedelta(hours=3, minutes=5)), now_us=2**62)
    assert isinstance(out, Rejected)
    assert out.code == "thread_archived"
    assert "archived" in out.reason
    # the histograms still count the archived thread: 2 posts, one with a comment
    assert sum(st.size_hist.values()) == 2
    snap = st.feed_snapshot(1)
    assert [i["post_id"] for i in snap["submolts"]["g"]["new"]] == ["busy"]
