"""What a society shows: its moments, from any stream of events (a dump's, a simulation's, stored ones).

``observe(events)`` feeds ``calibration.moments.Moments`` with posts, comments and the votes on posts: a
simulated society's ``vote_cast`` events one by one, an imported dump's ``vote_tallied`` counts.
"""

from __future__ import annotations

from collections.abc import Iterable

from molt_society.calibration.moments import Moments, utc_seconds
from molt_society.schemas.events import CommentCreated, Event, PostCreated, VoteCast, VoteTallied


def observe(events: Iterable[Event], into: Moments | None = None) -> Moments:
    """The moments accumulator of ``events`` (added to ``into`` when given)."""
    m = into if into is not None else Moments()
    for ev in events:
        if isinstance(ev, PostCreated):
            m.add_post(ev.body.post_id, ev.actor, utc_seconds(ev.occurred_at))
        elif isinstance(ev, CommentCreated):
            b = ev.body
            m.add_comment(
                b.comment_id, b.post_id, b.parent_id, ev.actor, utc_seconds(ev.occurred_at), b.depth
            )
        elif isinstance(ev, VoteCast) and ev.body.target_type == "post":
            m.add_post_votes(int(ev.body.value == 1), int(ev.body.value == -1))
        elif isinstance(ev, VoteTallied) and ev.body.target_type == "post":
            m.add_post_votes(ev.body.upvotes, ev.body.downvotes)
    return m
