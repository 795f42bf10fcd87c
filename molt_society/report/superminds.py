"""Superminds (arXiv 2604.22452, section 4.3): the paper's platform-wide thread figures on a society.

- Figure 5 (left): per upvote bin, the mean (and median) thread depth and the mean number of unique
  repliers, from the view ``superminds_depth_by_popularity`` (warehouse/superminds.sql, where depth, repliers,
  upvotes and the bins 0, 1, 2-3, 4-7, 8+ are written down; the paper's text names only its 8+ bin).
  Depth and repliers are averaged over all posts of a bin (0 for a post without comments) and, beside
  them, over the posts with at least one comment.
- The 8+ bin under the other readings of the paper's text (``figure5_readings``: posts with comments only,
  mean comment depth instead of the deepest, repliers without the author, binned by score), each a
  labelled variant with its bootstrap CI, and a null: as many posts drawn at random (popularity shuffled).
- Figure 5 (right): the 0-5 reply rating of appendix 7.5 by an LLM judge (``report.superminds_judge``),
  on a seeded sample of ``report_judge_comments`` comments (setting ``SOCIETY_REPORT_JUDGE_COMMENTS``),
  grouped by post, up to 15 per call as in the paper; the share of each score per upvote bin, and the
  paper's two relevance metrics RRR (share scoring >= 1) and RRS (share scoring >= 3).
- The comment-quality categories of appendix 7.4, by the same judge, on the external replies to Tier I
  probes of this society's probe runs (``society probe``), sampled the same way.

The judge is the configured model server: ``SOCIETY_LLM_BASE_URL`` (any OpenAI-compatible API) or the
running society's local model server, model ``SOCIETY_LLM_MODELS``' first name. The paper used gpt-5-mini;
a small local model rates less reliably, and the labels say which model rated. Without a reachable
server the judged items are None with a reason saying how to enable them. Nothing is stored.

Published values (the paper's, on Li et al.'s crawl) sit beside ours: mean depth 1.5 and 9.8 unique
repliers for posts with 8+ upvotes, depth 0.8-1.2 across bins, and the text's reading of the ratings.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import structlog

from molt_society.report import superminds_judge as sj
from molt_society.report.model import Cell, Figure, Item, Scalar, Series, Table
from molt_society.report.probe_runs import ProbeError, load_run, replies, run_dir
from molt_society.report.verdicts import bootstrap_values, ci_scalars
from molt_society.report.warehouse_source import Warehouse, quoted
from molt_society.runtime.settings import Settings, get_settings
from molt_society.runtime.stack_state import model_server_url

log = structlog.get_logger(__name__)

BINS = ("0", "1", "2-3", "4-7", "8+")
PAPER = "Superminds (arXiv 2604.22452)"
FIG5 = PAPER + ", Figure 5 and section 4.3, on Li et al.'s MoltBook crawl"


# --- Figure 5 (left) -------------------------------------------------------------------------------------


def depth_rows(wh: Warehouse, society: str) -> list[list[Cell]]:
    """One row per bin (all five, empty bins with 0 posts): the columns of ``DEPTH_COLUMNS``."""
    res = wh.query(
        "SELECT bin, posts, commented_posts, mean_depth, median_depth, mean_depth_commented, mean_repliers, "
        f"mean_repliers_commented FROM superminds_depth_by_popularity WHERE society = {quoted(society)}"
    )
    by_bin = {int(r[0]): r[1:] for r in res.rows}
    rows: list[list[Cell]] = []
    for b, label in enumerate(BINS):
        r = by_bin.get(b)
        if r is None:
            rows.append([label, 0, 0, None, None, None, None, None])
            continue
        commented = int(r[1])
        vals = [float(v) for v in r[2:]]
        rows.append(
            [
                label,
                int(r[0]),
                commented,
                vals[0],
                vals[1],
                vals[2] if commented else None,
                vals[3],
                vals[4] if commented else None,
            ]
        )
    return rows


DEPTH_COLUMNS = [
    "upvotes",
    "posts",
    "posts with comments",
    "mean depth",
    "median depth",
    "mean depth (posts with comments)",
    "mean unique repliers",
    "mean unique repliers (posts with comments)",
]


def depth_items(wh: Warehouse, society: str) -> list[Item]:
    rows = depth_rows(wh, society)
    empty = "no posts in this society" if not any(r[1] for r in rows) else None
    top = rows[-1]
    no_top = None if top[1] else "no post with 8+ upvotes"
    x = [float(i) for i in range(len(BINS))]
    return [
        Table(
            "superminds.depth_by_popularity",
            "Thread depth and unique repliers by post popularity (upvote bins; Superminds Figure 5, left)",
            DEPTH_COLUMNS,
            rows,
            empty,
        ),
        Figure(
            "superminds.figure5_left",
            "Thread depth and unique repliers by upvotes (Superminds Figure 5, left)",
            "upvotes",
            "mean per post",
            [
                Series("mean thread depth", x, [_f(r[3]) for r in rows], "points"),
                Series("mean unique repliers", x, [_f(r[6]) for r in rows], "points"),
            ],
            empty,
            x_kind="category",
            categories=list(BINS),
        ),
        Scalar(
            "superminds.depth_8plus",
            "Mean thread depth of posts with 8+ upvotes",
            _f(top[3]),
            no_top,
            published=1.5,
            published_source=FIG5,
        ),
        Scalar(
            "superminds.repliers_8plus",
            "Mean unique repliers of posts with 8+ upvotes",
            _f(top[6]),
            no_top,
            published=9.8,
            published_source=FIG5,
        ),
        *top_bin_cis(wh, society, no_top),
        *figure5_readings(wh, society),
    ]


FIG5_VARIANTS = {
    # key: (label, which posts, depth column or None, repliers column or None)
    "commented": ("posts with 8+ upvotes and at least one comment", "upvotes", "depth", "repliers"),
    "comment_depth": (
        "depth = the mean depth of the post's comments, not its deepest",
        "upvotes",
        "mcd",
        None,
    ),
    "other_repliers": ("repliers other than the post's author", "upvotes", None, "other"),
    "score": ("posts with a score (upvotes - downvotes) of 8+", "score", "depth", "repliers"),
}
NULL_DRAWS = 1_000


def figure5_readings(wh: Warehouse, society: str) -> list[Item]:
    """The 8+ bin's mean depth and repliers under the other readings of the paper's text (labelled
    variants, each with a bootstrap CI), and their null: the same number of posts drawn at random, i.e.
    popularity shuffled among the posts (``NULL_DRAWS`` seeded draws; median and 95% range)."""
    rows = wh.query(
        "SELECT upvotes, downvotes, comments, depth, repliers, mean_comment_depth, other_repliers "
        f"FROM superminds_posts WHERE society = {quoted(society)} ORDER BY post_id"
    ).rows
    a = np.asarray(rows, dtype=np.float64).reshape(-1, 7)
    up, down, comments = a[:, 0], a[:, 1], a[:, 2]
    cols = {"depth": a[:, 3], "repliers": a[:, 4], "mcd": a[:, 5], "other": a[:, 6]}
    out: list[Item] = []
    for name, (what, by, depth_col, repl_col) in FIG5_VARIANTS.items():
        top = (up >= 8) if by == "upvotes" else (up - down >= 8)
        if name == "commented":
            top &= comments > 0
        why = None if top.any() else f"no post in this reading ({what})"
        for quantity, col, seed in (("depth_8plus", depth_col, 3), ("repliers_8plus", repl_col, 4)):
            if col is None:
                continue
            vals = cols[col][top]
            key = f"superminds.variant_{name}.{quantity}"
            label = (
                f"variant: {what}: mean {'thread depth' if quantity == 'depth_8plus' else 'unique repliers'}"
            )
            out.append(Scalar(key, label, float(vals.mean()) if vals.size else None, why))
            out += ci_scalars(key, label, bootstrap_values(vals, seed=seed), why)
    n_top = int((up >= 8).sum())
    rng = np.random.default_rng(5)
    why_null = None if n_top and up.size > n_top else "no post with 8+ upvotes, or no other post"
    for quantity, col in (("depth_8plus", "depth"), ("repliers_8plus", "repliers")):
        label = f"null (popularity shuffled among the posts, {NULL_DRAWS} seeded draws of {n_top} posts)"
        draws = (
            [float(cols[col][rng.choice(up.size, n_top, replace=False)].mean()) for _ in range(NULL_DRAWS)]
            if why_null is None
            else []
        )
        q = np.percentile(draws, [2.5, 50, 97.5]) if draws else [None] * 3
        key = f"superminds.null_{quantity}"
        out += [
            Scalar(key, f"{label}: mean {quantity.removesuffix('_8plus')}, median", _opt(q[1]), why_null),
            Scalar(f"{key}_ci_low", f"{label}: 2.5%", _opt(q[0]), why_null),
            Scalar(f"{key}_ci_high", f"{label}: 97.5%", _opt(q[2]), why_null),
        ]
    return out


def _opt(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


def top_bin_cis(wh: Warehouse, society: str, no_top: str | None) -> list[Item]:
    """Bootstrap 95% CIs (posts resampled) of the 8+ bin's mean depth and mean unique repliers."""
    rows = wh.query(
        f"SELECT depth, repliers FROM superminds_posts WHERE society = {quoted(society)} AND bin = 4 "
        "ORDER BY post_id"
    ).rows
    depth = [float(r[0]) for r in rows]
    repliers = [float(r[1]) for r in rows]
    return [
        *ci_scalars(
            "superminds.depth_8plus", "Mean thread depth, 8+ upvotes", bootstrap_values(depth, seed=1), no_top
        ),
        *ci_scalars(
            "superminds.repliers_8plus",
            "Mean unique repliers, 8+ upvotes",
            bootstrap_values(repliers, seed=2),
            no_top,
        ),
    ]


