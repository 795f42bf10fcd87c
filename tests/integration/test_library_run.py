"""The notebook library starts and stops a society on the real local stack (issue 29): ``run_society``
runs it to its last tick into the store it names, a second run of the name is refused, ``replace``
deletes the first and stores the same seed's society again (its events counted here from ClickHouse)."""

from __future__ import annotations

from pathlib import Path

import pytest

import molt_society
from molt_society.society.stored import SocietyTaken

pytestmark = pytest.mark.integration


def test_run_society_stores_it_and_a_second_run_needs_replace(tmp_path: Path) -> None:
    store = tmp_path / ".society" / "clickhouse"
    first = molt_society.run_society("lib_run", agents=150, ticks=8, store=store, seed=7)
    assert first["ticks"] == 8
    with molt_society.open_store(store) as st:
        held = st.societies().set_index("society")["events"].to_dict()
        ids = set(st.events("lib_run")["event_id"].astype(str))
    assert held == {"lib_run": len(ids)}
    assert ids
    with pytest.raises(SocietyTaken, match="already stored"):
        molt_society.run_society("lib_run", agents=150, ticks=8, store=store, seed=7)
    molt_society.run_society("lib_run", agents=150, ticks=8, store=store, seed=7, replace=True)
    with molt_society.open_store(store) as st:
        again = set(st.events("lib_run")["event_id"].astype(str))
    assert again == ids  # the same seed's society, stored once (the old rows deleted, none dropped)
