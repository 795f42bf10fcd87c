"""``python -m molt_society.bench.import_alone FILE...``: an import by itself, its time and peak memory.

For each file, in a fresh process (so one import's memory does not carry into the next): the events of
``importers.import_stream`` read back from its sort on disk, with their count, a digest of their bytes in
order and a digest of the report (two versions of the importer that make the same events and report give
the same digests), the wall and CPU time, and the process's peak RSS. One JSON line per file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import orjson


def measure(path: Path) -> dict[str, object]:
    """Import ``path`` in this process and measure it."""
    from molt_society.importers import import_stream

    wall, cpu = time.perf_counter(), time.process_time()
    imported = import_stream(path, "bench")
    events = hashlib.blake2b(digest_size=16)
    count = 0
    try:
        for payload in imported.spill:
            events.update(payload)
            count += 1
    finally:
        imported.close()
    report = orjson.dumps(imported.report.to_dict(), option=orjson.OPT_SORT_KEYS)
    return {
        "file": str(path),
        "events": count,
        "events_digest": events.hexdigest(),
        "report_digest": hashlib.blake2b(report, digest_size=8).hexdigest(),
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--here", action="store_true", help="measure in this process (one file)")
    args = ap.parse_args()
    if args.here:
        print(json.dumps(measure(args.files[0])), flush=True)
        return
    for path in args.files:
        cmd = [sys.executable, "-m", "molt_society.bench.import_alone", "--here", str(path)]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
