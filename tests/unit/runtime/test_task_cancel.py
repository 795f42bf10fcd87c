"""``runtime.task_cancel.cancel_and_wait``: a task that swallows its first cancellations still ends."""

from __future__ import annotations

import asyncio
from typing import Any

from molt_society.runtime.task_cancel import cancel_and_wait


def test_a_task_that_swallows_cancellations_is_cancelled_until_it_ends() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed >= 3:
                    raise
                asyncio.current_task().uncancel()  # type: ignore[union-attr]  # as a swallowing wait_for leaves it

    async def main() -> tuple[bool, bool]:
        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        once = asyncio.create_task(_cancel_once(task))
        done, _ = await asyncio.wait({once}, timeout=0.3)
        await cancel_and_wait(task, retry_s=0.05)
        return bool(done), task.cancelled()

    stuck_with_one_cancel, cancelled = asyncio.run(main())
    assert not stuck_with_one_cancel  # one cancel and an await: still waiting after 0.3 s
    assert cancelled
    assert swallowed == 3


async def _cancel_once(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task})


def test_finished_failed_and_missing_tasks_are_fine() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    async def main() -> BaseException | None:
        t = asyncio.create_task(fails())
        await asyncio.sleep(0)
        await cancel_and_wait(t, None)
        return t.exception()

    assert isinstance(asyncio.run(main()), ValueError)


def test_a_task_dump_names_what_an_async_for_waits_on() -> None:
    from molt_society.runtime.stack_dump import await_chain, task_stacks

    async def inner() -> None:
        await asyncio.sleep(5)

    async def agen() -> Any:
        while True:
            await inner()
            yield 1

    async def outer() -> None:
        async for _ in agen():
            pass

    async def main() -> tuple[list[str], str]:
        t = asyncio.create_task(outer(), name="outer")
        await asyncio.sleep(0.05)
        names = [f.f_code.co_name for f in await_chain(t.get_coro())]
        text = task_stacks(asyncio.get_running_loop())
        await cancel_and_wait(t)
        return names, text

    names, text = asyncio.run(main())
    assert names == ["outer", "agen", "inner", "sleep"]
    assert "in inner" in text
