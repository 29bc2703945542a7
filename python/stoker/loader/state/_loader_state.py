"""The Loader's state: what it saves (`state_dict`), what it accepts (`load_state_dict`, refusing
another dataset or configuration) and what it proves (`verify_epoch`). A part of the Loader,
given what it reads (the storage, the sampler, the delivery bookkeeping, the batching) and a
callback for what a loaded state changes outside it (the storage's epoch)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._bounded import shown_logger
from ...errors import ConfigurationError, ProvenanceError
from ...ops.batch import transform_description
from ...sampling import Sampler, WholeBatchPlan
from ...storage import EpochStorage, FilteredStorage, Storage
from .._assembly import BatchAssembler, label_array
from .._options import Sampling
from ._dataset_change import ChangeRecord, DatasetChange, positions_of
from ._deliveries import Deliveries
from ._fingerprint import check_resume, check_state_parts, dataset_digest, fingerprint, require_parts, verify_deliveries
from ._key_list import KeyList, key_list_name, write_key_list
from ._mixture_weights import MAX_MIXTURE_CHANGES, MixtureSchedulePart, MixtureWeights
from ._saved_part import SavedPart

if TYPE_CHECKING:
    from ..filters import ScheduledFilters

__all__ = ["Batching", "LoaderState"]

_DATASET_FIELDS = ("dataset.samples", "dataset.keys_and_labels_hash")  # what a resume by key carries over
# What every state `state_dict` writes holds: its place (sampler), what its positions mean
# (fingerprint) and the proof of what it delivered (delivered_digest). The rest is optional.
_REQUIRED_PARTS: dict[str, type] = {"version": int, "sampler": dict, "fingerprint": dict, "delivered_digest": dict}

_logger = shown_logger("stoker.loader")


@dataclass(frozen=True)
class Batching:
    """How a Loader makes batches, as its state's fingerprint records it."""

    batch_size: int
    drop_last: bool
    sampling: Sampling
    transform: Any
    decode: Any
    where: str | None = None  # the filter (`Loader(where=...)`), as written

    def describe_transform(self) -> Any:
        """The transform as plain data, or the decode function's name."""
        return transform_description(self.transform) or getattr(self.decode, "__qualname__", None)


def _digest_of(storage: Storage) -> str:
    """What a storage holds, as a short hash: the storage's own content digest where it keeps one
    (taken from its index, in constant time, and covering the samples' bytes), else a hash of
    every key and label (time in the number of samples, once per Loader)."""
    if isinstance(storage, FilteredStorage):  # what was filtered, and what the filter kept
        kept = hashlib.blake2b(storage.kept.tobytes(), digest_size=12).hexdigest()
        return f"{_digest_of(storage.base)}+kept:{kept}"
    content = getattr(storage, "content_digest", None)
    if callable(content):
        return f"content:{content()}"
    return dataset_digest(storage.keys, label_array(storage.labels))


