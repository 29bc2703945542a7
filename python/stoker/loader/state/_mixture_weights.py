"""A weighted mixture's weights changed between steps (a curriculum): the samples not yet
delivered this epoch drawn again with the new weights, and the change kept as part of the
Loader's state (a few spans of positions, however far into the epoch) so a resume reproduces the
same stream. A part of the Loader, given the mixture, the sampler and the assembler it updates."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ConfigurationError
from ...sampling import Sampler
from ...storage import MixedStorage
from .._assembly import BatchAssembler
from ._mixture_schedule import MAX_SCHEDULE_POINTS, MixtureSchedule

__all__ = ["MAX_MIXTURE_CHANGES", "MAX_MANUAL_CHANGES", "MixtureWeights"]

MAX_MANUAL_CHANGES = 1024
"""Changes of weights by hand (`Loader.set_mixture_weights`) one epoch takes."""
MAX_MIXTURE_CHANGES = MAX_MANUAL_CHANGES + MAX_SCHEDULE_POINTS
"""Changes of weights one epoch holds at most, by hand and by a schedule: each redraws the rest
of the epoch (time in the epoch's samples), and a resume replays every one, so a saved state
with more (10**5 took 30-45 s of CPU to resume) is refused by name before any is replayed."""


class MixtureWeights:
    """Applies weight changes to one Loader's mixture.

    Args:
        storage: The Loader's mixture.
        sampler: Its sampler (which positions were delivered, the epoch's order).
        assembler: Its batch assembler (given the mixture's new keys and labels).
    """

    def __init__(self, storage: MixedStorage, sampler: Sampler, assembler: BatchAssembler) -> None:
        self.storage, self.sampler, self.assembler = storage, sampler, assembler
        self.schedule: MixtureSchedule | None = None  # Loader.set_mixture_schedule, or a state's

    def check(self, weights: dict[str, float]) -> None:
        """Refuse missing or non-positive weights (the mixture's own check)."""
        self.storage.check_weights(weights)

    def check_room(self) -> None:
        """Refuse a change by hand past `MAX_MANUAL_CHANGES` in this epoch (a schedule's
        changes, at most `MAX_SCHEDULE_POINTS`, always have room: a state saved with them loads).

        Raises:
            ConfigurationError: This epoch's weights already changed that many times.
        """
        if len(self.storage.changes) >= MAX_MANUAL_CHANGES:
            raise ConfigurationError(
                f"set_mixture_weights: this epoch's weights changed {len(self.storage.changes):,} times; an epoch takes "
                f"{MAX_MANUAL_CHANGES:,} changes by hand (each redraws the epoch's rest, and a resume replays them all): "
                "change them at the next epoch, or give the curriculum as a schedule (set_mixture_schedule)"
            )

    def apply(self, weights: dict[str, float]) -> None:
        """Draw the samples not yet delivered this epoch again with ``weights``."""
        positions = self.sampler.delivered_positions()
        # The state keeps the positions as spans (a few, however far into the epoch), not the
        # storage indices (one number a sample): the order maps them back when it is loaded.
        self.storage.reweight(weights, self.sampler.order_function()(positions), record=spans(positions))
        self.assembler.set_samples(self.storage.keys, self.storage.labels)

    def delivered_indices(self, record: object) -> np.ndarray:
        """The storage indices a saved change's record of delivered positions stands for.

        Raises:
            ValueError: Not spans of this epoch's positions.
        """
        total = self.sampler.num_samples
        if not isinstance(record, list) or not all(
            isinstance(span, list) and len(span) == 2 and all(type(end) is int for end in span) and 0 <= span[0] < span[1] <= total
            for span in record
        ):
            raise ConfigurationError(f"mixture change: 'delivered_record' must be spans [start, end) of the epoch's {total} positions")
        positions = np.concatenate([np.arange(start, end, dtype=np.int64) for start, end in record]) if record else np.zeros(0, np.int64)
        return self.sampler.order_function()(positions)

    # The state's "mixture" part (`SavedPart`): the mixture's weights and their changes this epoch.
    state_key = "mixture"
    loads_before_the_order = False
    same_on_every_rank = False  # each rank's changes record its own deliveries

    def saved_state(self) -> dict[str, object]:
        """The mixture's weights and this epoch's changes of them, as plain data."""
        return self.storage.state()

    def load_saved(self, saved: list[Any], *, ranks: int) -> None:
        """Take the mixture's part of saved states (``ranks`` of them); none saved, nothing changes.

        Raises:
            ValueError: A change of weights, resumed on another world size.
        """
        if not saved:
            return
        mixtures: list[dict[str, object]] = saved
        if ranks > 1 and any(mixture["changes"] for mixture in mixtures):
            raise ConfigurationError("an epoch whose mixture weights changed resumes on the same world size only")
        self.storage.load_state(mixtures[0], resolve=self.delivered_indices)
        self.assembler.set_samples(self.storage.keys, self.storage.labels)


class MixtureSchedulePart:
    """The state's ``"mixture_schedule"`` part (`SavedPart`): a mixture's schedule of weights
    and the last point applied, saved where the Loader has one, loaded over any it had."""

    state_key = "mixture_schedule"
    loads_before_the_order = False
    same_on_every_rank = True

    def __init__(self, mixture: MixtureWeights) -> None:
        self.mixture = mixture

    def saved_state(self) -> dict[str, Any] | None:
        """The schedule as plain data, or None without one."""
        schedule = self.mixture.schedule
        return schedule.state() if schedule is not None else None

    def load_saved(self, saved: list[Any], *, ranks: int) -> None:
        """The saved schedule (every rank saved the same one, and where it stood is the same on
        all: lockstep); none saved, the Loader keeps its own.

        Raises:
            ValueError: Not what `MixtureSchedule.state` writes, or weights the mixture refuses.
        """
        if saved:
            self.mixture.schedule = MixtureSchedule.from_state(saved[0], self.mixture.check)


def spans(positions: np.ndarray) -> list[list[int]]:
    """Ascending ``positions`` as [start, end) spans of consecutive ones."""
    if len(positions) == 0:
        return []
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts = positions[np.concatenate([[0], breaks])]
    ends = positions[np.concatenate([breaks - 1, [len(positions) - 1]])] + 1
    return [[int(start), int(end)] for start, end in zip(starts.tolist(), ends.tolist())]
