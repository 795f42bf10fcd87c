"""``python -m molt_society.bench.embeddings``: texts/s of the report's embedding model by runtime and batch
size, on the real MoltBook crawl's texts.

The texts: the distinct posts (title and body) and comments of the shared crawl
(``crawl-2026-01-31/``, 57,076 texts, as the report's ``texts`` view forms them), shuffled with a fixed
seed, the first ``--texts``: the texts the report's 22 texts/s was measured on (BENCHMARKS.md, the crawl
report). Each configuration (runtime, batch size) encodes all of them once per round, the configurations
in turn and the rounds repeated (``--rounds``), so a machine that speeds up or slows down during the run
touches each alike; the table gives each round's texts/s, its ratio to torch at batch 16 (the report's
runtime before ONNX) in the same round, and the largest difference of any vector component from torch's.
A CUDA row is added when torch sees a GPU. Results go to the terminal and to BENCHMARKS.md between the
``embeddings`` markers (``--no-write`` leaves the file alone). A benchmark, not a test: no assertion.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from molt_society.bench.machine import run_facts
from molt_society.bench.markdown import markers, md_table, publish
from molt_society.bench.report import real_post_texts
from molt_society.report.embeddings import BATCH_BY_RUNTIME, Encoder, FloatMatrix

BEGIN, END = markers("embeddings")
CRAWL = Path(__file__).resolve().parents[3] / "shared" / "data" / "moltbook" / "crawl-2026-01-31"
BASELINE = ("torch", 16)


def post_texts(count: int) -> list[str]:
    """``count`` distinct real post texts of the observatory export (title and body), shuffled (seed 1)."""
    texts = sorted(set(real_post_texts()))
    random.Random(1).shuffle(texts)
    return texts[:count]


def crawl_texts(count: int) -> list[str]:
    """``count`` distinct texts of the crawl (posts: title and body trimmed; comments), shuffled (seed 1)."""
    from molt_society.importers import import_path
    from molt_society.schemas.events import CommentCreated, PostCreated

    found: set[str] = set()
    for path in sorted(CRAWL.glob("*.tar.gz")):
        for e in import_path(path, "s").events:
            if isinstance(e, PostCreated):
                found.add(f"{e.body.title}\n{e.body.content}".strip())
            elif isinstance(e, CommentCreated):
                found.add(e.body.content)
    texts = sorted(t for t in found if t)
    random.Random(1).shuffle(texts)
    return texts[:count]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m molt_society.bench.embeddings", description=__doc__)
    parser.add_argument("--texts", type=int, default=1000, help="crawl texts to encode (default 1,000)")
    parser.add_argument("--rounds", type=int, default=2, help="times every configuration is measured")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    facts = run_facts("python -m molt_society.bench.embeddings", argv)
    texts = crawl_texts(args.texts)
    encoders = {"torch": Encoder("torch"), "onnx": Encoder("onnx")}
    configs = [("torch", 8), ("torch", 16), ("onnx", 8), ("onnx", 16), ("onnx", 32)]
    import torch

    if torch.cuda.is_available():
        encoders["cuda"] = Encoder("cuda")
        configs.append(("cuda", BATCH_BY_RUNTIME["cuda"]))
    for enc in encoders.values():
        enc.encode(texts[:20])  # load the model (and export it, for ONNX)
    rates: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    vectors: dict[tuple[str, int], FloatMatrix] = {}
    for _ in range(args.rounds):
        for runtime, size in configs:
            began = time.perf_counter()
            vectors[(runtime, size)] = encoders[runtime].encode(texts, batch_size=size)
            rates[(runtime, size)].append(len(texts) / (time.perf_counter() - began))
            print(f"{runtime} batch {size}: {rates[(runtime, size)][-1]:.1f} texts/s", flush=True)
    chars = sum(len(t) for t in texts) / max(1, len(texts))
    base = vectors[BASELINE]
    rows = []
    for c in configs:
        runtime, size = c
        marks = [f"{size}"]
        if size == BATCH_BY_RUNTIME[runtime]:
            marks.append("(this runtime's default)")
        ratios = [r / b for r, b in zip(rates[c], rates[BASELINE], strict=True)]
        rows.append(
            [
                runtime,
                " ".join(marks),
                *(f"{r:.1f}" for r in rates[c]),
                " / ".join(f"{x:.2f}" for x in ratios),
                f"{float(np.abs(vectors[c] - base).max()):.1e}",
            ]
        )
    block = "\n".join(
        [
            BEGIN,
            "## Embeddings: runtime and batch size",
            "",
            f"`{facts['command']}` on {facts['machine']}, {facts['date']}. all-MiniLM-L6-v2 encoding "
            f"{len(texts):,} distinct texts of the real MoltBook crawl (posts and comments, {chars:.0f} "
            "characters on average): sentence-transformers on torch's CPU, and the same model exported to "
            "ONNX Runtime (`report.encoder_onnx`); every configuration once per round, in turn. Ratio = "
            f"texts/s over torch at batch {BASELINE[1]} (the report's runtime before ONNX) in the same "
            "round; largest difference = the largest difference of a vector component from torch at batch "
            f"{BASELINE[1]} (the vectors are unit length). The report runs ONNX at batch 8 on a CPU.",
            "",
            md_table(
                [
                    "runtime",
                    "batch size",
                    *(f"texts/s, round {i + 1}" for i in range(args.rounds)),
                    "ratio per round",
                    "largest difference",
                ],
                rows,
            ),
            "",
            END,
            "",
        ]
    )
    publish(block, args.out, not args.no_write, BEGIN, END)


if __name__ == "__main__":
    main()
