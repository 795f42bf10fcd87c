"""``bench.aging``: rates per span of ticks and the month's table, from a journal, samples and counts."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from molt_society.bench import aging
from molt_society.bench.brokers import Sample


def test_rates_divide_a_span_s_events_by_its_wall_time() -> None:
    # ticks every 0.1 s up to tick 200, then every 0.2 s; 50 actions per tick, 80 from tick 201 on
    wall = {t: t * 0.1 if t <= 200 else 20 + (t - 200) * 0.2 for t in range(0, 301, 10)}
    per_tick = {t: 50 if t <= 200 else 80 for t in range(1, 301)}
    got = aging.rates(wall, per_tick, 300)
    assert [(a, b) for a, b, _ in got] == [(0, 100), (100, 200), (200, 300)]
    assert [r for _, _, r in got] == [500.0, 500.0, 400.0]  # 5,000 / 10 s, 5,000 / 10 s, 8,000 / 20 s


def test_journal_ticks_read_the_clock_lines(tmp_path: Path) -> None:
    journal = tmp_path / "run.log"
    lines = [
        {"event": "clock.tick", "tick": 0, "ts": 10.0},
        {"event": "stack.spawned", "ts": 10.5},
        {"event": "clock.tick", "tick": 10, "ts": 11.0},
    ]
    journal.write_text("\n".join(json.dumps(x) for x in lines) + "\n{half")
    assert aging.journal_ticks(journal) == {0: 10.0, 10: 11.0}
    assert aging.journal_ticks(tmp_path / "none.log") == {}


def test_the_month_table_gives_events_per_second_and_cpu_per_tick(tmp_path: Path) -> None:
    # 2 ticks/s for 1,000 ticks, 10 events per tick; the broker uses a quarter of a core: 125 ms per tick
    samples = [Sample(t / 2, t, {"broker": t / 8}, {"broker": 100 * 2**20}) for t in range(0, 1000, 10)]
    samples.append(Sample(999 / 2, 999, {"broker": 999 / 8}, {"broker": 100 * 2**20}))
    month = {
        "ticks": 1000,
        "exit_code": 0,
        "wall_s": 505.0,
        "events": 9990,
        "samples": [asdict(s) for s in samples],
        "events_per_tick": {str(t): 10 for t in range(1, 1000)},
    }
    (tmp_path / "month.json").write_text(json.dumps(month))
    (tmp_path / "in-process.json").write_text(
        json.dumps({"exit_code": 0, "ticks": 1000, "wall_s": 5.0, "ticks_per_s": 200.0})
    )
    text = aging.markdown(tmp_path, "python -m molt_society.bench.aging")
    assert text.startswith(aging.BEGIN)
    assert text.endswith(aging.END)
    assert "| 0-500 | 2.0 | 20 | 125.0 | 100 |" in text
    assert "| 500-999 | 2.0 | 20 | 125.0 | 100 |" in text
    assert "ticks 900-1,000 (the last tenth) against ticks 200-1,000: 2.0 / 2.0 ticks/s = 1.00x" in text
    # 1,000 ticks in 505 s against 200 ticks/s in one process
    assert "The stack over the whole run: 2.0 ticks/s, 0.01x" in text


def test_tick_hops_measure_each_hop_from_the_records_timestamps() -> None:
    from types import SimpleNamespace

    import orjson

    from molt_society.bench.tick_hops import hops
    from molt_society.runtime.kafka import WATERMARK_HEADERS

    def rec(value: dict[str, int], ts: int, mark: bool = False) -> SimpleNamespace:
        return SimpleNamespace(
            value=orjson.dumps(value), timestamp=ts, headers=list(WATERMARK_HEADERS) if mark else []
        )

    # tick t: feeds of its 2 partitions at 100t + 90 and 100t + 95; watermarks of 2 shards at 100t + 20, + 60
    feeds = [rec({"tick": t}, 100 * t + d) for t in range(5) for d in (90, 95)]
    actions = [rec({"tick": t}, 100 * t + d, mark=True) for t in range(5) for d in (20, 60)]
    actions.append(rec({"tick": 2}, 250))  # an action: not a watermark
    ticks = [rec({"tick": t}, 100 * t) for t in range(5)]
    got = hops(ticks, actions, feeds, 1, 4)
    assert got["period"] == [100] * 4
    assert got["agent_first"] == [25] * 4  # 100t + 20 - (100(t-1) + 95)
    assert got["agent_last"] == [65] * 4
    assert got["stream"] == [35] * 4


def test_span_rate_ends_when_the_newest_tick_was_first_seen() -> None:
    # 4 ticks/s to tick 800, then 2 ticks/s to the last tick (999), then 30 s of samples of the drain
    samples, at, tick = [], 0.0, 0
    while tick < 999:
        samples.append(Sample(at, tick, {}, {}))
        at += 1.0
        tick = min(999, tick + (4 if tick < 800 else 2))
    samples += [Sample(at + k, 999, {}, {}) for k in range(30)]
    late = aging.span_rate(samples, 900, 1000)
    early = aging.span_rate(samples, 200, 600)
    assert early == 4.0
    assert late is not None
    assert abs(late - 2.0) < 0.05  # not diluted by the drain's samples
