"""Work that event-loop requests hand over one at a time, done together in a worker thread once
the loop's callbacks of this turn have run.

The node cache's reads and claims are library calls that let go of the GIL (LMDB's, ``fcntl``'s).
On the event loop's thread each would then have to take the GIL back, which can wait out another
busy thread's whole switch interval (5 ms): measured here, an LMDB read took 0.85 ms and a claim
7 ms with one other Python thread busy, and every request of the loop waited meanwhile. Handed to
a worker thread a turn at a time, they cost the loop one hand-over per turn, whatever the number
of requests that turn brought.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["TurnBatch"]

Item = TypeVar("Item")
Result = TypeVar("Result")


class TurnBatch(Generic[Item, Result]):
    """``await batch.submit(item)``: ``work(item)``, run in the loop's default executor together
    with the other items submitted in the same turn (from any loop).

    Args:
        work: What is done with one item (in a worker thread).
        abandoned: Called with an item's result when its request was cancelled meanwhile (to let
            go of what the result holds, such as a claim).
    """

    def __init__(self, work: Callable[[Item], Result], abandoned: Callable[[Item, Result], None]) -> None:
        self._work = work
        self._abandoned = abandoned
        self._lock = threading.Lock()
        self._waiting: list[tuple[Item, asyncio.Future[Result]]] = []
        self._scheduled = False

    async def submit(self, item: Item) -> Result:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        with self._lock:
            self._waiting.append((item, future))
            schedule, self._scheduled = not self._scheduled, True
        if schedule:
            loop.call_soon(loop.run_in_executor, None, self._run)
        return await future

    def _run(self) -> None:
        with self._lock:
            batch, self._waiting = self._waiting, []
            self._scheduled = False
        outcomes: dict[asyncio.AbstractEventLoop, list[tuple[Item, asyncio.Future[Result], Result | BaseException]]] = {}
        for item, future in batch:
            outcome: Result | BaseException
            try:
                outcome = self._work(item)
            except Exception as error:
                outcome = error
            outcomes.setdefault(future.get_loop(), []).append((item, future, outcome))
        for loop, settled in outcomes.items():
            try:
                loop.call_soon_threadsafe(self._settle, settled)
            except RuntimeError:  # the loop has closed: nobody waits for these any more
                self._settle(settled, closed=True)

    def _settle(self, settled: list[tuple[Item, asyncio.Future[Result], Result | BaseException]], closed: bool = False) -> None:
        for item, future, outcome in settled:
            if closed or future.done():  # cancelled while it was looked up
                if not isinstance(outcome, BaseException):
                    self._abandoned(item, outcome)
            elif isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
