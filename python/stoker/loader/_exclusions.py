"""Leaving samples out of an epoch on purpose (`Loader.exclude`): the batches of some steps on
this rank, or the samples of some keys for every rank (while the loop runs too, every rank at
the same step); recorded in the state (a resume keeps
them out), counted apart by `verify_epoch`, logged, and written beside the provenance ledger
when one is kept. A part of the Loader, given what it reads; the Loader decides when (between
two batches, or between runs of the loop)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .._bounded import key_list, shown_logger
from ..errors import ConfigurationError
from ..observe import write_exclusion
from ..sampling import Sampler
from ._assembly import BatchAssembler
from .state import Deliveries, LoaderState

__all__ = ["Exclusions"]

_logger = shown_logger("stoker.loader")


class Exclusions:
    """What `Loader.exclude` does, for one Loader.

    Args:
        sampler: The Loader's sampler.
        deliveries: Its delivery bookkeeping (the step, the digests, the ledger).
        assembler: Its batch assembler (keys by storage index).
        state: Its `LoaderState` (which leaves keys out for every rank).
        batch_size: Samples per batch.
        batch_count: Batches a number of samples makes (with the Loader's ``drop_last``).
        refusal: Why this Loader takes no exclusion (buckets, a mixture), or None.
        in_order: Whether the Loader delivers its batches in the plan's order.
    """

    def __init__(
        self,
        sampler: Sampler,
        deliveries: Deliveries,
        assembler: BatchAssembler,
        state: LoaderState,
        *,
        batch_size: int,
        batch_count: Callable[[int], int],
        refusal: str | None,
        in_order: bool,
    ) -> None:
        self.sampler, self.deliveries, self.assembler, self.state = sampler, deliveries, assembler, state
        self.batch_size, self.batch_count, self.refusal, self.in_order = batch_size, batch_count, refusal, in_order

    def check_steps(self, steps: range) -> None:
        """``steps`` are consecutive steps of this epoch not delivered yet.

        Raises:
            ConfigurationError: They are not, or this Loader takes no exclusion (named).
        """
        if not isinstance(steps, range) or steps.step != 1 or len(steps) == 0:
            raise ConfigurationError(f"exclude(steps=...) takes a range of consecutive steps, e.g. range(100, 120); got {steps!r}")
        now = self.deliveries.next_step
        last = now + self.batch_count(self.sampler.plan_arrays().size) - 1
        if steps.start < now or steps.stop - 1 > last:
            raise ConfigurationError(
                f"exclude(steps={steps.start}..{steps.stop - 1}): this rank is at step {now} and epoch "
                f"{self.sampler.epoch} ends with step {last}; only steps not delivered yet, in this epoch, can be left out"
            )

    def by_steps(self, steps: range) -> None:
        """Leave the batches of ``steps`` (checked) out, on this rank."""
        first = (steps.start - self.deliveries.next_step) * self.batch_size
        part = self.sampler.plan_arrays().part(first, first + len(steps) * self.batch_size)
        self._record(steps, self.assembler.keys_of(part.indices[~part.padding].tolist()))
        self.deliveries.exclude(part.positions, part.padding)
        named = self.assembler.keys_of(part.indices[~part.padding][:3].tolist())
        _logger.info(
            "steps %d to %d left out of epoch %d on rank %d: %d samples (%s...), recorded as left out",
            steps.start,
            steps.stop - 1,
            self.sampler.epoch,
            self.sampler.rank,
            int((~part.padding).sum()),
            ", ".join(named),
        )

    def read_keys(self, keys: Iterable[object]) -> list[str]:
        """``keys`` (any iterable of keys, consumed here, once) as a list: at most as many as
        the storage has samples, each text (or UTF-8 bytes).

        Raises:
            ConfigurationError: Not an iterable of keys, more keys than samples, or a key that
                is null, not text or not UTF-8 (named with its position).
        """
        return key_list(keys, "exclude(keys=...)", most=len(self.state.storage))

    def by_keys(self, keys: list[str], *, from_slot: int | None = None) -> None:
        """Leave the samples of ``keys`` (`read_keys`) not delivered yet out, for every rank
        (from slot ``from_slot`` of each rank's plan on, when `check_keys` gave one).

        Raises:
            ConfigurationError: An unknown key, or a Loader that takes no exclusion by key
                (each named).
        """
        self._check_keys(keys)
        held = self.deliveries.holding
        if from_slot is None and held and self.sampler.world_size > 1:
            from_slot = self._slot_beyond_reach()
        left_out, already = self.state.exclude_keys(keys, from_slot=from_slot)
        self._record(None, left_out)
        reached = "delivered, read ahead" if held else "delivered"
        _logger.info(
            "%d samples left out of epoch %d by key on rank %d (recorded as left out)%s",
            len(left_out),
            self.sampler.epoch,
            self.sampler.rank,
            f"; already {reached} or left out this epoch, so not: {', '.join(already)}{', ...' if len(already) == 5 else ''}"
            if already
            else "",
        )

    def check_keys(self, keys: list[str]) -> int | None:
        """``keys`` can be left out while the loop runs (`by_keys`, between the next two batches).

        Returns:
            With several ranks whose batches a read-ahead wrapper holds: the slot of each
            rank's plan from which they go, the same on every rank at the same step (the
            slots the training loop has, and those the wrapper may read ahead of it). None:
            from wherever the loop is when they apply.

        Raises:
            ConfigurationError: As `by_keys` does, several ranks delivering out of order, or
                several ranks behind a wrapper that holds batches without saying how many.
        """
        self._check_keys(keys)
        if self.sampler.world_size > 1 and not self.in_order:
            # Out of order, a rank's batches so far are not its plan's first ones, and another
            # rank's differ: no rank can tell what the world delivered without asking.
            raise ConfigurationError(
                "exclude(keys=...) while the loop runs, with several ranks, needs batches in order (Sampling(in_order=True)), "
                "so that each rank knows what the others delivered; otherwise give the keys between runs of the loop, "
                "after a resume from every rank's states"
            )
        self.state.exclusion_indices(keys)
        if self.sampler.world_size == 1 or not self.deliveries.holding:
            return None
        return self._slot_beyond_reach()

    def _check_keys(self, keys: list[str]) -> None:
        if self.refusal is not None:
            raise ConfigurationError(f"exclude(keys=...) does not take a Loader {self.refusal} yet")

    def _slot_beyond_reach(self) -> int:
        """`Deliveries.slot_beyond_reach`, with several ranks behind a read-ahead wrapper.

        Raises:
            ConfigurationError: The wrapper did not say how far it reads ahead.
        """
        slot = self.deliveries.slot_beyond_reach(self.batch_size)
        if slot is None:
            # Each rank's wrapper may have read a different number of batches ahead: no slot
            # is past every rank's reach unless the wrapper says how far it reads.
            raise ConfigurationError(
                "exclude(keys=...) with several ranks while a read-ahead wrapper holds batches without saying how far it reads "
                f"ahead (hold_deliveries(ahead=...), as stoker.device.to_device does; {self.deliveries.held} batch(es) held now): "
                "give the keys between runs of the loop, or leave steps out (exclude(steps=...))"
            )
        return slot

    def _record(self, steps: range | None, keys: list[str]) -> None:
        """Beside the provenance ledger, if one is kept: what was left out, when (see
        `stoker.observe.read_exclusions`)."""
        ledger = self.deliveries.ledger
        if ledger is not None:
            write_exclusion(
                ledger.directory, rank=self.sampler.rank, epoch=self.sampler.epoch, step=self.deliveries.next_step, steps=steps, keys=keys
            )
