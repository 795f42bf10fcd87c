"""molt-society: an event-sourced LLM-agent society (Kafka events, Faust stream processors, ClickHouse).

The layers the project was designed with are its subpackages (``molt_society/schemas/``,
``molt_society/streams/``, ``molt_society/agents/``, ...): one import name, ``molt_society``, and nothing
else. The layers and the order they stand in are written once, in ``pyproject.toml`` under
``[tool.importlinter]``.
"""

from typing import Any

__all__ = ["ReportFrames", "Store", "StoreNotFound", "open_store", "run_experiment", "run_society"]


def __getattr__(name: str) -> Any:
    """The notebook library (``society/library.py``), imported on first use: ``import molt_society.x``
    stays as light as the module it names."""
    if name in __all__:
        from molt_society.society import library

        return getattr(library, name)
    raise AttributeError(f"module 'molt_society' has no attribute {name!r}")
