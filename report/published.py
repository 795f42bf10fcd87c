"""MoltBook's published values, shown as the third column of a report (``../shared/notes/metrics.md``).

Keys are the report's Scalar keys. Each value carries where it was published.
"""

from __future__ import annotations

from report.model import Scalar

MOLT_DYNAMICS = "Molt Dynamics (770k agents, 3 weeks)"
LI_CRAWL = "Li 2026 crawl: 91,792 posts, 405,707 comments (reference-stats a4)"

PUBLISHED: dict[str, tuple[float, str]] = {
    "threads.share_posts_without_comment": (1 - 0.4075, LI_CRAWL),
    "threads.share_top_level_comments": (0.9404, LI_CRAWL),
    "threads.share_reply_comments": (0.0562 + 0.0034, LI_CRAWL),
    "threads.share_depth_3_plus_comments": (0.0034, LI_CRAWL),
    "threads.comments_per_post": (405_707 / 91_792, LI_CRAWL),
    "threads.max_depth": (9, LI_CRAWL + " (8 counting top-level as 0)"),
    "roles.k": (6, MOLT_DYNAMICS),
    "roles.silhouette": (0.91, MOLT_DYNAMICS),
    "roles.peripheral_share": (0.935, MOLT_DYNAMICS),
    "cascades.alpha": (2.57, MOLT_DYNAMICS + ", +/- 0.02"),
    "cascades.count": (10_323, MOLT_DYNAMICS),
    "saturation.cox_hazard_ratio": (0.53, MOLT_DYNAMICS),
    "saturation.cox_concordance": (0.78, MOLT_DYNAMICS),
    "cooperation.events": (164, MOLT_DYNAMICS),
    "cooperation.success_rate": (0.067, MOLT_DYNAMICS),
    "cooperation.cohens_d": (-0.88, MOLT_DYNAMICS),
    "individual.feedback_net_progress": (0.0, "socialization study: near 0"),
    "individual.interaction_impact": (0.0, "socialization study: near 0"),
}


def annotate(scalar: Scalar) -> Scalar:
    """Fill ``published`` from the table when the diagnostic did not."""
    if scalar.published is None and scalar.key in PUBLISHED:
        scalar.published, scalar.published_source = PUBLISHED[scalar.key]
    return scalar
