"""Benchmarks of the pipeline: ``python -m bench.pipeline`` (see BENCHMARKS.md)."""
