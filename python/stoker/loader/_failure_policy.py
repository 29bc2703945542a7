"""What the Loader does with the bad samples of one batch: ``on_error`` applied, every one recorded.

The Loader finds the bad samples (unread at fetch, undecodable at decode) and knows how to put
another sample into a slot or zero it; this policy decides which, counts against the epoch's
budget, and records each sample in the `FailureLog`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import SampleError, TooManyBadSamplesError
from ..failures import Failure, OnError
from ._failures import FailureLog
from ._options import FailurePolicy

__all__ = ["BadSampleHandler", "replacement_candidates"]

# Replacement samples tried for one bad sample under on_error="skip".
REPLACEMENT_TRIES = 16


def replacement_candidates(seed: int, epoch: int, position: int, size: int) -> list[int]:
    """Storage indices to try, in order, in place of the bad sample at ``position``: drawn from
    (seed, epoch, position) only, so a resumed or re-run epoch makes the same choice."""
    generator = np.random.default_rng([seed & 0xFFFFFFFF, epoch, position, 0x5EED])
    return [int(index) for index in generator.integers(0, size, size=REPLACEMENT_TRIES)]


class BadSampleHandler:
    """A `FailurePolicy` at work: ``on_error`` applied with its budget and its log.

    Args:
        policy: ``on_error``, the budget (``max_bad_samples``: a count, a fraction below 1.0 of
            the epoch rounded up, or None for no limit) and the quarantine file.
        source: The storage the samples come from, as its records name it.
    """

    def __init__(self, policy: FailurePolicy, source: str = "") -> None:
        # The policy was checked when it was built (`FailurePolicy`): not again here.
        self.source = source
        self.on_error: OnError = policy.on_error
        self.max_bad_samples = policy.max_bad_samples
        self.log = FailureLog(policy.quarantine)
        self.budget: int | None = None

    def start_epoch(self, epoch_samples: int) -> None:
        """Set the budget of an epoch of ``epoch_samples`` samples (this rank's)."""
        if self.max_bad_samples is None:
            self.budget = None
        elif isinstance(self.max_bad_samples, float):
            self.budget = math.ceil(self.max_bad_samples * epoch_samples)
        else:
            self.budget = int(self.max_bad_samples)

    def apply(
        self,
        failed: dict[int, tuple[str, str]],
        *,
        epoch: int,
        keys: list[str],
        positions: list[int],
        replace: Callable[[int], str | None],
        zero: Callable[[int], None],
    ) -> None:
        """Deal with the bad samples of one batch.

        Args:
            failed: ``{slot: (stage, reason)}``.
            epoch: The epoch, for the records.
            keys: The batch's keys (the bad samples' own, not yet their replacements').
            positions: The batch's epoch positions.
            replace: Puts another sample into a slot; returns its key, or None if none could
                be read.
            zero: Zero-fills a slot and marks it invalid.

        Raises:
            SampleError: ``on_error="raise"``; lists the batch's bad samples.
            TooManyBadSamplesError: The epoch's budget ran out.
        """
        records: list[Failure] = []
        for slot, (stage, reason) in sorted(failed.items()):
            action = "raised"
            if self.on_error == "skip":
                replacement = replace(slot)
                action = (
                    f"replaced by {replacement!r}"
                    if replacement is not None
                    else f"zero-filled (no readable replacement in {REPLACEMENT_TRIES} tries)"
                )
                if replacement is None:
                    zero(slot)
            elif self.on_error == "zero":
                action = "zero-filled"
                zero(slot)
            records.append(
                self._record(Failure(keys[slot], stage, reason, action, source=self.source, epoch=epoch, position=positions[slot]))
            )
        if self.on_error == "raise" and records:
            raise SampleError(records)

    def drop(self, failed: dict[int, tuple[str, str]], *, epoch: int, keys: list[str], positions: list[int]) -> None:
        """Deal with the bad documents of one chunk of a text stream, where a document has no
        slot to fill: under ``"skip"`` it is left out of the packed rows (its tokens are
        none), under ``"raise"`` the run stops. Every one is recorded, as in `apply`.

        Args:
            failed: ``{slot: (stage, reason)}``, slots in ``keys`` and ``positions``.
            epoch: The epoch, for the records.
            keys: The chunk's document names.
            positions: The chunk's epoch positions.

        Raises:
            SampleError: ``on_error="raise"``; lists the chunk's bad documents.
            TooManyBadSamplesError: The epoch's budget ran out.
        """
        action = "raised" if self.on_error == "raise" else "skipped"  # left out: no tokens packed
        records = [
            self._record(Failure(keys[slot], stage, reason, action, source=self.source, epoch=epoch, position=positions[slot]))
            for slot, (stage, reason) in sorted(failed.items())
        ]
        if self.on_error == "raise" and records:
            raise SampleError(records)

    def _record(self, record: Failure) -> Failure:
        """Log ``record``; past the epoch's budget (when not raising anyway), stop the epoch.

        Raises:
            TooManyBadSamplesError: The epoch's budget ran out.
        """
        count = self.log.add(record)
        if self.on_error != "raise" and self.budget is not None and count > self.budget:
            raise TooManyBadSamplesError(count, self.budget, self.log.in_epoch(record.epoch if record.epoch is not None else -1))
        return record
