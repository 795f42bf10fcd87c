"""What persists a society: the ClickHouse sink (``python -m molt_society.sinks``), its schema and its query
endpoint.

``sinks.clickhouse``: connecting, ``tables.sql``, Kafka records -> rows. ``sinks.consumer``: the
at-least-once consumer with effectively-once rows, and its HTTP endpoint. See ``sinks/README.md``.
"""
