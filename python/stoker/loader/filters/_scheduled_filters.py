"""The Loader's part that reads each epoch under the filter its schedule has in force
(`Loader.set_filter_schedule`; the schedule itself: `FilterSchedule`).

An epoch under a scheduled filter reads through a view of the Loader's storage (the samples the
filter keeps, and ``where=``'s when one is given too): the sampler's order, the ranks' equal
shares, the state's positions and `verify_epoch` are all over that view, as with a dataset
filtered from the start. The view is worked out from the columns when its epoch begins (the
column cache makes that cheap after the first time) and never per read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..._bounded import shown_logger
from ...errors import ConfigurationError
from ...sampling import Sampler
from ...storage import FilteredStorage, Storage
from .._capabilities import shuffle_blocks
from ._filter_schedule import FilterSchedule
from ._where import filter_storage

__all__ = ["ScheduledFilters"]

_logger = shown_logger("stoker.loader")


class ScheduledFilters:
    """Applies one Loader's filter schedule at the start of each epoch.

    Args:
        storage: The Loader's storage (filtered by ``where=`` when one is given).
        unfiltered: The storage before ``where=`` (the same one without it): where the
            scheduled filters' columns are read.
        sampler: The Loader's sampler (its domain becomes the view's).
        shuffle: The Loader's shuffle (``"block"`` needs the view's blocks).
        read_through: The Loader's way to read through a view of its storage (with the view's
            indices in the storage), or through the storage itself (None).
    """

    def __init__(
        self,
        storage: Storage,
        unfiltered: Storage,
        sampler: Sampler,
        *,
        shuffle: str,
        read_through: Callable[[Storage, np.ndarray | None], None],
    ) -> None:
        self.storage, self.unfiltered, self.sampler, self.shuffle = storage, unfiltered, sampler, shuffle
        self.read_through = read_through
        self.blocks = sampler.blocks  # the storage's own, for epochs under no scheduled filter
        self.bucket_of = sampler.buckets[0] if sampler.buckets is not None else None  # the storage's samples' buckets
        self.schedule: FilterSchedule | None = None
        # The filter this epoch reads under and its view (None: none): kept apart from the
        # schedule, which a new one replaces mid-epoch without changing the epoch's samples.
        self.expression: str | None = None
        self.view: FilteredStorage | None = None

    def set(self, points: Mapping[int, str | None], *, step: int, begun: bool) -> None:
        """Take a schedule (see `Loader.set_filter_schedule`); every filter in it is worked out
        now, so a bad one is named at once, not at the epoch it would begin.

        Args:
            points: ``{step: expression or None}``.
            step: The step of the Loader's next batch.
            begun: Whether the current epoch has delivered (or left out) anything: if not, it
                reads under the point in force at ``step``.

        Raises:
            ConfigurationError: A bad schedule, or a filter that does not parse, names a column
                the storage lacks or keeps nothing (named with its step).
        """
        schedule = FilterSchedule(points)
        point = schedule.in_force(step)
        now = None if begun or point is None else schedule.points[point]
        view = self._check(schedule, "filter schedule", keep=now)
        self.schedule = schedule
        if not begun:
            self._read_under(now, view)
        else:
            _logger.info(
                "filter schedule set during epoch %d: its points apply from the first epoch that begins at or after their steps (%s)",
                self.sampler.epoch,
                ", ".join(str(point) for point in schedule.points),
            )

    def begin_epoch(self, step: int) -> None:
        """An epoch begins with the batch of ``step``: read it under the point in force then.
        Forgets what the sampler delivered (call it before any delivery of the epoch)."""
        if self.schedule is not None:
            point = self.schedule.in_force(step)
            self._read_under(None if point is None else self.schedule.points[point])

    def state(self) -> dict[str, Any] | None:
        """The schedule and the filter the current epoch reads under, for the Loader's state."""
        if self.schedule is None:
            return None
        return {**self.schedule.state(), "epoch_filter": self.expression}

    # The state's "filter_schedule" part (`stoker.loader.state.SavedPart`): which samples the
    # epoch holds, so loaded before the sampler's place.
    state_key = "filter_schedule"
    loads_before_the_order = True
    same_on_every_rank = True

    def saved_state(self) -> dict[str, Any] | None:
        """`state`, or None with no schedule (the key is then left out)."""
        return self.state() or None

    def load_saved(self, saved: list[Any], *, ranks: int) -> None:
        """`restore` from the states' saved schedule (every rank saves the same: refused where
        they differ), or None."""
        self.restore(saved[0] if saved else None)

    def restore(self, saved: Any) -> None:
        """Before a state's sampler part is loaded: the schedule it saved, and its epoch read
        under the filter it was read under. A state saved without a schedule (None) continues its
        epoch under no scheduled filter; a schedule set on this Loader applies from the next.

        Raises:
            ConfigurationError: Not what `state` writes, or a filter the storage cannot work out.
        """
        if saved is None:
            if self.expression is not None:
                self._read_under(None)
            return
        schedule = FilterSchedule.from_state(saved)
        if "epoch_filter" not in saved:
            raise ConfigurationError("Loader state: 'filter_schedule' must say the filter its epoch reads under ('epoch_filter')")
        expression = saved["epoch_filter"]
        try:
            FilterSchedule({0: expression})  # the same check as a point's
        except ConfigurationError as error:
            raise ConfigurationError(f"Loader state: 'filter_schedule' 'epoch_filter': {error}"[:300]) from None
        view = self._check(schedule, "Loader state: 'filter_schedule'", keep=expression)
        if expression is not None and view is None:  # a filter no point of the schedule has
            try:
                view = self._view_for(expression)
            except ConfigurationError as error:
                raise ConfigurationError(f"Loader state: 'filter_schedule' 'epoch_filter': {error}"[:600]) from None
        self.schedule = schedule
        self._read_under(expression, view)

    def _check(self, schedule: FilterSchedule, what: str, *, keep: str | None) -> FilteredStorage | None:
        """Work out every filter of ``schedule`` now, so a bad one is named at once (as ``what``,
        with its step), not at the epoch it would begin. Returns the view of ``keep`` when it is
        one of them (the one an epoch reads under next: not worked out twice; a store without a
        column cache would read its json members again), else None."""
        kept = None
        for point, expression in schedule.points.items():
            if expression is not None:
                try:
                    view = self._view_for(expression)
                except ConfigurationError as error:
                    raise ConfigurationError(f"{what}, step {point}: {error}"[:600]) from None
                if expression == keep:
                    kept = view
        return kept

    def _read_under(self, expression: str | None, view: FilteredStorage | None = None) -> None:
        """Read the epoch through the view ``expression`` keeps (worked out unless given, or
        kept from the last epoch when it is the same filter), or the storage itself (None)."""
        if expression is None:
            view = None
            self.sampler.set_domain(len(self.storage), self.blocks, bucket_of=self.bucket_of)
            self.read_through(self.storage, None)
        else:
            if view is None:
                view = self.view if expression == self.expression and self.view is not None else self._view_for(expression)
            buckets = self.bucket_of[view.kept] if self.bucket_of is not None else None  # a bucketed epoch's: the view's own
            self.sampler.set_domain(len(view), shuffle_blocks(view, self.shuffle) if buckets is None else None, bucket_of=buckets)
            self.read_through(view, view.kept)
        self.expression, self.view = expression, view
        _logger.info(
            "epoch %d reads under %s: %d of %d samples",
            self.sampler.epoch,
            f"the scheduled filter {expression!r}" if expression is not None else "no scheduled filter",
            len(self.storage) if view is None else len(view),
            len(self.storage),
        )

    def _view_for(self, expression: str) -> FilteredStorage:
        """The Loader's storage's samples ``expression`` keeps, its columns read from the
        unfiltered storage (a ``where=`` view has none of its own)."""
        kept = filter_storage(self.unfiltered, expression)
        if self.storage is self.unfiltered:
            return kept
        assert isinstance(self.storage, FilteredStorage)
        _, both, _ = np.intersect1d(self.storage.kept, kept.kept, assume_unique=True, return_indices=True)
        if len(both) == 0:
            raise ConfigurationError(f"where {expression!r} with the Loader's own filter keeps none of {self.unfiltered.describe()}")
        return FilteredStorage.of(self.storage, both, f"{self.storage.describe()} and {expression}")
