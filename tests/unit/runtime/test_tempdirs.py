"""``runtime.tempdirs``: a new private folder sweeps the folders of its kind whose process is gone, and
keeps those of live processes and anything not of that form; the import's records and sorted runs use it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from molt_society.importers.scratch import Scratch
from molt_society.importers.spill import SortedSpill
from molt_society.runtime.tempdirs import private_dir


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_new_folder_sweeps_those_of_dead_processes_only(tmp_path: Path) -> None:
    dead, live = _dead_pid(), os.getppid()
    for name in (f"society-sort-{dead}-abc", f"society-sort-{live}-def", f"society-records-{dead}-ghi"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run-00000.bin").write_bytes(b"x" * 100)
    (tmp_path / "society-sort-notapid-x").mkdir()
    (tmp_path / f"society-sort-{dead}-file").write_text("a file, not a folder")
    made = private_dir("society-sort", tmp_path)
    assert made.name.startswith(f"society-sort-{os.getpid()}-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            made.name,
            f"society-sort-{live}-def",  # its process lives
            f"society-records-{dead}-ghi",  # another kind
            "society-sort-notapid-x",
            f"society-sort-{dead}-file",
        ]
    )


def test_the_imports_records_and_runs_are_private_folders(tmp_path: Path) -> None:
    store = Scratch(tmp_path)
    spill = SortedSpill(run_size=2, folder=tmp_path)
    try:
        for i in range(5):
            spill.add(i, bytes([i]), b"event")
        names = sorted(p.name for p in tmp_path.iterdir())
        assert [n.rsplit("-", 1)[0] for n in names] == [
            f"society-records-{os.getpid()}",
            f"society-sort-{os.getpid()}",
        ]
    finally:
        spill.close()
        store.close()
    assert list(tmp_path.iterdir()) == []
