"""The Loader's log of bad samples (`stoker.failures.Failure`): which sample failed, where, why,
and what was done.

A sample is either delivered as real data or listed here. The policy (``on_error``) decides what
happens to a bad sample: ``"raise"`` stops the epoch with `stoker.errors.SampleError`, ``"skip"`` puts another
sample in its slot (chosen deterministically), ``"zero"`` zero-fills its slot and marks it
invalid. Whatever the policy, each failure is counted, listed in `FailureLog.failures`, written to
the quarantine file when there is one, and summed up in one warning per epoch; past the budget
(``max_bad_samples``) the epoch stops with `TooManyBadSamplesError`.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path

from .._bounded import shown_logger
from ..failures import Failure

__all__ = ["FailureLog"]

_logger = shown_logger("stoker.loader")
# Failures kept in memory; the count and the quarantine file have them all.
_KEPT = 10_000


class FailureLog:
    """Every bad sample the Loader met: thread-safe, counted per epoch, optionally written to a
    quarantine file (JSON lines: key, stage, reason, epoch, position, action) that a user can
    read to fix or drop the samples.

    Args:
        quarantine: Path of the quarantine file (appended to), or None.

    Raises:
        OSError: The quarantine file cannot be opened for appending (checked now, not at the
            first bad sample).
    """

    def __init__(self, quarantine: str | os.PathLike[str] | None = None) -> None:
        self.quarantine = Path(quarantine) if quarantine is not None else None
        if self.quarantine is not None:
            try:
                open(self.quarantine, "a", encoding="utf-8").close()
            except OSError as error:
                raise OSError(error.errno, f"cannot append to the quarantine file {self.quarantine}: {error.strerror}") from error
        self.failures: list[Failure] = []
        self.count = 0
        self._lock = threading.Lock()
        self._by_epoch: Counter[int] = Counter()
        self._by_kind: Counter[str] = Counter()  # every failure, also past the kept list
        self._summarized: Counter[int] = Counter()

    def add(self, failure: Failure) -> int:
        """Record one failure; returns how many failed in its epoch so far."""
        with self._lock:
            self.count += 1
            epoch = failure.epoch if failure.epoch is not None else -1
            self._by_epoch[epoch] += 1
            self._by_kind[f"{failure.stage}: {failure.outcome}"] += 1
            if len(self.failures) < _KEPT:
                self.failures.append(failure)
            if self.quarantine is not None:
                with open(self.quarantine, "a", encoding="utf-8") as file:
                    file.write(json.dumps(failure.to_json()) + "\n")
            return self._by_epoch[epoch]

    def kept(self) -> list[Failure]:
        """A copy of the kept failures, oldest first, taken under the lock (decode threads add
        to the list while the training loop or a monitor reads it)."""
        with self._lock:
            return list(self.failures)

    def in_epoch(self, epoch: int) -> list[Failure]:
        """The kept failures of ``epoch``."""
        with self._lock:
            return [failure for failure in self.failures if failure.epoch == epoch]

    def counts(self) -> dict[str, int]:
        """Failures by stage and action, e.g. ``{"decode: replaced": 3, "fetch: zero-filled": 1}``."""
        with self._lock:
            return dict(self._by_kind)

    def summarize(self, epoch: int, samples: int) -> None:
        """Log one warning for ``epoch`` if it has failures not yet summed up."""
        with self._lock:
            count = self._by_epoch[epoch]
            if count == self._summarized[epoch]:
                return
            self._summarized[epoch] = count
            failures = [failure for failure in self.failures if failure.epoch == epoch]
        stages = Counter(failure.stage for failure in failures)
        actions = Counter(failure.outcome for failure in failures)
        first = failures[0] if failures else None
        _logger.warning(
            "epoch %d: %d bad sample(s) (%s; %s) by the time %d samples were delivered%s; the list is in loader.failures%s",
            epoch,
            count,
            ", ".join(f"{stage} {number}" for stage, number in stages.items()),
            ", ".join(f"{action} {number}" for action, number in actions.items()),
            samples,
            f", e.g. {first.describe()}" if first is not None else "",
            f" and {self.quarantine}" if self.quarantine is not None else "",
        )
