"""``python -m molt_society.bench.embeddings``: texts/s of the report's embedding model against the batch
size of a forward pass, on real MoltBook posts.

The texts: the posts of the shared observatory export (``posts_raw.json``), title and body as the report
embeds them, distinct, shuffled with a fixed seed, the first ``--texts``. Each batch size encodes all of
them once per round, the sizes in turn and the rounds repeated (``--rounds``), so a machine that speeds up
or slows down during the run touches every size alike; the table gives each round's texts/s. The report
uses ``report.embeddings.ENCODE_BATCH``. Results go to the terminal and to BENCHMARKS.md between the
``embeddings`` markers (``--no-write`` leaves the file alone). A benchmark, not a test: no assertion.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from molt_society.bench.machine import run_facts
from molt_society.bench.markdown import markers, md_table, publish
from molt_society.bench.report import real_post_texts
from molt_society.report.embeddings import ENCODE_BATCH, Encoder

BEGIN, END = markers("embeddings")
SIZES = (8, 16, 32, 64)


def post_texts(count: int) -> list[str]:
    """``count`` distinct real post texts (title and body), shuffled with seed 1."""
    texts = sorted(set(real_post_texts()))
    random.Random(1).shuffle(texts)
    return texts[:count]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m molt_society.bench.embeddings", description=__doc__)
    parser.add_argument("--texts", type=int, default=600, help="real post texts to encode (default 600)")
    parser.add_argument("--rounds", type=int, default=2, help="times every batch size is measured")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    facts = run_facts("python -m molt_society.bench.embeddings", argv)
    texts = post_texts(args.texts)
    enc = Encoder()
    enc.encode(texts[:20])  # load the model
    rates: dict[int, list[float]] = {b: [] for b in SIZES}
    for _ in range(args.rounds):
        for size in SIZES:
            began = time.perf_counter()
            enc.encode(texts, batch_size=size)
            rates[size].append(len(texts) / (time.perf_counter() - began))
    chars = sum(len(t) for t in texts) / max(1, len(texts))
    rows = [
        [f"{b}{' (the report)' if b == ENCODE_BATCH else ''}", *(f"{r:.1f}" for r in rates[b])] for b in SIZES
    ]
    block = "\n".join(
        [
            BEGIN,
            "## Embeddings: batch size",
            "",
            f"`{facts['command']}` on {facts['machine']}, {facts['date']}. all-MiniLM-L6-v2 (sentence-"
            f"transformers on torch, CPU) encoding {len(texts):,} distinct real MoltBook posts of the "
            f"observatory export ({chars:.0f} characters on average), every batch size once per round, "
            "in turn:",
            "",
            md_table(["batch size", *(f"texts/s, round {i + 1}" for i in range(args.rounds))], rows),
            "",
            END,
            "",
        ]
    )
    publish(block, args.out, not args.no_write, BEGIN, END)


if __name__ == "__main__":
    main()
