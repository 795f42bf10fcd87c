"""Where and how a benchmark ran: the machine, the date, the command, as every benchmark's Markdown
section names them.

Figures are only comparable on one machine, so each section says which one it was measured on.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import psutil

GIB = 1 << 30


def machine_info() -> dict[str, str]:
    """Cores, RAM, CPU model, Python, OS and aiokafka version of this machine."""
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    import aiokafka

    return {
        "nproc": nproc or str(os.cpu_count()),
        "ram": f"{psutil.virtual_memory().total / GIB:.1f} GiB",
        "cpu": model,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "aiokafka": str(aiokafka.__version__),
    }


def machine_line(*, python: bool = False, system: bool = False) -> str:
    """``CPU, N cores, RAM`` (then ``, Python X`` and ``, OS`` when asked) for a section's first line."""
    m = machine_info()
    line = f"{m['cpu']}, {m['nproc']} cores, {m['ram']}"
    if python:
        line += f", Python {m['python']}"
    if system:
        line += f", {m['os']}"
    return line


def run_facts(
    prog: str, argv: list[str] | None, *, python: bool = False, system: bool = False
) -> dict[str, str]:
    """What a benchmark's section opens with: ``date`` (UTC, now), ``machine`` (``machine_line``) and the
    ``command`` (``prog`` and the arguments given, ``sys.argv`` when ``argv`` is None)."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine_line(python=python, system=system),
        "command": f"{prog} " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
