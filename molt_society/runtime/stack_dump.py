"""What a process is doing when it seems stuck: stack dumps on a signal, and a watch on its event loop.

- ``SIGUSR1`` writes the Python stack of every thread (``faulthandler``: it works even when the event loop
  or the GIL holder is stuck) to the process's log. Every process of the stack enables it (the pipeline's
  processes through ``runtime.process_main``, the driver in ``society.run``); Faust's workers replace it with
  mode's own ``SIGUSR1`` handler, which logs the stacks of their tasks.
- ``SIGUSR2`` writes the stack of every asyncio task of the loop it was installed on (where each coroutine
  waits), for a loop that still runs but whose work waits on something that never comes.
- ``LoopWatch`` notices from a thread an event loop that has not run for ``threshold`` seconds (a blocking
  call in a coroutine), says so once per blockage and writes every thread's stack.

Used as: ``kill -USR1 <pid>`` / ``kill -USR2 <pid>`` and read the process's log (``<run>/<role>-<n>.log``,
``<run>/driver.log`` for ``society run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import gc
import io
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import IO, Any

from molt_society.runtime.logs import get_logger
from molt_society.runtime.task_cancel import cancel_and_wait

log = get_logger(__name__)


def enable_thread_dumps(file: IO[Any] | None = None) -> bool:
    """``SIGUSR1`` writes every thread's stack to ``file`` (stderr by default); False where it cannot (a
    platform without the signal, or a ``file`` without a descriptor)."""
    if not hasattr(signal, "SIGUSR1"):  # pragma: no cover - Linux has it
        return False
    try:
        if file is None:
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        else:
            faulthandler.register(signal.SIGUSR1, file=file, all_threads=True)
    except (ValueError, RuntimeError, io.UnsupportedOperation):
        return False
    return True


def disable_thread_dumps() -> None:
    if hasattr(signal, "SIGUSR1"):
        faulthandler.unregister(signal.SIGUSR1)


def task_stacks(loop: asyncio.AbstractEventLoop) -> str:
    """Every pending task of ``loop`` with where its coroutine waits, innermost frame last."""
    out = io.StringIO()
    tasks = sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name())
    out.write(f"--- {len(tasks)} asyncio task(s) at {time.strftime('%H:%M:%S')} ---\n")
    for task in tasks:
        out.write(f"{task.get_name()} {task.get_coro()!r}\n")
        task.print_stack(limit=20, file=out)
        chain = await_chain(task.get_coro())
        if len(chain) > 1:  # print_stack shows the task's own coroutine only, not what it awaits
            out.write("  awaiting, innermost last:\n")
            for frame in chain[1:]:
                code = frame.f_code
                out.write(f'    File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}\n')
    return out.getvalue()


def await_chain(coro: object, limit: int = 50) -> list[FrameType]:
    """The frames of ``coro`` and of what it awaits, down to the innermost: coroutines, generators and
    async generators (an ``async for`` awaits an ``async_generator_asend``, which names its generator only
    to the garbage collector)."""
    frames: list[FrameType] = []
    while coro is not None and len(frames) < limit:
        frame = _first_attr(coro, ("cr_frame", "ag_frame", "gi_frame"))
        if frame is not None:
            frames.append(frame)
        awaited = _first_attr(coro, ("cr_await", "ag_await", "gi_yieldfrom"))
        if awaited is None and type(coro).__name__ in ("async_generator_asend", "async_generator_athrow"):
            awaited = next((g for g in gc.get_referents(coro) if hasattr(g, "ag_frame")), None)
        coro = awaited
    return frames


def _first_attr(obj: object, names: tuple[str, ...]) -> Any:
    return next((v for a in names if (v := getattr(obj, a, None)) is not None), None)


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def enable_task_dumps(loop: asyncio.AbstractEventLoop, write: Callable[[str], None] = _to_stderr) -> bool:
    """``SIGUSR2`` gives ``task_stacks(loop)`` to ``write`` (stderr, the process's log, by default; from the
    loop, so it needs the loop to run); False where the loop cannot take signal handlers (not the main
    thread, or not Unix)."""
    if not hasattr(signal, "SIGUSR2"):  # pragma: no cover - Linux has it
        return False
    try:
        loop.add_signal_handler(signal.SIGUSR2, lambda: write(task_stacks(loop)))
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True


def disable_task_dumps(loop: asyncio.AbstractEventLoop) -> None:
    if hasattr(signal, "SIGUSR2"):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGUSR2)


def thread_stacks() -> str:
    """Every thread's Python stack as text (``faulthandler`` needs a real file: a temporary one)."""
    import tempfile

    with tempfile.TemporaryFile("w+") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
        f.seek(0)
        return f.read()


class LoopWatch:
    """Watches, from a daemon thread, that ``loop`` runs: a beat coroutine stamps the time every
    ``beat_s``; when no stamp came for ``threshold`` seconds, ``on_block(seconds, stacks)`` is called once
    (with every thread's stack), then ``on_unblock(seconds)`` once the loop runs again."""

    def __init__(
        self,
        threshold: float,
        on_block: Callable[[float, str], None],
        on_unblock: Callable[[float], None] = lambda seconds: None,
        beat_s: float = 0.5,
    ) -> None:
        self.threshold = threshold
        self.on_block, self.on_unblock = on_block, on_unblock
        self.beat_s = beat_s
        self.last = time.monotonic()
        self.blocked_since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._beat: asyncio.Task[None] | None = None

    async def _stamp(self) -> None:
        while True:
            self.last = time.monotonic()
            await asyncio.sleep(self.beat_s)

    def _watch(self) -> None:
        while not self._stop.wait(min(self.beat_s, self.threshold / 4)):
            silent = time.monotonic() - self.last
            try:
                if self.blocked_since is None and silent >= self.threshold:
                    self.blocked_since = self.last
                    self.on_block(silent, thread_stacks())
                elif self.blocked_since is not None and silent < self.threshold:
                    self.on_unblock(time.monotonic() - self.blocked_since)
                    self.blocked_since = None
            except Exception as exc:  # a report that fails must not end the watch
                log.warning("loop_watch.report_failed", error=repr(exc))

    def start(self) -> None:
        """Start watching the running loop (call from a coroutine on it)."""
        self.last = time.monotonic()
        self._beat = asyncio.get_running_loop().create_task(self._stamp(), name="loop-watch-beat")
        self._thread = threading.Thread(target=self._watch, name="loop-watch", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        await cancel_and_wait(self._beat)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)
