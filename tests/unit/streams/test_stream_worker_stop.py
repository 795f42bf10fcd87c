"""A stream worker told to stop exits within ``STOP_EXIT_S`` even when Faust's stop waits on a broker that
is gone (``streams.__main__._exit_after``): checked on a real process whose stop never ends."""

from __future__ import annotations

import subprocess
import sys
import time

from molt_society.streams.__main__ import STOP_ABANDONED_EXIT

HANGS = """
import time
from molt_society.streams.__main__ import _exit_after
_exit_after(0.5)
time.sleep(30)  # an orderly stop that never ends
"""


def test_a_stop_that_never_ends_is_cut_and_said() -> None:
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", HANGS], capture_output=True, text=True, timeout=60, check=False
    )
    took = time.monotonic() - began
    assert proc.returncode == STOP_ABANDONED_EXIT
    assert took < 20
    assert "streams.stop_abandoned" in proc.stdout + proc.stderr
