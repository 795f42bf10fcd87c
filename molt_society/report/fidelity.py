"""How far a simulated society is from the real MoltBook data it was fitted to: the fidelity table.

Every moment of ``calibration.moments`` is computed on the society's stored events (posts, comments,
votes on posts) and put beside the reference: a real dump's moments (``society report --dump``) or those a
fitted behaviour file recorded of its dump (``[fit]``, found through the society's recorded settings).
Each row shows the distance in band widths and whether the moment lies in its stated band.
"""

from __future__ import annotations

from dataclasses import dataclass

from molt_society.calibration.moments import MOMENTS, Moments, distance
from molt_society.report.model import Item, Scalar, Table
from molt_society.report.warehouse_source import Warehouse, quoted


@dataclass(frozen=True)
class Reference:
    """Real moments to compare with, and where they come from (shown in the section)."""

    label: str
    moments: dict[str, float | None]


def observed(wh: Warehouse, society: str) -> Moments:
    """The moments accumulator of the society's stored posts, comments and votes on posts."""
    m = Moments()
    s = quoted(society)
    posts = wh.query(
        "SELECT post_id, actor, toUnixTimestamp64Micro(occurred_at) FROM events FINAL "
        f"WHERE society = {s} AND type = 'post_created'"
    )
    for post_id, actor, us in posts.rows:
        m.add_post(str(post_id), str(actor), int(us) / 1e6)
    comments = wh.query(
        "SELECT comment_id, post_id, parent_id, actor, toUnixTimestamp64Micro(occurred_at), depth "
        f"FROM events FINAL WHERE society = {s} AND type = 'comment_created' ORDER BY occurred_at"
    )
    for cid, pid, parent, actor, us, depth in comments.rows:
        m.add_comment(str(cid), str(pid), str(parent) or None, str(actor), int(us) / 1e6, int(depth))
    tallied = "type = 'vote_tallied'"
    votes = wh.query(
        f"SELECT sumIf(vote = 1, type = 'vote_cast') + sumIf(JSONExtractInt(body, 'upvotes'), {tallied}), "
        f"sumIf(vote = -1, type = 'vote_cast') + sumIf(JSONExtractInt(body, 'downvotes'), {tallied}) "
        f"FROM events FINAL WHERE society = {s} AND type IN ('vote_cast', 'vote_tallied') "
        "AND JSONExtractString(body, 'target_type') = 'post'"
    )
    if votes.rows:
        up, down = votes.rows[0]
        m.add_post_votes(int(up or 0), int(down or 0))
    return m


def _cell(v: float | None) -> float | None:
    return None if v is None else round(float(v), 4)


def items(wh: Warehouse, society: str, reference: Reference) -> list[Item]:
    """The fidelity table and the count of moments in their bands."""
    sim = observed(wh, society).result()
    rows: list[list[float | int | str | None]] = []
    inside = core_inside = measured = 0
    for m in MOMENTS:
        real = reference.moments.get(m.key)
        d = distance(m.key, sim.get(m.key), real)
        ok = d is not None and d <= 1.0
        measured += d is not None
        inside += ok
        core_inside += ok and m.core
        verdict = "-" if d is None else ("in band" if ok else "outside")
        label = ("* " if m.core else "") + m.label
        rows.append([label, _cell(sim.get(m.key)), _cell(real), _cell(d), m.band.describe(), verdict])
    core = sum(1 for m in MOMENTS if m.core)
    return [
        Table(
            "fidelity.moments",
            f"{society} beside {reference.label} (* the nine headline moments)",
            ["moment", "this society", "real", "distance (band widths)", "band", "verdict"],
            rows,
        ),
        Scalar("fidelity.in_band", "moments in their band", inside, unit=f"of {measured}"),
        Scalar("fidelity.core_in_band", "headline moments in their band", core_inside, unit=f"of {core}"),
    ]
