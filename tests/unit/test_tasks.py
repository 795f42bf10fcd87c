"""``runtime.tasks.cancel_and_wait``: a task that swallows its first cancellations still ends."""

from __future__ import annotations

import asyncio

from molt_society.runtime.tasks import cancel_and_wait


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
