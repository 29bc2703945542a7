"""Resuming an epoch after the dataset changed, by key (`Loader.load_state_dict(keys_before=...)`).

A state's positions are positions of the saved dataset's order. When samples were added or
removed since, the epoch continues in that same order, over the samples that are still there:
each old position reads its sample, by key, from the changed storage (a remapped view); the
positions of samples now gone are left out for every rank (named, counted, and accounted as
removed by `verify_epoch`), the rest dealt again over the ranks so they keep equal steps;
samples that were added join the next epoch (the default) or the end of this one, shuffled among
themselves. From the next epoch on the Loader reads the changed storage as it is.

Delivered samples stay delivered, and the state stays constant in size: nothing here is kept
per sample but for the time of the translation (an array of the old keys' new indices, once per
resume), and the state carries one `ChangeRecord`. A resume later in the same epoch translates
again, from the same key list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from ..._bounded import shown_logger
from ...errors import ConfigurationError, ProvenanceError
from ...sampling import Sampler
from ...storage import FilteredStorage, Storage
from ._key_join import KeyHashes, RepeatedKeyError, match_keys
from ._key_list import KeyList, key_array

__all__ = ["ChangeRecord", "DatasetChange", "NEW_SAMPLES", "positions_of"]

_logger = shown_logger("stoker.loader")

NEW_SAMPLES = ("next_epoch", "this_epoch")
_CHUNK = 1 << 20  # positions of the order scanned at once
_NAMED = 5  # keys named in the log per kind of change


def positions_of(sampler: Sampler, wanted: np.ndarray, size: int) -> np.ndarray:
    """The positions, among the first ``size`` of the epoch's order, of the storage indices
    ``wanted`` flags (a mask over storage indices): the order scanned a chunk at a time, once
    (it is a function of the position, with no inverse for every scheme). Ascending."""
    order = sampler.order_function()
    found = []
    for start in range(0, size, _CHUNK):
        positions = np.arange(start, min(size, start + _CHUNK), dtype=np.int64)
        found.append(positions[wanted[order(positions)]])
    return np.concatenate(found) if found else np.zeros(0, np.int64)


@dataclass(frozen=True)
class ChangeRecord:
    """What a resume after a dataset change did, carried in the state for the rest of its epoch."""

    epoch: int
    before: str  # the saved dataset's digest (its key list's name)
    samples_before: int
    added: int
    new_samples: str
    removed_delivered: int  # delivered before they were removed: they stay delivered
    removed_unread: int  # left out of the epoch
    changed: int = 0  # still there under the same key, with other bytes (where checksums tell)

    def state(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state(cls, saved: Any) -> ChangeRecord:
        """A record read back from a state (untrusted input: each field checked, named).

        Raises:
            ValueError: A field missing or of the wrong kind.
        """
        names = ("epoch", "samples_before", "added", "removed_delivered", "removed_unread", "changed")
        if not (
            isinstance(saved, dict)
            and all(isinstance(saved.get(name), int) and not isinstance(saved[name], bool) and saved[name] >= 0 for name in names)
            and isinstance(saved.get("before"), str)
            and saved.get("new_samples") in NEW_SAMPLES
        ):
            raise ConfigurationError(f"Loader state: 'dataset_change' must hold {names}, 'before' and 'new_samples', got {saved!r}"[:300])
        return cls(**{name: saved[name] for name in (*names, "before", "new_samples")})


class DatasetChange:
    """The translation of a saved epoch onto a changed storage.

    Args:
        storage: The storage as it is now.
        before: The key list of the dataset the state was saved over.
        new_samples: ``"next_epoch"`` or ``"this_epoch"``: when added samples are read.
    """

    def __init__(self, storage: Storage, before: KeyList, new_samples: Literal["next_epoch", "this_epoch"] | str) -> None:
        if new_samples not in NEW_SAMPLES:
            raise ConfigurationError(f"new_samples must be one of {NEW_SAMPLES}, got {new_samples!r}")
        self.before, self.new_samples = before, new_samples
        self.old_to_new = self._match(storage, before)
        seen = np.zeros(len(storage), dtype=bool)
        seen[self.old_to_new[self.old_to_new >= 0]] = True
        self.added = np.flatnonzero(~seen)
        appended = self.added if new_samples == "this_epoch" else self.added[:0]
        self.appended = len(appended)
        description = f"epoch continued by key over a changed dataset ({before.samples:,} samples then, {len(storage):,} now)"
        self.indices = np.concatenate([self.old_to_new, appended])  # the view's samples in ``storage`` (-1: gone)
        self.view = FilteredStorage.remapped(storage, self.indices, description)
        self.storage = storage
        self.changed = self._changed(storage)

    @staticmethod
    def _match(storage: Storage, before: KeyList) -> np.ndarray:
        """Each saved key's index in ``storage`` now (-1: gone): by hash (`_key_join`), or by the
        exact join over the strings where the storage's keys do not hash apart."""
        try:
            return match_keys(before.key_chunks(), before.samples, KeyHashes.of_sequence(storage.keys))
        except RepeatedKeyError:
            pass
        except ProvenanceError:  # the key list's own refusal, named
            raise
        except ValueError as error:
            raise ProvenanceError(f"{before.path}: {error}") from error
        import pyarrow
        import pyarrow.compute

        saved = pyarrow.concat_arrays(list(before.key_chunks())) if before.samples else pyarrow.array([], pyarrow.large_string())
        found = pyarrow.compute.index_in(saved, value_set=key_array(storage.keys))
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)

    def _changed(self, storage: Storage) -> np.ndarray:
        """The old indices of samples still there under the same key whose bytes changed, where
        both the key list and the storage know each sample's checksum without reading it."""
        reader = getattr(storage, "sample_checksums", None)
        now = reader() if callable(reader) and self.before.checksums is not None else None
        if now is None or self.before.checksums is None:
            return np.zeros(0, np.int64)
        then = self.before.checksums
        kept = np.flatnonzero(self.old_to_new >= 0)
        old, new = then[kept], now[self.old_to_new[kept]]
        return kept[(old >= 0) & (new >= 0) & (old != new)]

    @property
    def gone(self) -> np.ndarray:
        """Which old storage indices have no sample now (a mask over the old dataset)."""
        return self.old_to_new < 0

    def apply(self, sampler: Sampler, states: Sequence[dict[str, Any]]) -> tuple[np.ndarray, ChangeRecord]:
        """Bring ``sampler`` onto the view and load every rank's ``states``: the removed samples'
        positions not delivered are left out for every rank. Returns those positions and the record.

        Raises:
            ConfigurationError: One rank's state of a world of several (the epoch's deliveries
                must all be known to tell what is left).
        """
        world = int(states[0]["sampler"]["world_size"])
        if len(states) != world:
            raise ConfigurationError(
                f"the dataset changed: resuming by key needs every rank's state (the saved world had {world} ranks, "
                f"{len(states)} given), so that what is left of the epoch is known"
            )
        sampler.set_domain(len(self.view), self.before.blocks, appended=self.appended)
        # Positions keep their meaning over the view: its first samples are the saved ones, in
        # the saved order; the added ones (this epoch's) come after them.
        sampler.load_state_dict([{**saved["sampler"], "num_samples": len(self.view)} for saved in states])
        delivered_mask, positions = self._removed_positions(sampler)
        delivered = sampler.done_everywhere
        unread = positions[~delivered_mask]
        sampler.leave_out(unread)
        epoch = sampler.epoch
        record = ChangeRecord(
            epoch=epoch,
            before=self.before.dataset,
            samples_before=self.before.samples,
            added=len(self.added),
            new_samples=self.new_samples,
            removed_delivered=int(delivered_mask.sum()),
            removed_unread=len(unread),
            changed=len(self.changed),
        )
        self._log(sampler, record, delivered, positions[delivered_mask], unread)
        return unread, record

    def resume(self, sampler: Sampler, record: ChangeRecord, states: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
        """A later resume in the same epoch: the sampler onto the same view, the states loaded
        as they are (the removed positions are among those they left out)."""
        if record.samples_before != self.before.samples or record.added != len(self.added):
            raise ProvenanceError(
                f"the state continues epoch {record.epoch} over {record.samples_before} samples then and {record.added} added; "
                f"the key list and this storage give {self.before.samples} and {len(self.added)}: the dataset changed again"
            )
        sampler.set_domain(len(self.view), self.before.blocks, appended=self.appended)
        sampler.load_state_dict(states if isinstance(states, dict) else list(states))

    def _removed_positions(self, sampler: Sampler) -> tuple[np.ndarray, np.ndarray]:
        """(delivered?, position) of each removed sample's position in the epoch's order."""
        gone = self.gone
        if not gone.any():
            return np.zeros(0, bool), np.zeros(0, np.int64)
        positions = positions_of(sampler, gone, self.before.samples)
        return sampler.delivered_mask(positions), positions

    def _log(self, sampler: Sampler, record: ChangeRecord, delivered: int, removed_delivered: np.ndarray, unread: np.ndarray) -> None:
        order = sampler.order_function()

        def named(positions: np.ndarray) -> str:
            picked = order(positions[:_NAMED]) if len(positions) else positions
            listed = ", ".join(self.before.keys_at(picked))
            return f" ({listed}{', ...' if len(positions) > _NAMED else ''})" if len(positions) else ""

        added = ", ".join(str(self.storage.keys[int(index)]) for index in self.added[:_NAMED])
        _logger.warning(
            "resuming epoch %d by key over a changed dataset (%d samples then, %d now) on rank %d: "
            "%d samples delivered before stay delivered; %d removed after they were delivered%s; %d removed unread, "
            "left out of the epoch%s; %d added%s, read %s; %d changed under the same key%s; each of the %d ranks has %d samples "
            "left in the epoch",
            record.epoch,
            record.samples_before,
            len(self.storage),
            sampler.rank,
            delivered,
            record.removed_delivered,
            named(removed_delivered),
            record.removed_unread,
            named(unread),
            record.added,
            f" ({added}{', ...' if record.added > _NAMED else ''})" if record.added else "",
            "at the end of this epoch" if record.new_samples == "this_epoch" else "from the next epoch",
            record.changed,
            f" ({', '.join(self.before.keys_at(self.changed[:_NAMED]))}{', ...' if record.changed > _NAMED else ''}: read as they are now)"
            if record.changed
            else "",
            sampler.world_size,
            sampler.plan_arrays().size,
        )
