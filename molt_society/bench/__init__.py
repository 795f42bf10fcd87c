"""Benchmarks of the pipeline: ``python -m molt_society.bench.pipeline`` (see BENCHMARKS.md).

The benchmarks (each ``python -m molt_society.bench.<name>``): ``pipeline`` (with ``pipeline_latency``,
``pipeline_results``, ``pipeline_report``), ``dashboard``, ``report``, ``crawl_report``, ``llm``,
``llm_rate``, ``scale``, ``startup``, ``broker_memory``; ``producer`` is the producer process they start.

Their harness: ``harness`` (work directory, broker, the stack's processes, the sink's health),
``processes`` (spawning, stopping, memory sampling), ``society_run`` (``society`` as a user runs it),
``loading`` (a dataset stored through the local stack), ``dataset`` (MoltBook-shaped events),
``highwater`` (records in topics), ``child_logs`` (the children's JSON logs), ``stats``, ``profiling``,
``machine`` (where and how a run ran), ``markdown`` (each benchmark's section of BENCHMARKS.md),
``report_steps`` (the report benchmarks' timing).
"""