class LoaderState:
    """Saves, loads and proves one Loader's place in its epochs.

    Args:
        storage: The Loader's storage.
        sampler: Its sampler (positions, epoch, world).
        assembler: Its batch assembler (the sample count the fingerprint records).
        deliveries: Its delivery bookkeeping (the digest and step saved with the state).
        batching: Its batching (`Batching`).
        mixture: Its `MixtureWeights` when the storage is a mixture.
        filters: Its `ScheduledFilters` (the filter schedule the epochs read under), if any.
        after_load: Called once a state is loaded (the Loader brings the storage to the
            sampler's epoch).
        read_through: Called with the storage the Loader's reads go through from now on and its
            samples' indices in the Loader's storage: a view of the storage while an epoch
            continues over a changed dataset (`DatasetChange`), the storage itself (and None)
            again after.
    """

    def __init__(
        self,
        storage: Storage,
        sampler: Sampler,
        assembler: BatchAssembler,
        deliveries: Deliveries,
        batching: Batching,
        *,
        mixture: MixtureWeights | None,
        filters: ScheduledFilters | None = None,
        after_load: Callable[[], None],
        read_through: Callable[[Storage, Any], None] = lambda storage, indices: None,
    ) -> None:
        self.storage, self.sampler, self.assembler, self.deliveries = storage, sampler, assembler, deliveries
        self.batching, self.mixture, self.after_load, self.read_through = batching, mixture, after_load, read_through
        self.filters = filters
        # The optional parts of the state, each saved and loaded by its owner (`SavedPart`).
        parts: list[SavedPart | None] = [mixture, MixtureSchedulePart(mixture) if mixture is not None else None, filters]
        self.parts: tuple[SavedPart, ...] = tuple(part for part in parts if part is not None)
        self._dataset_digest: str | None = None  # worked out at the first state saved or loaded
        self._blocks = sampler.blocks  # the storage's own, restored after a continued epoch
        self.change: ChangeRecord | None = None  # while an epoch continues over a changed dataset
        self.ledger_directory: Any = None  # where key lists are written and looked for (the ledger's)

    def state_dict(self) -> dict[str, Any]:
        """See `Loader.state_dict`. Written under the record lock (`Deliveries.lock`), which the
        Loader holds across each change of the epoch's record: every part is of one moment."""
        self.fingerprint()  # the dataset's digest, worked out once, before the lock is taken
        with self.deliveries.lock:
            return self._state_locked()

    def _state_locked(self) -> dict[str, Any]:
        sampler, digest, excluded, step = self.deliveries.state()
        return {
            "version": 1,
            "sampler": sampler,
            "batch_size": self.batching.batch_size,
            "step": step,
            "fingerprint": self.fingerprint(),
            "delivered_digest": digest,
            "excluded_digest": excluded,
            **{part.state_key: saved for part in self.parts if (saved := part.saved_state()) is not None},
            **({"dataset_change": self.change.state()} if self.change is not None else {}),
        }

    def _load_parts(self, states: Sequence[dict[str, Any]], *, before_the_order: bool) -> None:
        """Hand each registered part loaded at this point what every state saved under its key.

        Raises:
            ConfigurationError: Ranks' states that disagree on a part every rank saves alike.
        """
        for part in self.parts:
            if part.loads_before_the_order != before_the_order:
                continue
            saved = [state[part.state_key] for state in states if part.state_key in state]
            if part.same_on_every_rank and saved and (len(saved) != len(states) or any(value != saved[0] for value in saved[1:])):
                raise ConfigurationError(
                    f"Loader state: {len(saved)} of the {len(states)} ranks' states hold a {part.state_key!r} part, and every "
                    f"rank saves the same one: {'some lack it' if len(saved) != len(states) else 'theirs differ'} "
                    "(states of different runs, or edited)"
                )
            part.load_saved(saved, ranks=len(states))

    def save_keys(self, path: Any) -> Any:
        """See `Loader.save_keys`."""
        from pathlib import Path

        target = Path(path)
        dataset = self.fingerprint()["dataset"]["keys_and_labels_hash"]
        if target.is_dir():
            target = target / key_list_name(dataset)
            if target.is_file():  # written once per dataset: the same digest, the same keys
                return target
        checksums = getattr(self.storage, "sample_checksums", None)
        return write_key_list(
            target, self.storage.keys, dataset=dataset, blocks=self._blocks, checksums=checksums() if callable(checksums) else None
        )

    def exclusion_indices(self, keys: Sequence[str]) -> np.ndarray:
        """The storage indices of ``keys`` to leave out (`exclude_keys`), checked.

        Raises:
            ConfigurationError: A key the storage does not hold (the first few named), or an
                epoch continued over a changed dataset.
        """
        if self.change is not None:
            raise ConfigurationError(
                "exclude(keys=...) in an epoch continued over a changed dataset: call it at the next epoch, or before that resume"
            )
        indices, unknown = self.storage.indices_of(keys)
        if unknown:
            raise ConfigurationError(f"exclude(keys=...): {len(unknown)} keys are not in {self.storage.describe()}, e.g. {unknown[:3]}")
        return indices

    def exclude_keys(self, keys: Sequence[str], *, from_slot: int | None = None) -> tuple[list[str], list[str]]:
        """See `Loader.exclude`: the samples of ``keys`` not delivered yet in this epoch left out
        for every rank. Returns the keys left out and (the first few of) those not left out.

        Args:
            keys: The samples' keys.
            from_slot: The slot of each rank's plan from which they are left out (every rank's
                the same: `Sampler.leave_out_beyond`), or None: from where this rank's record
                is, what every rank delivered so far taken as done (`Sampler.settle_deliveries`),
                or with one rank whose batches a wrapper holds, from the end of its record.

        Raises:
            ConfigurationError: A key the storage does not hold (the first few named), or
                this rank's deliveries cannot tell the world's (`Sampler.settle_deliveries`).
        """
        indices = self.exclusion_indices(keys)
        view = self.filters.view if self.filters is not None else None
        outside: list[str] = []
        if view is not None:  # this epoch reads under a scheduled filter: its samples are the view's
            found = np.minimum(np.searchsorted(view.kept, indices), len(view.kept) - 1)
            inside = view.kept[found] == indices
            outside = [self.storage.keys[int(index)] for index in np.asarray(indices)[~inside][:5]]
            indices = found[inside]
        wanted = np.zeros(self.sampler.num_samples, dtype=bool)
        wanted[indices] = True
        if from_slot is None and not self.deliveries.holding:
            # What every rank delivered so far is done for the world before the rest is dealt
            # again: a key another rank delivered is as delivered as one this rank did.
            self.sampler.settle_deliveries()
            positions = positions_of(self.sampler, wanted, self.sampler.epoch_length)
            kept = self.sampler.delivered_mask(positions)
            self.sampler.leave_out(positions[~kept])
        else:
            # A batch a wrapper holds may yet be handed back: nothing delivered is settled, and
            # only what no rank is dealt before the slot goes (the slots before it keep theirs).
            positions = positions_of(self.sampler, wanted, self.sampler.epoch_length)
            kept = ~self.sampler.leave_out_beyond(positions, slot=from_slot)
        unread = positions[~kept]
        if self.sampler.rank == 0:  # every rank leaves out the same; one accounts for them
            self.deliveries.left_out(unread)
        order = self.sampler.order_function()
        left_out = self.assembler.keys_of(order(unread).tolist()) if len(unread) else []
        already = self.assembler.keys_of(order(positions[kept][:5]).tolist()) if kept.any() else []
        return left_out, (already + outside)[:5]

    def epoch_changed(self) -> None:
        """A new epoch began: one continued over a changed dataset is over, and the Loader reads
        its storage as it is."""
        if self.change is not None and self.change.epoch != self.sampler.epoch:
            self.change = None
            epoch = self.sampler.epoch
            self.sampler.set_domain(len(self.storage), self._blocks)
            self.sampler.set_epoch(epoch)
            self.read_through(self.storage, None)

    def fingerprint(self) -> dict[str, Any]:
        """See `Loader.fingerprint`."""
        if self._dataset_digest is None:
            # A storage whose samples change per epoch (a mixture, whose weights may change too)
            # is described by its sources; any other by its own samples.
            sources = getattr(self.storage, "sources", None) if isinstance(self.storage, EpochStorage) else None
            parts = sources.values() if isinstance(sources, dict) else [self.storage]
            self._dataset_digest = "-".join(_digest_of(part) for part in parts)
        options = self.batching.sampling
        return fingerprint(
            samples=len(self.storage),
            dataset=self._dataset_digest,
            sampling={"shuffle": options.shuffle, "seed": options.seed, "pad": options.pad, "shuffle_window": options.shuffle_window},
            batch_size=self.batching.batch_size,
            drop_last=self.batching.drop_last,
            transform=self.batching.describe_transform(),
            where=self.batching.where,
        )

    def load_state_dict(
        self,
        state: dict[str, Any] | Sequence[dict[str, Any]],
        *,
        allow_changes: bool = False,
        keys_before: Any = None,
        new_samples: str = "next_epoch",
    ) -> None:
        """See `Loader.load_state_dict`."""
        if not isinstance(state, (dict, list, tuple)):
            raise ConfigurationError(
                f"not a Loader state: expected what Loader.state_dict() returns (a dict), or a list of them, got {type(state).__name__}"
            )
        states = [state] if isinstance(state, dict) else list(state)
        if not states:
            raise ConfigurationError("not a Loader state: an empty list of states")
        for saved in states:
            if isinstance(saved, dict) and "version" in saved and saved["version"] != 1:
                raise ConfigurationError(
                    f"Loader state version {str(saved['version'])[:40]}: this stoker reads version 1; save the state again with it"
                )
            require_parts(saved, _REQUIRED_PARTS, "Loader")
            check_state_parts(saved, max_mixture_changes=MAX_MIXTURE_CHANGES)
        batch_size_before = self._bucketed_batch_size(states)
        saved_change = _saved_change(states)
        by_key = self._by_key(states, keys_before, new_samples, saved_change, allow_changes=allow_changes)
        adjustable = self._adjustable() + (_DATASET_FIELDS if by_key is not None and saved_change is None else ())
        changed = check_resume(states, self.fingerprint(), allow_changes=allow_changes, adjustable=adjustable)
        rebatched = [change for change in changed if change.startswith("batch_size:")]
        if rebatched and "batch_size" in self._adjustable():
            changed.remove(rebatched[0])
        if rebatched and "batch_size" in self._adjustable() and batch_size_before is None:
            _logger.info(
                "resuming epoch %s with another batch size (%s): the rest of the epoch is dealt in batches of %d over %d ranks",
                states[0]["sampler"].get("epoch"),
                rebatched[0],
                self.batching.batch_size,
                self.sampler.world_size,
            )
        changed = [change for change in changed if change.split(":")[0] not in adjustable or change.startswith("batch_size:")]
        if changed:
            _logger.warning("resuming with changes (allow_changes=True): %s", "; ".join(changed))
        sampler_states = [saved["sampler"] for saved in states]
        unread = None
        if by_key is None:
            if self.change is not None:  # this Loader continued a changed epoch; this state does not
                self.change = None
                self.sampler.set_domain(len(self.storage), self._blocks)
                self.read_through(self.storage, None)
            self._load_parts(states, before_the_order=True)  # the saved epoch's samples: under the filter it read under
            self.sampler.load_state_dict(
                sampler_states[0] if isinstance(state, dict) else sampler_states, batch_size_before=batch_size_before
            )
            if batch_size_before is not None:
                self._log_cut(batch_size_before, int(sampler_states[0]["world_size"]))
            elif self.sampler.buckets is not None and not isinstance(state, dict):
                self._log_whole_batches(int(sampler_states[0]["world_size"]))
        elif saved_change is not None:
            by_key.resume(self.sampler, saved_change, sampler_states[0] if isinstance(state, dict) else sampler_states)
            self.change = saved_change
        else:
            unread, self.change = by_key.apply(self.sampler, states)
        if by_key is not None:
            self.read_through(by_key.view, by_key.indices)
        self._load_parts(states, before_the_order=False)
        self.after_load()
        digests = [saved["delivered_digest"] for saved in states if "delivered_digest" in saved]
        # After a change of world size, rank 0 carries what the old world delivered, so the new
        # ranks' digests still sum to the world's.
        carried = len(digests) == len(states) and (isinstance(state, dict) or self.sampler.rank == 0)
        excluded = [saved["excluded_digest"] for saved in states if "excluded_digest" in saved]
        excluded = excluded if len(excluded) == len(states) else []  # states saved before exclusions were
        self.deliveries.restore(digests, excluded, carried=carried, step=max(int(saved.get("step", 0)) for saved in states))
        if unread is not None and carried:
            # Removed samples are accounted for once, by the rank that carries the world's record.
            self.deliveries.digest.add(unread)

    def _bucketed_batch_size(self, states: Sequence[dict[str, Any]]) -> int | None:
        """The batch size a bucketed epoch's states were saved with, where it is not this
        Loader's: its rest is then cut again for this one (`stoker.sampling.RecutOrder`). None:
        the same, no buckets, or states that do not say."""
        prints = [saved["fingerprint"] for saved in states if isinstance(saved.get("fingerprint"), dict)]
        then = prints[0].get("batch_size") if prints else None
        if self.sampler.buckets is None or then == self.batching.batch_size or not isinstance(then, int) or isinstance(then, bool):
            return None
        if not 1 <= then <= 1 << 30:
            raise ConfigurationError(f"Loader state: its fingerprint's batch_size must be a whole number from 1 to 2**30, got {then!r}")
        if self.sampler.leftovers == "carry":
            raise ProvenanceError(
                f"this state was saved with batch_size {then}, and this Loader's is {self.batching.batch_size}: a bucketed epoch "
                "whose leftovers are carried resumes with its batch size (where each later epoch begins depends on every "
                "epoch's), or changes it at the next epoch; its global batch size changes with the number of ranks mid-epoch"
            )
        return then

    def _log_cut(self, before: int, saved_world: int) -> None:
        """Say how the rest of a bucketed epoch was cut again for this batch size."""
        cut = self.sampler.order_function()
        plan = self.sampler.plan_arrays()
        batch = self.batching.batch_size
        _logger.info(
            "resuming bucketed epoch %d with batch size %d (%d before), from %d ranks on %d: the batches no rank delivered are "
            "cut again by bucket into %d batches of %d (%d samples, less than a batch a bucket, left over for a later epoch), "
            "%d steps on every rank (rank %d repeats %d batch(es) to keep up, flagged as padding)",
            self.sampler.epoch,
            batch,
            before,
            saved_world,
            self.sampler.world_size,
            getattr(cut, "batches", 0),
            batch,
            getattr(cut, "left_over", 0),
            plan.size // batch,
            self.sampler.rank,
            getattr(plan, "padding_slots", 0) // batch,
        )

    def _log_whole_batches(self, saved_world: int) -> None:
        """Say how the rest of a bucketed epoch is dealt over this world (see `WholeBatchPlan`)."""
        plan = self.sampler.plan_arrays()
        if isinstance(plan, WholeBatchPlan):
            batch = self.batching.batch_size
            _logger.info(
                "resuming bucketed epoch %d from %d ranks on %d: the %d batches left are dealt a whole batch at a time, "
                "%d steps on every rank (rank %d repeats %d batch(es) to keep up, flagged as padding)",
                self.sampler.epoch,
                saved_world,
                self.sampler.world_size,
                plan.remaining_batches,
                plan.size // batch,
                self.sampler.rank,
                plan.padding_slots // batch,
            )

    def _by_key(
        self,
        states: Sequence[dict[str, Any]],
        keys_before: Any,
        new_samples: str,
        saved_change: ChangeRecord | None,
        *,
        allow_changes: bool,
    ) -> DatasetChange | None:
        """The translation by key this resume needs: the state continues an epoch over a changed
        dataset, or the dataset changed since it was saved and the old key list is at hand (given,
        or beside this Loader's ledger). None: positions carry over as they are.

        Raises:
            ProvenanceError: The key list is needed and not found, or the dataset changed size
                with no key list to translate the positions by.
            ConfigurationError: A mixture or buckets, whose orders a change cannot carry.
        """
        if saved_change is not None:
            where = keys_before if keys_before is not None else self.ledger_directory
            if where is None:
                raise ProvenanceError(
                    f"this state continues epoch {saved_change.epoch} over a dataset that changed: pass keys_before= "
                    f"(the key list of dataset {saved_change.before}, as the resume that began it was given)"
                )
            return DatasetChange(
                self.storage, KeyList(where, dataset=saved_change.before, samples=saved_change.samples_before), saved_change.new_samples
            )
        saved = states[0].get("fingerprint")
        then = saved.get("dataset") if isinstance(saved, dict) else None
        now = self.fingerprint()["dataset"]
        if not isinstance(then, dict) or all(then.get(name) == now[name] for name in ("samples", "keys_and_labels_hash")):
            return None
        digest, samples = then.get("keys_and_labels_hash"), then.get("samples")
        if not isinstance(digest, str) or not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
            raise ConfigurationError(f"Loader state: its fingerprint's dataset is not a digest and a count: {then!r}"[:300])
        where = keys_before
        if where is None and self.ledger_directory is not None and (self.ledger_directory / key_list_name(digest)).is_file():
            where = self.ledger_directory
        if where is None:
            if samples != now["samples"] and allow_changes:  # without it, the check refuses and lists every change
                raise ProvenanceError(
                    f"the dataset changed since this state was saved ({samples} samples then, {now['samples']} now), so its "
                    "positions do not carry over: resume by key with keys_before= (the key list written beside the run's "
                    "provenance ledger, or by Loader.save_keys), or start the epoch over with set_epoch"
                )
            return None
        if isinstance(self.storage, EpochStorage) or self.sampler.buckets is not None:
            raise ConfigurationError("a resume by key over a changed dataset takes a plain storage: not a mixture, not buckets")
        if any("filter_schedule" in saved for saved in states) or (self.filters is not None and self.filters.schedule is not None):
            raise ConfigurationError(
                "a resume by key over a changed dataset does not take a filter schedule yet: resume at the next epoch's start, "
                "or without the schedule"
            )
        return DatasetChange(self.storage, KeyList(where, dataset=digest, samples=samples), new_samples)

    def _adjustable(self) -> tuple[str, ...]:
        """What a resume may change without ``allow_changes``: the batch size, where positions do
        not depend on it, or a bucketed epoch's rest can be cut again (`RecutOrder`). Not with
        carried leftovers (where each later epoch begins depends on every epoch's batch size) nor
        with ``drop_last`` (which samples an epoch leaves out depends on the batch size)."""
        carried = self.sampler.buckets is not None and self.sampler.leftovers == "carry"
        return () if carried or self.batching.drop_last else ("batch_size",)

    def verify_epoch(self, states: Sequence[dict[str, Any]] | None = None) -> dict[str, int]:
        """See `Loader.verify_epoch`."""
        states = [self.state_dict()] if states is None else list(states)
        sampler = states[0].get("sampler")
        epoch = sampler.get("epoch") if isinstance(sampler, dict) else None
        # The epoch's own samples: with buckets, those of its full batches (its leftovers are
        # read in a later epoch, not missing from this one).
        length = (
            self.sampler.epoch_length_of(epoch) if isinstance(epoch, int) and not isinstance(epoch, bool) else self.sampler.epoch_length
        )
        before = None
        if isinstance(sampler, dict) and "cut" in sampler:
            # Cut again for another batch size: its rest is this sampler's epoch, if it is the same cut.
            cut = self.sampler.cut
            if cut is None or cut[0] != sampler["cut"] or epoch != self.sampler.epoch:
                raise ConfigurationError(
                    f"verify_epoch: epoch {epoch} was cut again for another batch size; verify it with a Loader resumed "
                    "from those states (in that epoch)"
                )
            before = cut[1]
        proof = verify_deliveries(
            [saved["delivered_digest"] for saved in states],
            samples=length,
            world_size=int(states[0]["sampler"]["world_size"]),
            pad=self.sampler.pad or self.sampler.buckets is not None,  # a bucketed rest is always padded whole
            batch_size=self.batching.batch_size,
            drop_last=self.batching.drop_last,
            before=before,
        )
        # Left out on purpose (`Loader.exclude`): accounted for by the proof, not delivered.
        excluded = sum(
            int(saved["excluded_digest"]["count"])
            for saved in states
            if isinstance(saved.get("excluded_digest"), dict) and saved["excluded_digest"].get("epoch") == proof["epoch"]
        )
        change = _saved_change(states)
        removed = change.removed_unread if change is not None and change.epoch == proof["epoch"] else 0
        added = change.added if change is not None and change.epoch == proof["epoch"] else 0
        left_over = {"left_over": self.sampler.num_samples - proof["samples"]} if self.sampler.buckets is not None else {}
        return {
            **proof,
            "delivered": proof["delivered"] - excluded - removed,
            "excluded": excluded,
            "removed": removed,
            "added": added,
            **left_over,
        }


def _saved_change(states: Sequence[dict[str, Any]]) -> ChangeRecord | None:
    """The states' record of an epoch continued over a changed dataset (every rank saves the
    same), if they were saved in one."""
    saved = next((state["dataset_change"] for state in states if "dataset_change" in state), None)
    return None if saved is None else ChangeRecord.from_state(saved)