def _f(v: Cell) -> float | None:
    return float(v) if isinstance(v, int | float) else None


# --- the judge -------------------------------------------------------------------------------------------


def judge_config(s: Settings) -> sj.JudgeConfig | str:
    """The configured judge, or why there is none (a sentence saying how to enable it)."""
    if s.report_judge_comments == 0:
        return "the LLM judge is off (SOCIETY_REPORT_JUDGE_COMMENTS=0)"
    url: str | None = s.llm_base_urls[0] if s.llm_base_urls else None  # the judge uses the first server
    if not url:
        url = model_server_url(s)
    how = (
        "set SOCIETY_LLM_BASE_URL to an OpenAI-compatible API (…/v1; SOCIETY_LLM_API_KEY, SOCIETY_LLM_MODELS "
        "for its key and model), or run the society with LLM agents so that its local model server runs"
    )
    if not url:
        return f"no model server to judge replies with: {how}"
    why = sj.reachable(str(url), s.llm_api_key)
    if why is not None:
        return f"the model server at {url} does not answer ({why}): start it, or {how}"
    return sj.JudgeConfig(str(url), s.model_names[0], s.llm_api_key, s.llm_json_schema, s.llm_timeout_seconds)


def sample_replies(wh: Warehouse, society: str, n: int, seed: int) -> list[list[object]]:
    """A seeded sample of ``n`` comments with their post: (comment_id, post_id, author, text, post title,
    post text, upvote bin), ordered by post. The sample: the ``n`` smallest cityHash64 of seed:comment_id."""
    q = quoted(society)
    return wh.query(
        "SELECT c.comment_id, c.post_id, c.actor, c.content, p.title, p.content, ifNull(sp.bin, 0) "
        "FROM (SELECT comment_id, any(post_id) AS post_id, any(actor) AS actor, any(content) AS content "
        f"      FROM events FINAL WHERE society = {q} AND type = 'comment_created' GROUP BY comment_id "
        f"      ORDER BY cityHash64(concat('{int(seed)}:', comment_id)), comment_id LIMIT {int(n)}) AS c "
        "INNER JOIN (SELECT post_id, any(title) AS title, any(content) AS content FROM events FINAL "
        f"      WHERE society = {q} AND type = 'post_created' GROUP BY post_id) AS p "
        "      ON c.post_id = p.post_id "
        f"LEFT JOIN (SELECT post_id, bin FROM superminds_posts WHERE society = {q}) AS sp "
        "      ON c.post_id = sp.post_id "
        "ORDER BY c.post_id, c.comment_id"
    ).rows


