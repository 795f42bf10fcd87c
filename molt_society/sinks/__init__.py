"""What persists a society: the ClickHouse sink (``python -m molt_society.sinks``) and its query endpoint.

``sinks.clickhouse``: Kafka records -> rows, and which topic goes to which table. ``sinks.consumer``: the
at-least-once consumer with effectively-once rows, wiring ``sinks.batching`` (batches, inserts, commits),
``sinks.resume`` (where each partition resumes), ``sinks.store`` (the insert thread) and ``sinks.serving``
(the HTTP endpoints and ``sink.json``). See ``sinks/README.md``.
"""
