"""MoltBook's published values, shown as the third column of a report (``../shared/notes/metrics.md``).

Keys are the report's Scalar keys. Each value carries where it was published.
"""

from __future__ import annotations

from molt_society.report.model import Scalar

MOLT_DYNAMICS = "Molt Dynamics (770k agents, 3 weeks)"
LI_A1 = "Li 2026 crawl of 91,792 posts (ln9527/moltbook-research results/a1_platform_stats.json)"
LI_A4 = "Li 2026 crawl of 91,792 posts (ln9527/moltbook-research results/a4_thread_structure.json)"
LI_B1 = (
    "Li 2026, The Moltbook Illusion: 7,807 authors with >= 3 posts (ln9527/moltbook-research "
    "results/b1_temporal_signal_v2.json; method: paper/supplementary_information.md S4)"
)


def _from(source: str, values: dict[str, float]) -> dict[str, tuple[float, str]]:
    """``values`` by key, each with the one place they were all published."""
    return {key: (value, source) for key, value in values.items()}


PUBLISHED: dict[str, tuple[float, str]] = {
    # threads.share_posts_without_comment has no published value: the crawl's 59.25% counts the platform's
    # comment_count of each post, not the comments present; reference.share_posts_without_comment does.
    "threads.share_top_level_comments": (0.9404, LI_A4 + ", depth 0 of all crawled comments"),
    "threads.share_reply_comments": (0.0562 + 0.0034, LI_A4 + ", depth >= 1 of all crawled comments"),
    "threads.share_depth_3_plus_comments": (0.0034, LI_A4 + ", depth >= 2 of all crawled comments"),
    "threads.comments_per_post": (405_707 / 91_792, LI_A1 + ": comments crawled / posts"),
    "threads.max_depth": (9, LI_A4 + " (8 counting top-level as 0)"),
    "reference.share_posts_without_comment": (1 - 0.4075, LI_A4 + ", by the platform's comment_count"),
    "reference.mean_comment_count": (23.309177270350357, LI_A1 + ", comments_per_post_mean (comment_count)"),
    **_from(
        LI_A1,
        {
            "reference.posts_per_author_mean": 4.129573391178598,
            "reference.posts_per_author_median": 2.0,
            "reference.posts_per_author_gini": 0.6096684006583768,
            "reference.post_upvotes_gini": 0.9699230681978657,
            "reference.comment_upvotes_gini": 0.9720007749282831,
        },
    ),
    "rhythm.autonomous_share": (0.1615 + 0.1035, LI_B1 + ": very regular 16.15% + regular 10.35%"),
    **_from(
        LI_B1,
        {
            "rhythm.cv_median": 0.8599,
            "rhythm.cv_mean": 1.0193,
            "rhythm.share_very_regular": 0.1615,
            "rhythm.share_regular": 0.1035,
            "rhythm.share_mixed": 0.3665,
            "rhythm.share_irregular": 0.2701,
            "rhythm.share_very_irregular": 0.0984,
        },
    ),
    # all 90,704 active agents, isolated ones with zero features (the public code's method: report/roles.py)
    **_from(
        MOLT_DYNAMICS + ", all active agents",
        {"roles.k": 6, "roles.silhouette": 0.91, "roles.peripheral_share": 0.935},
    ),
    "cascades.alpha": (2.57, MOLT_DYNAMICS + ", +/- 0.02"),
    **_from(
        MOLT_DYNAMICS,
        {
            # "10,323 propagation events": the events of the paper's Cox model (report/cascades.py says
            # how counted)
            "cascades.propagation_events": 10_323,
            "saturation.cox_hazard_ratio": 0.53,
            "saturation.cox_concordance": 0.78,
            "cooperation.events": 164,
            "cooperation.success_rate": 0.067,
            "cooperation.cohens_d": -0.88,
        },
    ),
    **_from(
        "socialization study: near 0",
        {"individual.feedback_net_progress": 0.0, "individual.interaction_impact": 0.0},
    ),
}


def annotate(scalar: Scalar) -> Scalar:
    """Fill ``published`` from the table when the diagnostic did not."""
    if scalar.published is None and scalar.key in PUBLISHED:
        scalar.published, scalar.published_source = PUBLISHED[scalar.key]
    return scalar
