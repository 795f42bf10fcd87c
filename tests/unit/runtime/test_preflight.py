"""A state or ClickHouse folder the stack cannot use is one line naming it, before anything starts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from molt_society.runtime.preflight import EnvironmentProblem, check_writable
from molt_society.runtime.settings import get_settings
from molt_society.society.cli import main


def test_a_usable_folder_passes_and_keeps_nothing(tmp_path: Path) -> None:
    check_writable(tmp_path / "a" / "b", "state folder")
    assert list((tmp_path / "a" / "b").iterdir()) == []


def test_each_unusable_folder_is_named_with_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match=r"state folder /proc/no-such/x cannot be created"):
        check_writable(Path("/proc/no-such/x"), "state folder")
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(EnvironmentProblem, match=r"cannot be created|is not a folder"):
        check_writable(a_file, "state folder")
    with pytest.raises(EnvironmentProblem, match=r"has \d+ MiB free; a society needs at least"):
        check_writable(tmp_path, "state folder", min_free=1 << 60)  # a full disk, as far as the check sees


def test_a_read_only_state_folder_stops_society_run_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen = tmp_path / "state"
    frozen.mkdir()
    subprocess.run(["chattr", "+i", str(frozen)], check=True)  # read-only even for root
    try:
        monkeypatch.setenv("SOCIETY_STATE_DIR", str(frozen))
        monkeypatch.setenv("CLICKHOUSE_URL", f"chdb://{tmp_path / 'ch'}")
        get_settings.cache_clear()  # the settings are read once per process: read these
        assert get_settings().state_dir == frozen
        res = CliRunner().invoke(main, ["run", "--ticks", "1", "--no-dashboard"])
    finally:
        subprocess.run(["chattr", "-i", str(frozen)], check=True)
        monkeypatch.undo()
        get_settings.cache_clear()
    assert res.exit_code == 1, res.output
    assert f"the state folder (SOCIETY_STATE_DIR) {frozen} is not writable" in res.output
    assert "Traceback" not in res.output
