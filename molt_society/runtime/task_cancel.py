"""Stopping asyncio tasks for certain.

``task.cancel(); await task`` can wait forever: on Python 3.11 ``asyncio.wait_for`` swallows a cancellation
that arrives as its inner awaitable finishes (https://github.com/python/cpython/issues/86296, fixed by the
rewrite of ``wait_for`` in 3.12), and a task looping over such calls goes on as if never cancelled. A
driver finished its run and then waited for its broker prober for ever (``make test``, issue 26).
``cancel_and_wait`` cancels again until the task has ended.
"""

from __future__ import annotations

import asyncio
from typing import Any

RETRY_S = 0.5


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None, retry_s: float = RETRY_S) -> None:
    """Cancel every task of ``tasks`` (None: skipped) and return once each has ended, cancelling again every
    ``retry_s`` those that swallowed it. Their results and exceptions are left in the tasks."""
    pending = {t for t in tasks if t is not None and not t.done()}
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=retry_s)
    for task in tasks:
        if task is not None and not task.cancelled():
            task.exception()  # retrieved: asyncio does not log it as never retrieved
