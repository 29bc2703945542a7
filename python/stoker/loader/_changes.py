"""Changes to the rest of an epoch asked for while the loop runs, applied between two batches.

`Loader.set_mixture_weights`, a mixture schedule's point coming due, and `Loader.exclude` (by
step and by key) each change what the rest of the epoch delivers. While the loop runs, the
asking thread is rarely the loop's, and the pipeline has read ahead: so each is a `Change`,
put in the Loader's one `ChangesBetweenBatches`, and the loop's thread takes them all, in one
place, before its next batch, stops the pipeline (what it read ahead was not delivered), applies
them under the record lock and goes on over the rest.

A new kind of change is one class here: how it joins the changes already waiting (`admit`,
run in the asking thread, so a refusal reaches the caller), and what it does to the Loader's
parts (`apply` to a `ChangeTarget`, run by the loop's thread under the record lock, so a state
is of before or after it, never between). As every part of the Loader, a change never knows
the Loader: it is given the parts it changes.
Read-ahead wrappers have one rule for all: a change applies from the first batch the loop has
not yet handed out; what a wrapper holds already stays (see `Loader.hold_deliveries`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ._exclusions import Exclusions
    from .state import MixtureWeights

__all__ = ["Change", "ChangeTarget", "ChangesBetweenBatches", "ExcludeKeys", "ExcludeSteps", "NewWeights"]


@dataclass(frozen=True)
class ChangeTarget:
    """The Loader's parts that what the rest of an epoch delivers depends on (made once by the
    Loader; immutable): what changes apply to."""

    mixture: MixtureWeights | None  # a MixedStorage's weights and schedule; None for other storages
    exclusions: Exclusions


class Change:
    """One change to the rest of the epoch (a subclass per kind)."""

    order: ClassVar[int] = 0
    """Kinds waiting together apply in this order (new weights redraw the rest of the epoch
    before exclusions leave parts of it out), those of one kind in the order asked."""

    def admit(self, waiting: list[Change]) -> list[Change]:
        """The changes waiting once this one joins ``waiting`` (which it must not modify).

        Raises:
            ConfigurationError: It cannot wait beside one already waiting (named).
        """
        return [*waiting, self]

    def apply(self, target: ChangeTarget) -> None:
        """Apply it to the Loader's parts (the loop's thread, under the record lock)."""
        raise NotImplementedError


@dataclass(frozen=True)
class NewWeights(Change):
    """New weights for a `MixedStorage`: the user's (``through`` None) or a schedule's point
    (``through``: its step, marked applied with them). The newest weights win; a schedule's point
    they replace still counts as applied, so it is not applied again after them."""

    weights: dict[str, float]
    through: int | None = None

    def admit(self, waiting: list[Change]) -> list[Change]:
        earlier = [change for change in waiting if isinstance(change, NewWeights)]
        through = self.through
        for change in earlier:
            if change.through is not None and (through is None or change.through > through):
                through = change.through
        return [*(change for change in waiting if not isinstance(change, NewWeights)), NewWeights(self.weights, through)]

    def apply(self, target: ChangeTarget) -> None:
        mixture = target.mixture
        assert mixture is not None, "weights are only asked for over a mixture (Loader.set_mixture_weights checks)"
        mixture.apply(self.weights)
        if self.through is not None and mixture.schedule is not None:
            mixture.schedule.applied_through = self.through


@dataclass(frozen=True)
class ExcludeSteps(Change):
    """`Loader.exclude(steps=...)`: one range waits at a time (a second, other range would need
    the first's batches settled first: refused, where replacing it lost one without a word)."""

    steps: range
    order: ClassVar[int] = 1

    def admit(self, waiting: list[Change]) -> list[Change]:
        for change in waiting:
            if isinstance(change, ExcludeSteps):
                if change.steps != self.steps:
                    raise ConfigurationError(
                        f"exclude(steps={self.steps!r}) while exclude(steps={change.steps!r}) waits for the next "
                        "batch: give the steps as one range, or call again after the next batch"
                    )
                return waiting  # the same range asked again: once
        return [*waiting, self]

    def apply(self, target: ChangeTarget) -> None:
        target.exclusions.by_steps(self.steps)


@dataclass(frozen=True)
class ExcludeKeys(Change):
    """`Loader.exclude(keys=...)`: ``keys`` left out from ``slot`` (the first batch past what a
    read-ahead wrapper may hold; None: the next). Calls waiting together from the same slot are
    one change, their keys joined (each once): leaving out A then B is leaving out both, and two
    thousand one-key calls between two batches redrew the epoch's rest two thousand times, under
    the record lock, for 26 s."""

    keys: list[str]
    slot: int | None
    order: ClassVar[int] = 2

    def admit(self, waiting: list[Change]) -> list[Change]:
        for place, change in enumerate(waiting):
            if isinstance(change, ExcludeKeys) and change.slot == self.slot:
                joined = ExcludeKeys(list(dict.fromkeys([*change.keys, *self.keys])), self.slot)
                return [*waiting[:place], joined, *waiting[place + 1 :]]
        return [*waiting, self]

    def apply(self, target: ChangeTarget) -> None:
        target.exclusions.by_keys(self.keys, from_slot=self.slot)


class ChangesBetweenBatches:
    """The changes waiting for the loop's next batch. Shared: any thread may `put`, the loop's
    thread `take`s; `_lock` guards the list, so a change is added and taken in one turn of it,
    never lost between a read and a write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[Change] = []

    def put(self, change: Change) -> None:
        """Add ``change`` (checked against those waiting, see `Change.admit`).

        Raises:
            ConfigurationError: It cannot wait beside one already waiting.
        """
        with self._lock:
            self._waiting = change.admit(self._waiting)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._waiting)

    def take(self) -> list[Change]:
        """Every change waiting, in the order to apply them; none wait after."""
        with self._lock:
            taken, self._waiting = self._waiting, []
        return sorted(taken, key=lambda change: change.order)  # stable: one kind in the order asked