def rate_replies(cfg: sj.JudgeConfig, rows: list[list[object]]) -> tuple[list[tuple[int, int]], int]:
    """((bin, score) per rated reply, replies the judge failed to rate). One call per post and up to 15 of
    its sampled replies."""
    by_post: dict[str, list[list[object]]] = defaultdict(list)
    for r in rows:
        by_post[str(r[1])].append(r)
    calls: list[sj.Call] = []
    batches: list[tuple[list[str], int]] = []
    for post_rows in by_post.values():
        for start in range(0, len(post_rows), sj.PER_CALL):
            chunk = post_rows[start : start + sj.PER_CALL]
            replies = [
                sj.ReplyText(sj.reply_id(str(r[0]), k), str(r[2]), str(r[3])) for k, r in enumerate(chunk, 1)
            ]
            if len({x.id for x in replies}) < len(replies):  # ids must tell the replies apart
                replies = [sj.ReplyText(f"r{k}", x.author, x.content) for k, x in enumerate(replies, 1)]
            calls.append(sj.relevance_call(str(chunk[0][4]), str(chunk[0][5]), replies))
            batches.append(([x.id for x in replies], int(chunk[0][6])))  # type: ignore[call-overload]
    answers = sj.complete_all(cfg, calls)
    rated: list[tuple[int, int]] = []
    failed = 0
    for (ids, b), text in zip(batches, answers, strict=True):
        got = sj.parse_ratings(text, ids) if text is not None else "the call failed"
        if isinstance(got, str):
            log.info("superminds.judge_rejected", reason=got, replies=len(ids))
            failed += len(ids)
        else:
            rated.extend((b, got[i]) for i in ids)
    return rated, failed


