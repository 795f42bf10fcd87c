"""Experiment helper, not part of the benchmark: garbage-collector time and settings for child processes.

Put this directory on ``PYTHONPATH`` and every Python process started with that environment (the
benchmark passes its environment to the stream worker, the sink and the producer) loads it at start:

- it measures the time spent in the cyclic garbage collector (``gc.callbacks``) and writes a
  ``GCPROBE`` line to stderr every 10 s of collections and at exit (in the children's logs);
- ``GCPROBE_MODE=threshold`` sets ``gc.set_threshold(100_000, 50, 100)``;
  ``GCPROBE_MODE=freeze`` calls ``gc.freeze()`` every 5 s.

    PYTHONPATH=$PWD/molt_society/bench/gcprobe GCPROBE_MODE=threshold \\
        .venv/bin/python -m molt_society.bench.pipeline --skip ceiling sink latency --keep
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
import time
from typing import Any

_started = time.perf_counter()
_cpu0 = time.process_time()
_t0 = 0.0
_last = _started
_total = 0.0
_count = [0, 0, 0]
_seconds = [0.0, 0.0, 0.0]


def _report() -> None:
    sys.stderr.write(
        f"GCPROBE pid={os.getpid()} wall={time.perf_counter() - _started:.1f} "
        f"cpu={time.process_time() - _cpu0:.1f} gc={_total:.2f}s collections={_count} "
        f"seconds_per_generation={[round(s, 2) for s in _seconds]}\n"
    )
    sys.stderr.flush()


def _callback(phase: str, info: dict[str, Any]) -> None:
    global _t0, _last, _total
    now = time.perf_counter()
    if phase == "start":
        _t0 = now
        return
    generation = int(info["generation"])
    _count[generation] += 1
    _seconds[generation] += now - _t0
    _total += now - _t0
    if now - _last > 10:
        _last = now
        _report()


def _freezer() -> None:
    while True:
        time.sleep(5)
        gc.freeze()


gc.callbacks.append(_callback)
atexit.register(_report)
_mode = os.environ.get("GCPROBE_MODE", "")
if _mode == "threshold":
    gc.set_threshold(100_000, 50, 100)
elif _mode == "freeze":
    threading.Thread(target=_freezer, daemon=True, name="gcprobe-freeze").start()
