"""Retries for network reads: exponential backoff with full jitter, and overload as backpressure.

Every network backend sorts its errors into three kinds: ``"retry"`` (a 5xx, a timeout, a reset
or refused connection: try again after a growing, randomised pause, so many clients that failed
together do not come back together), ``"overload"`` (the server or the driver says it is too busy:
wait and try again without spending an attempt; only the deadline ends it) and ``"fatal"`` (a
missing key, bad credentials: no retry). When the deadline (or a set number of attempts) runs
out, `StorageUnavailableError` names the sample and says how long it tried; while a store stays
unreachable, a warning every few seconds says so.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

from ..._bounded import shown_logger
from ...errors import ConfigurationError, StorageError, StorageUnavailableError

__all__ = ["ErrorKind", "RetryCounters", "RetryPolicy", "call_with_retries", "failure_line", "first_line"]

T = TypeVar("T")
ErrorKind = Literal["retry", "overload", "fatal"]


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed request is tried again.

    The default rides out a server restart or a short network outage: an unreachable store is
    retried with growing pauses (at most ``max_delay`` apart) for up to ``deadline`` seconds per
    sample, with a warning every ``log_every`` seconds while it lasts, and only then raised as
    `StorageUnavailableError`. Lower the deadline for interactive use, raise it for long
    maintenance windows; ``STOKER_RETRY_DEADLINE`` (seconds) sets the default, for the CLI too.
    Opening a dataset (its manifest and indexes) waits at most ``open_deadline``: a store that
    cannot be reached when a job starts (a wrong endpoint) fails fast.

    Attributes:
        attempts: Tries in all for retryable errors (None: as many as the deadline allows).
        base_delay: Pause ceiling before the first retry, doubled per retry (seconds).
        max_delay: Largest pause ceiling (seconds).
        deadline: Longest time one sample may take over all its tries and waits (seconds).
        open_deadline: The same for what opening a dataset reads (seconds; at most ``deadline``).
        log_every: Seconds between the warnings that say a store is still unreachable.
    """

    attempts: int | None = None
    base_delay: float = 0.05
    max_delay: float = 2.0
    deadline: float = field(default_factory=lambda: _deadline_from_environment())
    open_deadline: float = 30.0
    log_every: float = 10.0

    def __post_init__(self) -> None:
        if (
            (self.attempts is not None and self.attempts < 1)
            or self.base_delay < 0
            or self.max_delay < 0
            or self.deadline <= 0
            or self.log_every <= 0
        ):
            raise ConfigurationError(f"invalid retry policy {self}")
        if self.open_deadline <= 0:
            raise ConfigurationError(f"invalid retry policy {self}")

    def for_opening(self) -> RetryPolicy:
        """This policy with the deadline of opening a dataset."""
        return replace(self, deadline=min(self.deadline, self.open_deadline))

    def pause(self, retry: int, generator: random.Random) -> float:
        """Full jitter: uniform in [0, min(max_delay, base_delay * 2**retry)]."""
        return generator.uniform(0, min(self.max_delay, self.base_delay * (2 ** min(retry, 30))))


def _deadline_from_environment() -> float:
    text = os.environ.get("STOKER_RETRY_DEADLINE")
    if not text:
        return 180.0
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(f"STOKER_RETRY_DEADLINE={text!r} is not a number of seconds") from None
    if value <= 0:
        raise ConfigurationError(f"STOKER_RETRY_DEADLINE={text!r} must be positive")
    return value


class RetryCounters:
    """What retries happened, for stats and for the outage log of one store.

    Attributes:
        retries: Failed tries that were tried again.
        overloads: Waits because the server said it was busy.
        given_up: Samples given up on after the deadline.
    """

    def __init__(self, store: str = "storage") -> None:
        self.store = store
        self.retries = 0
        self.overloads = 0
        self.given_up = 0
        self._lock = threading.Lock()
        self._outage_since: float | None = None
        self._last_warning = 0.0

    def failed(self, error: BaseException, policy: RetryPolicy) -> None:
        """A try failed with a retryable error: start or continue the outage, warn now and then."""
        now = time.monotonic()
        with self._lock:
            if self._outage_since is None:
                self._outage_since = self._last_warning = now
                return
            if now - self._last_warning < policy.log_every:
                return
            self._last_warning = now
            lasted = now - self._outage_since
        _logger.warning(
            "%s unreachable for %.0f s, retrying until each sample's deadline (%.0f s); last error: %s: %s",
            self.store,
            lasted,
            policy.deadline,
            type(error).__name__,
            first_line(error),
        )

    def succeeded(self) -> None:
        """A try succeeded: an outage, if one was going on, is over."""
        if self._outage_since is None:
            return
        with self._lock:
            since, self._outage_since = self._outage_since, None
        if since is not None and time.monotonic() - since >= 1.0:
            _logger.warning("%s reachable again after %.1f s", self.store, time.monotonic() - since)


_jitter = random.Random()
_logger = shown_logger("stoker.storage")


def first_line(error: BaseException) -> str:
    """An error's message without the multi-line debug dumps some clients append."""
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)


def failure_line(name: str, error: BaseException) -> str:
    """``name: what went wrong``, in one line: the error's `first_line`, after its type; an error
    that names what failed itself (``https://host/a.tar: HTTP 400 (Bad Request)``, of sample
    ``https://host/a.tar#0007``) is not named twice."""
    said = first_line(error)
    named, colon, rest = said.partition(": ")
    if colon and named and name.startswith(named):
        return f"{name}: {rest}"
    return f"{name}: {type(error).__name__}: {said}"


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
        classify: Sorts an error into retry, overload or fatal (our own `StorageError` is
            always final: it is a verdict, such as a checksum mismatch, not a failed try).
        name: The sample, for the error message (e.g. ``s3://bucket/key``).
        counters: Updated with the retries and waits, and told of outages for the log.

    Raises:
        StorageUnavailableError: The store kept failing past the deadline (or the attempts);
            names ``name``, the tries and the time, and chains the last error.
        Exception: A fatal error, as raised by ``request``.
    """
    started = time.monotonic()
    failures = 0
    waits = 0
    while True:
        try:
            result = await request()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            kind = "fatal" if isinstance(error, StorageError) else classify(error)
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
            if counters is not None:
                counters.failed(error, policy)
            out_of_attempts = policy.attempts is not None and failures >= policy.attempts
            if out_of_attempts or elapsed + pause > policy.deadline:
                if counters is not None:
                    counters.given_up += 1
                store = counters.store if counters is not None else name
                raise StorageUnavailableError(
                    f"{name}: gave up after {failures + waits} tries over {elapsed:.1f} s "
                    f"({failures} failed, {waits} server-busy waits; the retry deadline is {policy.deadline:g} s); "
                    f"last error: {type(error).__name__}: {first_line(error)}",
                    store=store,
                    samples=(name,),
                    seconds=elapsed,
                ) from error
            await asyncio.sleep(pause)
        else:
            if counters is not None:
                counters.succeeded()
            return result