def relevance_items(rated: list[tuple[int, int]], failed: int, model: str) -> list[Item]:
    """Score shares per bin (table and figure) and the overall RRR, RRS, mean and share >= 4."""
    n = len(rated)
    why = None if n else f"the judge rated none of the sampled replies ({failed} failed)"
    scores = [s for _b, s in rated]
    by_bin: dict[int, list[int]] = defaultdict(list)
    for b, s in rated:
        by_bin[b].append(s)
    rows: list[list[Cell]] = []
    for b, label in enumerate(BINS):
        ss = by_bin.get(b, [])
        c = Counter(ss)
        shares: list[Cell] = [c[k] / len(ss) if ss else None for k in range(6)]
        rows.append([label, len(ss), *shares, sum(ss) / len(ss) if ss else None])
    who = f"judge {model}; the paper's: gpt-5-mini"

    def share(pred: int) -> float | None:
        return sum(1 for s in scores if s >= pred) / n if n else None

    x = [float(k) for k in range(6)]
    return [
        Scalar("superminds.reply_quality.rated", f"Replies rated 0-5 ({who})", n),
        Scalar("superminds.reply_quality.failed", "Sampled replies the judge failed to rate", failed),
        Scalar(
            "superminds.reply_quality.mean", "Mean reply rating (0-5)", sum(scores) / n if n else None, why
        ),
        Scalar(
            "superminds.reply_quality.rrr",
            "Reply-to-Reply Relevance: share of replies rated >= 1",
            share(1),
            why,
        ),
        Scalar(
            "superminds.reply_quality.rrs",
            "Reply-to-Source Relevance: share of replies rated >= 3",
            share(3),
            why,
        ),
        Scalar(
            "superminds.reply_quality.substantive", "Share of replies rated >= 4 (substantive)", share(4), why
        ),
        Table(
            "superminds.reply_quality",
            f"Reply ratings by upvote bin: share of each score (Superminds Figure 5, right; {who})",
            ["upvotes", "rated", *(f"{k} {lab}" for k, lab in enumerate(sj.SCORE_LABELS)), "mean"],
            rows,
            why,
        ),
        Figure(
            "superminds.figure5_right",
            f"Reply rating distribution by upvote bin (Superminds Figure 5, right; {who})",
            "rating",
            "share of rated replies",
            [
                Series(f"{label} upvotes", x, list(_floats(rows[b][2:8])), "bars")
                for b, label in enumerate(BINS)
            ],
            why,
            x_kind="category",
            categories=[f"{k} {lab}" for k, lab in enumerate(sj.SCORE_LABELS)],
        ),
    ]


def _floats(cells: list[Cell]) -> list[float | None]:
    return [float(c) if isinstance(c, int | float) else None for c in cells]


def relevance_items_missing(reason: str) -> list[Item]:
    return [
        Scalar("superminds.reply_quality.rated", "Replies rated 0-5 by the LLM judge", None, reason),
        Scalar(
            "superminds.reply_quality.rrr",
            "Reply-to-Reply Relevance: share of replies rated >= 1",
            None,
            reason,
        ),
        Scalar(
            "superminds.reply_quality.rrs",
            "Reply-to-Source Relevance: share of replies rated >= 3",
            None,
            reason,
        ),
        Table(
            "superminds.reply_quality",
            "Reply ratings by upvote bin (Superminds Figure 5, right)",
            [],
            [],
            reason,
        ),
    ]


# --- comment-quality categories on Tier I probe replies ----------------------------------------------------


