"""``runtime.stack_dump``: a blocked event loop is noticed with the stack that blocks it, the signals write
thread and task stacks; and the driver's sink readers (``society.drive``) survive a sink that breaks off an
answer (a restarting sink), instead of ending the display's loop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from molt_society.runtime.stack_dump import (
    LoopWatch,
    disable_task_dumps,
    disable_thread_dumps,
    enable_task_dumps,
    enable_thread_dumps,
    task_stacks,
)
from molt_society.society.drive import query_or_none, sink_health


def _held_up_by_a_blocking_call(seconds: float) -> None:
    time.sleep(seconds)


def test_loop_watch_says_a_blocked_loop_once_with_the_blocking_frame_then_that_it_runs_again() -> None:
    blocked: list[tuple[float, str]] = []
    running: list[float] = []

    async def main() -> None:
        watch = LoopWatch(0.4, lambda s, stacks: blocked.append((s, stacks)), running.append, beat_s=0.05)
        watch.start()
        await asyncio.sleep(0.6)  # a loop that runs is never said blocked
        assert blocked == []
        _held_up_by_a_blocking_call(1.5)
        await asyncio.sleep(0.6)
        await watch.stop()

    asyncio.run(main())
    assert len(blocked) == 1
    seconds, stacks = blocked[0]
    assert 0.4 <= seconds < 1.5
    assert "_held_up_by_a_blocking_call" in stacks  # the main thread's stack, taken while it was blocked
    assert len(running) == 1
    assert running[0] >= 1.0


def test_sigusr2_writes_where_each_task_waits() -> None:
    written: list[str] = []

    async def waits_on_an_event(event: asyncio.Event) -> None:
        await event.wait()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        task = asyncio.create_task(waits_on_an_event(event), name="the-waiter")
        assert enable_task_dumps(loop, written.append)
        try:
            await asyncio.sleep(0.05)
            os.kill(os.getpid(), signal.SIGUSR2)
            for _ in range(100):
                if written:
                    break
                await asyncio.sleep(0.02)
        finally:
            disable_task_dumps(loop)
            event.set()
            await task

    asyncio.run(main())
    assert len(written) == 1
    assert "the-waiter" in written[0]
    assert "waits_on_an_event" in written[0]


def test_task_stacks_names_every_pending_task() -> None:
    async def main() -> str:
        gate = asyncio.Event()
        tasks = [asyncio.create_task(gate.wait(), name=f"t{i}") for i in range(3)]
        await asyncio.sleep(0)
        text = task_stacks(asyncio.get_running_loop())
        gate.set()
        await asyncio.gather(*tasks)
        return text

    text = asyncio.run(main())
    assert "4 asyncio task(s)" in text  # the three and main()
    assert all(f"t{i} " in text for i in range(3))


def test_sigusr1_writes_every_threads_stack(tmp_path: Path) -> None:
    release = threading.Event()

    def parked_in_a_helper_thread() -> None:
        release.wait(10)

    helper = threading.Thread(target=parked_in_a_helper_thread, daemon=True)
    helper.start()
    path = tmp_path / "dump.txt"
    with open(path, "w") as f:
        assert enable_thread_dumps(f)
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.2)
        finally:
            disable_thread_dumps()
            release.set()
            helper.join()
    text = path.read_text()
    assert "parked_in_a_helper_thread" in text
    assert "test_sigusr1_writes_every_threads_stack" in text


@pytest.fixture
def broken_sink() -> Iterator[str]:
    """An HTTP server that promises a JSON body and closes the connection after one byte of it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n"
                conn.sendall(head + b"{")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


def test_a_sink_that_breaks_off_its_answer_reads_as_no_answer(broken_sink: str) -> None:
    assert sink_health(broken_sink) == {}
    assert query_or_none(broken_sink, "SELECT 1") is None
