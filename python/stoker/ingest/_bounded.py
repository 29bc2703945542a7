"""Many awaited jobs, a bounded number at once: the uploads' concurrency."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["bounded"]


async def bounded(limit: int, jobs: Any, run: Any) -> None:
    """``await run(job)`` for every job, at most ``limit`` at once; the first error stops it."""
    slots = asyncio.Semaphore(limit)
    tasks: set[asyncio.Task[Any]] = set()
    failures: list[BaseException] = []

    def finished(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        slots.release()
        exception = None if task.cancelled() else task.exception()
        if exception is not None:
            failures.append(exception)

    try:
        for job in jobs:
            await slots.acquire()
            if failures:
                break
            task = asyncio.ensure_future(run(job))
            tasks.add(task)
            task.add_done_callback(finished)
        while tasks and not failures:
            await asyncio.wait(set(tasks))
    finally:
        for task in list(tasks):
            task.cancel()
    if failures:
        raise failures[0]
