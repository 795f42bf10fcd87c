"""``python -m streams --society NAME --bootstrap HOST:PORT``: run one stream worker until stopped."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile

import faust

from society.logs import configure_logging, tune_gc
from society.settings import get_settings
from streams.app import create_app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams", description=__doc__)
    parser.add_argument("--society", required=True)
    parser.add_argument("--bootstrap", required=True)
    args = parser.parse_args(argv)
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    tune_gc()
    loop: asyncio.AbstractEventLoop
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    data_dir = tempfile.mkdtemp(prefix=f"faust-{args.society}-")
    app = create_app(settings, args.bootstrap, args.society, data_dir=data_dir)
    worker = faust.Worker(app, loglevel=settings.log_level, loop=loop, redirect_stdouts=False, quiet=True)
    try:
        worker.execute_from_commandline()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
