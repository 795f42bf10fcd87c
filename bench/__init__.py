"""Benchmarks of the pipeline: ``python -m molt_society.bench.pipeline`` (see BENCHMARKS.md)."""
