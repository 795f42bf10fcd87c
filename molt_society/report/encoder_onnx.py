"""all-MiniLM-L6-v2 on ONNX Runtime: the same weights and the same vectors, about twice as fast on a CPU.

The loaded sentence-transformers model's transformer is exported to ONNX (``torch.onnx.export``, eager
attention, a private temporary folder, about a second) and run by ONNX Runtime; the rest of the model's
pipeline is done here as sentence-transformers does it: its own tokenisation (``preprocess``: stripping,
truncation at the model's ``max_seq_length``), mean pooling over the attention mask, L2 normalisation. The
vectors equal the torch model's to about 1e-6 (``tests/unit/report/test_encoder_onnx.py``); BENCHMARKS.md,
"Embeddings: runtime", has the speeds. Only a model made of exactly those three modules (Transformer, mean
Pooling, Normalize) is exported; any other raises ``Unsupported``.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float32]
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class Unsupported(RuntimeError):
    """The model is not a transformer + mean pooling + normalisation, or ONNX Runtime is missing."""


def _check_pipeline(model: Any) -> None:
    names = [type(m).__name__ for m in model]
    if names != ["Transformer", "Pooling", "Normalize"]:
        raise Unsupported(f"modules {names}, expected Transformer, Pooling, Normalize")
    pooling = model[1]
    mode = getattr(pooling, "pooling_mode", None)
    if mode is None and hasattr(pooling, "get_pooling_mode_str"):  # sentence-transformers < 6
        mode = pooling.get_pooling_mode_str()
    if mode != "mean":
        raise Unsupported(f"pooling {mode!r}, expected 'mean'")


def _tokenize(model: Any, texts: list[str]) -> dict[str, Any]:
    """sentence-transformers' own tokenisation (``preprocess``; ``tokenize`` before version 6)."""
    prep = getattr(model, "preprocess", None) or model.tokenize
    return prep(texts)  # type: ignore[no-any-return]


def _wrapped(hf: Any) -> Any:
    """``forward(input_ids, attention_mask, token_type_ids) -> last_hidden_state`` of a Hugging Face model."""
    import torch

    class Transformer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hf = hf

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.hf(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    return Transformer().eval()


def _export(model: Any, path: Path) -> None:
    """Write the model's transformer to ``path`` as ONNX, with eager attention (ONNX Runtime fuses it)."""
    import torch

    hf = model[0].auto_model
    before = getattr(hf.config, "_attn_implementation", None)
    _set_attention(hf, "eager")
    try:
        sample = _tokenize(model, ["an example", "another, longer example text"])
        args = tuple(sample[k] for k in INPUTS)
        axes = {0: "batch", 1: "tokens"}
        with warnings.catch_warnings():  # the exporter's deprecation and tracer notes are not the user's
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _wrapped(hf),
                args,
                str(path),
                input_names=list(INPUTS),
                output_names=["hidden"],
                dynamic_axes={**{k: axes for k in INPUTS}, "hidden": axes},
                opset_version=17,
                dynamo=False,
            )
    finally:
        if before is not None:
            _set_attention(hf, before)


def _set_attention(hf: Any, kind: str) -> None:
    if hasattr(hf, "set_attn_implementation"):
        hf.set_attn_implementation(kind)
    else:  # transformers before set_attn_implementation
        hf.config._attn_implementation = kind


class OnnxEncoder:
    """Encodes as ``SentenceTransformer.encode(..., normalize_embeddings=True)`` does, on ONNX Runtime."""

    def __init__(self, model: Any) -> None:
        _check_pipeline(model)
        try:
            import onnxruntime as ort
        except ImportError as exc:  # a dependency of the project; missing only in a broken install
            raise Unsupported(f"onnxruntime is not installed ({exc})") from exc
        self._model = model
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only
        with tempfile.TemporaryDirectory(prefix="society-onnx-") as tmp:
            path = Path(tmp) / "model.onnx"
            _export(model, path)
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: Sequence[str], batch_size: int) -> FloatMatrix:
        model = self._model
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        out = np.zeros((len(texts), dim()), dtype=np.float32)
        # longest first, as sentence-transformers orders them: each batch pads to similar lengths
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            batch = _tokenize(self._model, [texts[i] for i in idx])
            feed = {k: batch[k].numpy().astype(np.int64, copy=False) for k in INPUTS}
            (hidden,) = self._session.run(["hidden"], feed)
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[idx] = pooled / norms
        return out
