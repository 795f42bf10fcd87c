"""The report's embeddings on ONNX Runtime equal sentence-transformers' on torch, text by text."""

from __future__ import annotations

import numpy as np
import pytest

from molt_society.bench.embeddings import post_texts
from molt_society.report.embeddings import Encoder


@pytest.fixture(scope="module")
def texts() -> list[str]:
    real = post_texts(40)
    long = " ".join(real)  # far beyond the model's 256 tokens: truncated alike
    return [*real, long, "", "   padded   ", "émojis 🦞 and ünïcode", "x"]


def test_onnx_vectors_equal_torch(texts: list[str]) -> None:
    onnx, torch = Encoder("onnx"), Encoder("torch")
    a = onnx.encode(texts)
    b = torch.encode(texts, batch_size=16)
    assert (onnx.runtime, torch.runtime) == ("onnx", "torch")
    assert a.shape == b.shape == (len(texts), 384)
    assert np.abs(a - b).max() < 1e-5
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    # the order of the input is kept although batches are taken longest first
    assert np.abs(onnx.encode(texts[::-1])[::-1] - a).max() < 1e-5
    # a batch size changes the padding, not the vectors
    assert np.abs(onnx.encode(texts, batch_size=3) - a).max() < 1e-5


def test_cuda_asked_without_a_device_is_a_clear_error() -> None:
    import torch

    if torch.cuda.is_available():  # pragma: no cover - a GPU machine: then it must work
        assert Encoder("cuda").encode(["a text"]).shape == (1, 384)
        return
    with pytest.raises(RuntimeError, match="no CUDA device"):
        Encoder("cuda").encode(["a text"])