def probe_comments(s: Settings, wh: Warehouse, society: str) -> list[tuple[str, str, str, str, str, str]]:
    """(comment id, question, answer type, correct answer, author, text) of every external reply to the
    Tier I probes of this society's probe runs."""
    out = []
    for path in sorted(Path(run_dir(s, society)).glob("*.json")):
        try:
            run = load_run(path)
        except ProbeError:
            continue
        tier1 = [p for p in run.probes if p.get("tier") == 1]
        if not tier1:
            continue
        agents = run.agents
        by_post = replies(wh, run)
        for p in tier1:
            meta = p.get("meta") or {}
            kind = str(p.get("answer_type") or meta.get("answer_type") or "exactMatch")
            for r in by_post.get(str(p["post_id"]), []):
                if r.actor not in agents:
                    question = str(p.get("question") or p.get("title") or "")  # older runs: the title
                    out.append((r.comment_id, question, kind, str(p["answer"]), r.actor, r.content))
    return out


def category_items(s: Settings, wh: Warehouse, society: str, cfg: sj.JudgeConfig | str) -> list[Item]:
    """Counts and shares of the five categories among a seeded sample of Tier I probe replies."""
    if isinstance(cfg, str):
        return category_items_missing(cfg)
    comments = probe_comments(s, wh, society)
    if not comments:
        return category_items_missing(
            "no external reply to a Tier I probe in this society's probe runs (`society probe` posts them)"
        )
    rng = random.Random(s.seed)
    sample = sorted(rng.sample(comments, min(len(comments), s.report_judge_comments)))
    answers = sj.complete_all(cfg, [sj.quality_call(*c[1:]) for c in sample])
    cats = [sj.parse_category(a) if a is not None else None for a in answers]
    got = Counter(c for c in cats if c is not None)
    n = sum(got.values())
    why = None if n else f"the judge classified none of the {len(sample)} sampled replies"
    rows: list[list[Cell]] = [[c, got[c], got[c] / n if n else None] for c in sj.CATEGORIES]
    return [
        Scalar("superminds.comment_quality.rated", f"Tier I replies classified (judge {cfg.model})", n),
        Scalar(
            "superminds.comment_quality.failed",
            "Sampled Tier I replies the judge failed to classify",
            len(sample) - n,
        ),
        Table(
            "superminds.comment_quality",
            "Comment-quality categories of Tier I probe replies "
            f"(Superminds appendix 7.4; judge {cfg.model}, the paper's: gpt-5-mini)",
            ["category", "replies", "share"],
            rows,
            why,
        ),
    ]


def category_items_missing(reason: str) -> list[Item]:
    return [
        Scalar(
            "superminds.comment_quality.rated", "Tier I replies classified by the LLM judge", None, reason
        ),
        Table(
            "superminds.comment_quality", "Comment-quality categories of Tier I probe replies", [], [], reason
        ),
    ]


# --- published ---------------------------------------------------------------------------------------------


REPLY_RATINGS_ROW = "reply ratings"
"""The published table's row on the judge's ratings (dropped on synthetic text: ``report.text_source``)."""


def published_table() -> Table:
    return Table(
        "superminds.published",
        "The paper's values (Li et al.'s crawl) for the figures above",
        ["quantity", "published", "source"],
        [
            ["mean thread depth, every upvote bin", "0.8-1.2", PAPER + ", Figure 5 caption"],
            ["mean thread depth, 8+ upvotes", 1.5, PAPER + ", section 4.3"],
            ["median post's thread depth", "below 1.1", PAPER + ", section 4.3"],
            ["unique repliers, 8+ upvotes", 9.8, PAPER + ", Figure 5 caption"],
            [REPLY_RATINGS_ROW, "mostly 0-2 in every bin; >= 4 a small fraction", PAPER + ", section 4.3"],
        ],
    )


def items(wh: Warehouse, society: str) -> list[Item]:
    """Figure 5 (left), the judged ratings and categories (or why not), and the paper's values."""
    s = get_settings()
    cfg = judge_config(s)
    out = depth_items(wh, society)
    if isinstance(cfg, str):
        out += [*relevance_items_missing(cfg), *category_items_missing(cfg)]
    else:
        rows = sample_replies(wh, society, s.report_judge_comments, s.seed)
        if rows:
            out += relevance_items(*rate_replies(cfg, rows), cfg.model)
        else:
            out += relevance_items_missing("no comments to rate in this society")
        out += category_items(s, wh, society, cfg)
    out.append(published_table())
    return out
