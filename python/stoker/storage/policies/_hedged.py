"""Hedged requests for whole blocks: a block fetch that runs well past the usual time is sent once
more, and the first copy to answer is used (Dean and Barroso, "The Tail at Scale").

A block is one large GET that many samples wait on, so one slow connection (a congested route,
a busy server) holds all of them up; the sample prefetcher's own hedging cannot help, as a second
request for a sample joins the same block fetch. Copies are budgeted (a tenth of the calls, plus
a few for the start, when nothing is known yet), so a store that is slow for everyone is not
sent twice the load. The copy that loses is left to finish and its bytes dropped: a request cut
off mid-flight gains little and is the riskiest path through a client library.

A request made as a hedged copy (a sample prefetcher's second copy of a stalled request) runs
inside `hedged_copy`, so the layers below can tell: the node cache does not make it wait for the
claim it exists to get around (see `SampleCache.get_or_claim`).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["HedgedCalls", "hedged_copy", "is_hedged_copy"]

# Set in the task of a hedged copy only: a task's context is its own, so the request it hedges,
# running in another task, is not marked.
_HEDGED_COPY: ContextVar[bool] = ContextVar("stoker_hedged_copy", default=False)


@contextlib.contextmanager
def hedged_copy() -> Iterator[None]:
    """Marks the requests made within it (in this task) as hedged copies: sent because another
    request for the same thing has not answered in time, so they must not wait for that one."""
    token = _HEDGED_COPY.set(True)
    try:
        yield
    finally:
        _HEDGED_COPY.reset(token)


def is_hedged_copy() -> bool:
    """Whether the running request is a hedged copy (made within `hedged_copy`)."""
    return _HEDGED_COPY.get()


T = TypeVar("T")


class HedgedCalls:
    """Runs calls, each with a second copy if it outlasts the patience, within a copy budget.

    Shared by the event loops that call it (a storage's own, a pipeline's): the counters and the
    recent durations are behind ``_lock`` (a budget check and its ``copies += 1`` are one step,
    and the median never iterates the durations while another thread appends).

    Args:
        budget: Copies allowed per call made (0.1: one in ten).
        spare: Copies allowed beyond the budget (for the first calls).
        first_patience: Seconds to wait before a copy while no call has finished yet.
        least_patience: The patience never goes below this many seconds.
    """

    def __init__(self, budget: float = 0.1, spare: int = 4, first_patience: float = 1.0, least_patience: float = 0.05) -> None:
        self.budget = budget
        self.spare = spare
        self.first_patience = first_patience
        self.least_patience = least_patience
        self.calls = 0
        self.copies = 0  # second copies sent
        self.copies_won = 0  # of those, the ones that answered first
        self._durations: deque[float] = deque(maxlen=128)
        self._lock = threading.Lock()  # guards calls, copies, copies_won and _durations

    def patience(self) -> float:
        """Seconds a call runs before its copy is sent: twice the median call time recently."""
        with self._lock:
            durations = list(self._durations)
        if not durations:
            return self.first_patience
        return max(self.least_patience, 2 * statistics.median(durations))

    def _may_copy(self) -> bool:
        """Whether the budget allows one more copy; if so it is counted (one step, under the lock:
        two loops checking at once never both take the last one)."""
        with self._lock:
            if self.copies + 1 > self.budget * self.calls + self.spare:
                return False
            self.copies += 1
            return True

    async def call(self, make: Callable[[int], Awaitable[T]]) -> T:
        """``await make(0)``, hedged with ``make(1)``: the first copy to answer, or to fail when
        the other fails too. The copy number lets the caller send the copy another way (over a
        connection of its own: a slow connection usually stays slow).

        Raises:
            Exception: The first copy's error, when every copy sent failed.
        """
        with self._lock:
            self.calls += 1
        first = self._start(make, 0)
        done, _ = await asyncio.wait({first}, timeout=self.patience())
        if done or not self._may_copy():
            return await first
        second = self._start(make, 1)
        pending = {first, second}
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task.exception() is None:
                        if task is second:
                            with self._lock:
                                self.copies_won += 1
                        return task.result()
        except asyncio.CancelledError:
            first.cancel(), second.cancel()
            raise
        return await first  # both failed: the first's error

    def _start(self, make: Callable[[int], Awaitable[T]], copy: int) -> asyncio.Task[T]:
        started = time.monotonic()
        task = asyncio.ensure_future(make(copy))

        def finished(task: asyncio.Task[T]) -> None:
            if not task.cancelled() and task.exception() is None:  # also marks a loser's error as seen
                with self._lock:
                    self._durations.append(time.monotonic() - started)

        task.add_done_callback(finished)
        return task
