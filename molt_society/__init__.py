"""molt-society: an event-sourced LLM-agent society (Kafka events, Faust stream processors, ClickHouse).

The code lives in the top-level folders the project was designed with (``schemas/``, ``streams/``,
``agents/``, ...); this package links to them so that the installed distribution is one import name,
``molt_society``, and nothing else. Import ``molt_society.<layer>.<module>``, never the bare folder name
(``tests/unit/test_layers.py`` fails on a bare import). The layers and the order they stand in are written
once, in ``pyproject.toml`` under ``[tool.importlinter]``.
"""
