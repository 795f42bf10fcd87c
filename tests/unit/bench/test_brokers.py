"""``bench.brokers``: slices of a long run from samples of the journal's tick and the processes' CPU."""

from __future__ import annotations

from pathlib import Path

from molt_society.bench.brokers import JournalTail, Sample, slices


def test_slices_measure_rate_and_cpu_between_boundaries() -> None:
    # 2 ticks/s for the first 500 ticks, then 1 tick/s; the broker uses 0.25 then 0.75 of a core
    samples, t, tick, cpu = [], 0.0, 0, 0.0
    while tick < 1000:
        samples.append(Sample(t, tick - tick % 10, {"broker": cpu}, {"broker": int(tick) * 2**20}))
        fast = tick < 500
        t += 1.0
        tick += 2 if fast else 1
        cpu += 0.25 if fast else 0.75
    samples.append(Sample(t, 999, {"broker": cpu}, {"broker": 999 * 2**20}))
    got = slices(samples, 1000)
    assert [(s.first, s.last) for s in got] == [(0, 500), (500, 999)]
    assert got[0].ticks_per_s == 2.0
    assert got[0].cpu_share == {"broker": 0.25}
    assert abs(got[1].ticks_per_s - 1.0) < 0.01
    assert got[1].cpu_share == {"broker": 0.75}
    assert got[1].rss_mib == {"broker": 999.0}


def test_a_restarted_process_is_left_out_of_its_slice() -> None:
    samples = [
        Sample(0.0, 0, {"broker": 50.0, "sinks-0": 1.0}, {}),
        Sample(10.0, 100, {"broker": 2.0, "sinks-0": 3.0}, {}),  # the broker restarted: its CPU from 0
    ]
    assert slices(samples, 101, width=500)[0].cpu_share == {"sinks-0": 0.2}


def test_journal_tail_reads_only_what_was_appended(tmp_path: Path) -> None:
    journal = tmp_path / "run.log"
    tail = JournalTail(journal)
    assert tail.newest() is None  # not there yet
    journal.write_text('{"event": "clock.tick", "tick": 0}\n{"event": "clock.tick", "ti')
    assert tail.newest() == 0  # a half-written line waits for its end
    with journal.open("a") as f:
        f.write('ck": 10}\n{"event": "stack.spawned"}\n')
    assert tail.newest() == 10
    assert tail.newest() == 10


def test_samples_taken_after_the_run_ended_do_not_end_a_slice() -> None:
    samples = [
        Sample(0.0, 0, {"broker": 0.0}, {"broker": 2**20}),
        Sample(10.0, 90, {"broker": 5.0}, {"broker": 2**20}),
        Sample(11.0, 99, {}, {}),  # the stack is gone: the journal still says its last tick
    ]
    (only,) = slices(samples, 100)
    assert (only.first, only.last, only.cpu_share) == (0, 90, {"broker": 0.5})


def test_samples_taken_while_the_stack_stops_do_not_end_a_slice() -> None:
    samples = [
        Sample(0.0, 0, {"broker": 0.0, "streams-0": 0.0}, {}),
        Sample(10.0, 90, {"broker": 5.0, "streams-0": 2.0}, {}),
        Sample(11.0, 99, {"broker": 9.0}, {}),  # the stream worker already stopped
    ]
    (only,) = slices(samples, 100)
    assert (only.last, only.cpu_share) == (90, {"broker": 0.5, "streams-0": 0.2})
