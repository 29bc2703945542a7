"""The optional parts of a Loader's state, each saved and loaded by the part that owns it.

Every state holds the sampler's place, the fingerprint and the delivery digests (`LoaderState`
writes and checks those itself). The rest depends on what the Loader was given: a mixture's
weights, its schedule of weights, a schedule of filters. Each such part implements `SavedPart`
and is registered with the `LoaderState` when the Loader is built; `LoaderState` writes each
registered part's state under its key and hands each part, at a resume, what every rank saved
under that key. A new part of the state is one class implementing this, registered where the
Loader makes its parts, and touches neither `state_dict` nor `load_state_dict`.

(The resume by key after the dataset changed, `DatasetChange`, is not one: it decides how the
sampler's own place is read, so `LoaderState` runs it itself.)
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["SavedPart"]


class SavedPart(Protocol):
    """One optional part of a Loader's state, saved and loaded by the part that owns it."""

    state_key: str
    """Its key in the state (``"mixture"``, ``"mixture_schedule"``, ``"filter_schedule"``)."""

    loads_before_the_order: bool
    """True where it decides which samples the epoch holds (a filter): loaded before the
    sampler's place, in a resume of the same dataset. False: loaded after it (in any resume)."""

    same_on_every_rank: bool
    """True where every rank saves the same value (a schedule: the ranks move in lockstep):
    states of several ranks must then all hold it, alike, or none (refused by name otherwise;
    was: the first one taken, so a state edited on one rank resumed every rank on it)."""

    def saved_state(self) -> Any | None:
        """Its state as plain data, or None when it has nothing to save (the key is left out).
        Called under the record lock, with every other part of the state."""
        ...

    def load_saved(self, saved: list[Any], *, ranks: int) -> None:
        """Take what the ``ranks`` states being loaded saved under `state_key` (one value per
        state that has it, in rank order; empty when none has).

        Raises:
            ValueError: A saved value that is not what `saved_state` writes, named.
        """
        ...
