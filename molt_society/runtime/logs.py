"""Structured logging: structlog, JSON when not on a terminal, console renderer otherwise."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "info", json: bool | None = None, stream: object | None = None) -> None:
    """Configure structlog and the standard library logger once per process."""
    out = stream if stream is not None else sys.stderr
    use_json = json if json is not None else not getattr(out, "isatty", lambda: False)()
    lvl = logging.getLevelName(level.upper())
    if not isinstance(lvl, int):
        lvl = logging.INFO
    logging.basicConfig(level=lvl, stream=out, format="%(message)s")  # type: ignore[arg-type]
    for noisy in ("aiokafka", "faust", "mode", "kafka"):
        logging.getLogger(noisy).setLevel(max(lvl, logging.WARNING))
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=out),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A named structured logger."""
    return structlog.get_logger(name)  # type: ignore[no-any-return]
