"""Retries for network reads: exponential backoff with full jitter, and overload as backpressure.

Every network backend sorts its errors into three kinds: ``"retry"`` (a 5xx, a timeout, a reset
or refused connection: try again after a growing, randomised pause, so many clients that failed
together do not come back together), ``"overload"`` (the server or the driver says it is too busy:
wait and try again without spending an attempt; only the deadline ends it) and ``"fatal"`` (a
missing key, bad credentials: no retry). When attempts or the deadline run out, the error names
the sample and says how long it tried.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from ._errors import StorageError

__all__ = ["ErrorKind", "RetryPolicy", "call_with_retries", "first_line"]

T = TypeVar("T")
ErrorKind = Literal["retry", "overload", "fatal"]


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed request is tried again.

    Attributes:
        attempts: Tries in all for retryable errors (1: no retry).
        base_delay: Pause ceiling before the first retry, doubled per retry (seconds).
        max_delay: Largest pause ceiling (seconds).
        deadline: Longest time one sample may take over all its tries and waits (seconds).
    """

    attempts: int = 6
    base_delay: float = 0.05
    max_delay: float = 2.0
    deadline: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.max_delay < 0 or self.deadline <= 0:
            raise ValueError(f"invalid retry policy {self}")

    def pause(self, retry: int, generator: random.Random) -> float:
        """Full jitter: uniform in [0, min(max_delay, base_delay * 2**retry)]."""
        return generator.uniform(0, min(self.max_delay, self.base_delay * (2**retry)))


class RetryCounters:
    """What retries happened, for stats: retries, overload waits, failures given up on."""

    __slots__ = ("retries", "overloads", "given_up")

    def __init__(self) -> None:
        self.retries = 0
        self.overloads = 0
        self.given_up = 0


_jitter = random.Random()


def first_line(error: BaseException) -> str:
    """An error's message without the multi-line debug dumps some clients append."""
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)


async def call_with_retries(
    request: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    classify: Callable[[BaseException], ErrorKind],
    name: str,
    counters: RetryCounters | None = None,
) -> T:
    """``await request()`` until it succeeds, a fatal error, or the policy gives up.

    Args:
        request: Makes one attempt (called again for each).
        policy: Attempts, pauses and deadline.
        classify: Sorts an error into retry, overload or fatal.
        name: The sample, for the error message (e.g. ``s3://bucket/key``).
        counters: Updated with the retries and waits.

    Raises:
        StorageError: Gave up; names ``name``, the attempts and the time, and chains the last error.
        Exception: A fatal error, as raised by ``request``.
    """
    started = time.monotonic()
    failures = 0
    waits = 0
    while True:
        try:
            return await request()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            kind = classify(error)
            if kind == "fatal":
                raise
            elapsed = time.monotonic() - started
            if kind == "overload":
                waits += 1
                pause = _jitter.uniform(0, min(policy.max_delay, policy.base_delay * 2 ** min(waits, 10)))
                if counters is not None:
                    counters.overloads += 1
            else:
                failures += 1
                pause = policy.pause(failures - 1, _jitter)
                if counters is not None:
                    counters.retries += 1
            if failures >= policy.attempts or elapsed + pause > policy.deadline:
                if counters is not None:
                    counters.given_up += 1
                raise StorageError(
                    f"{name}: gave up after {failures + waits} tries over {elapsed:.1f} s "
                    f"({failures} failed, {waits} server-busy waits); last error: {type(error).__name__}: {first_line(error)}"
                ) from error
            await asyncio.sleep(pause)
