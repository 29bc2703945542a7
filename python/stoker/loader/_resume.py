"""The Loader's state: what it saves (`state_dict`), what it accepts (`load_state_dict`, refusing
another dataset or configuration), what it proves (`verify_epoch`), what a read-ahead wrapper holds
back (`hold_deliveries`), and the mixture weights that may change between steps, which are part
of the state.

A part of `Loader` kept in its own file (the Loader inherits it); it relies on the Loader's fields
declared below.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigurationError
from ..ops.batch import transform_description
from ..pipeline import Pipeline
from ..sampling import EpochPlan, Sampler
from ..storage import EpochStorage, MixedStorage, Storage
from ._assembly import BatchAssembler, label_array
from ._batch import Batch
from ._deliveries import Deliveries
from ._fingerprint import check_resume, check_state_parts, dataset_digest, fingerprint, verify_deliveries
from ._options import Sampling

if TYPE_CHECKING:
    from ..observe import RunTotals
    from ._tuning import LoaderTuning

__all__ = ["LoaderResume"]

_logger = logging.getLogger("stoker.loader")

# Seconds the loader waits for ops still running when it stops a pipeline early.
_QUICK_STOP = 0.4


def _digest_of(storage: Storage) -> str:
    """What a storage holds, as a short hash: the storage's own content digest where it keeps one
    (taken from its index, in constant time, and covering the samples' bytes), else a hash of
    every key and label (time in the number of samples, once per Loader)."""
    content = getattr(storage, "content_digest", None)
    if callable(content):
        return f"content:{content()}"
    return dataset_digest(storage.keys, label_array(storage.labels))


class LoaderResume:
    """State, resume and proof of delivery: a part of `Loader`."""

    storage: Storage
    sampler: Sampler
    options: dict[str, Any]
    batch_size: int
    drop_last: bool
    transform: Any
    decode: Any
    totals: RunTotals
    _assembler: BatchAssembler
    _deliveries: Deliveries
    _dataset_digest: str | None
    _iterating: str | None
    _pending_weights: dict[str, float] | None
    _tuning: LoaderTuning | None

    def _sync_storage_epoch(self) -> None:
        raise NotImplementedError

    def _build(self, plan: EpochPlan) -> Pipeline[Any]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is in the epoch: delivered samples only, so batches in flight are read
        again after a resume (batches a read-ahead wrapper such as `stoker.device.to_device`
        still holds count as in flight), with what the positions mean (`fingerprint`) and the
        epoch's delivery digest (`verify_epoch`). Plain data."""
        sampler, digest, step = self._deliveries.state()
        return {
            "version": 1,
            "sampler": sampler,
            "batch_size": self.batch_size,
            "step": step,
            "fingerprint": self.fingerprint(),
            "delivered_digest": digest,
            **({"mixture": self.storage.state()} if isinstance(self.storage, MixedStorage) else {}),
        }

    def fingerprint(self) -> dict[str, Any]:
        """What a position in this Loader's epochs means (saved with its state): the dataset's
        samples and labels (a hash), the sampling and batching, and the transform."""
        if self._dataset_digest is None:
            # A storage whose samples change per epoch (a mixture, whose weights may change too)
            # is described by its sources; any other by its own samples.
            sources = getattr(self.storage, "sources", None) if isinstance(self.storage, EpochStorage) else None
            parts = sources.values() if isinstance(sources, dict) else [self.storage]
            self._dataset_digest = "-".join(_digest_of(part) for part in parts)
        options: Sampling = self.options["sampling"]
        return fingerprint(
            samples=len(self._assembler.keys),
            dataset=self._dataset_digest,
            sampling={"shuffle": options.shuffle, "seed": options.seed, "pad": options.pad, "shuffle_window": options.shuffle_window},
            batch_size=self.batch_size,
            drop_last=self.drop_last,
            transform=transform_description(self.transform) or getattr(self.decode, "__qualname__", None),
        )

    @contextlib.contextmanager
    def hold_deliveries(self) -> Iterator[None]:
        """For wrappers that read batches ahead of the training loop (`stoker.device.to_device`,
        `to_jax`, your own prefetcher): while this is open, each batch this Loader yields is held
        (left out of `state_dict`) until the wrapper hands it on and calls `release`. Batches
        still held when it closes were never delivered: a continued epoch reads them again.

        Example::

            with loader.hold_deliveries():
                for batch in read_ahead(loader):
                    loader.release(batch)
                    yield batch
        """
        with self._deliveries.hold():
            yield

    def release(self, batch: Batch) -> None:
        """A held batch reached the training loop (see `hold_deliveries`); a batch not held is ignored."""
        self._deliveries.release(batch)

    def load_state_dict(self, state: dict[str, Any] | Sequence[dict[str, Any]], *, allow_changes: bool = False) -> None:
        """Continue from this rank's state, or from every rank's states to change world size.

        Args:
            state: What `state_dict` returned (this rank's), or every rank's states.
            allow_changes: Resume although the dataset, sampling, batching or transform differ
                from what the state was saved with (logged); the saved positions then refer to
                the saved order.

        Raises:
            ProvenanceError: The state was saved over another dataset or configuration; the
                message says what differs.
            ValueError: Not a Loader state, or states that do not fit together.
        """
        if not isinstance(state, (dict, list, tuple)):
            raise ValueError(
                f"not a Loader state: expected what Loader.state_dict() returns (a dict), or a list of them, got {type(state).__name__}"
            )
        states = [state] if isinstance(state, dict) else list(state)
        if not states:
            raise ValueError("not a Loader state: an empty list of states")
        for saved in states:
            if not isinstance(saved, dict) or not {"version", "sampler"} <= saved.keys():
                found = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
                raise ValueError(
                    f"not a Loader state: expected what Loader.state_dict() returns (keys 'version', 'sampler', 'batch_size'), got {found}"
                )
            if saved["version"] != 1:
                raise ValueError(f"Loader state version {saved['version']!r}: this stoker reads version 1; save the state again with it")
            check_state_parts(saved)
        changed = check_resume(states, self.fingerprint(), allow_changes=allow_changes)
        if changed:
            _logger.warning("resuming with changes (allow_changes=True): %s", "; ".join(changed))
        sampler_states = [saved["sampler"] for saved in states]
        self.sampler.load_state_dict(sampler_states[0] if isinstance(state, dict) else sampler_states)
        mixtures = [saved["mixture"] for saved in states if "mixture" in saved]
        if mixtures and isinstance(self.storage, MixedStorage):
            if len(states) > 1 and any(mixture["changes"] for mixture in mixtures):
                raise ValueError("an epoch whose mixture weights changed resumes on the same world size only")
            self.storage.load_state(mixtures[0], resolve=self._delivered_indices)
            self._assembler.set_samples(self.storage.keys, self.storage.labels)
        self._sync_storage_epoch()
        digests = [saved["delivered_digest"] for saved in states if "delivered_digest" in saved]
        # After a change of world size, rank 0 carries what the old world delivered, so the new
        # ranks' digests still sum to the world's.
        carried = len(digests) == len(states) and (isinstance(state, dict) or self.sampler.rank == 0)
        self._deliveries.restore(digests, carried=carried, step=max(int(saved.get("step", 0)) for saved in states))

    def verify_epoch(self, states: Sequence[dict[str, Any]] | None = None) -> dict[str, int]:
        """Prove that the epoch delivered each of its samples exactly once, across resumes.

        Args:
            states: Every rank's `state_dict` at the end of the epoch; None for this Loader's
                own (a world of one rank). The epoch's samples are counted as the world of these
                states deals them.

        Returns:
            ``{"epoch", "samples", "delivered"}``.

        Raises:
            ProvenanceError: A sample was missed or delivered twice (the digests differ).
        """
        states = [self.state_dict()] if states is None else list(states)
        return verify_deliveries(
            [saved["delivered_digest"] for saved in states],
            samples=self.sampler.num_samples,
            world_size=int(states[0]["sampler"]["world_size"]),
            pad=self.sampler.pad,
            batch_size=self.batch_size,
            drop_last=self.drop_last,
        )

    def set_mixture_weights(self, weights: dict[str, float]) -> None:
        """Change a `stoker.storage.MixedStorage`'s weights between steps (a curriculum): the
        samples not yet delivered in this epoch are drawn again with them, from the next batch
        on (batches read ahead are read again), and the next epochs use them too. The change is
        part of `state_dict`, so a resume after it reproduces the same stream.

        Args:
            weights: ``{source name: weight}`` for every source, positive.

        Raises:
            ConfigurationError: The storage is not a weighted mixture.
            ValueError: Missing or non-positive weights.
        """
        if not isinstance(self.storage, MixedStorage):
            raise ConfigurationError(f"set_mixture_weights needs a MixedStorage, not {type(self.storage).__name__}")
        self.storage.check_weights(weights)
        if self._iterating is None:
            self._apply_weights(dict(weights))
        else:
            self._pending_weights = dict(weights)

    def _apply_weights(self, weights: dict[str, float]) -> None:
        assert isinstance(self.storage, MixedStorage)
        positions = self.sampler.delivered_positions()
        # The state keeps the positions as spans (a few, however far into the epoch), not the
        # storage indices (one number a sample): the order maps them back when it is loaded.
        self.storage.reweight(weights, self.sampler.order_function()(positions), record=_spans(positions))
        self._assembler.set_samples(self.storage.keys, self.storage.labels)

    def _delivered_indices(self, record: object) -> np.ndarray:
        """The storage indices a mixture change's record of delivered positions stands for.

        Raises:
            ValueError: Not spans of this epoch's positions.
        """
        if not isinstance(record, list) or not all(
            isinstance(span, list)
            and len(span) == 2
            and all(type(end) is int for end in span)
            and 0 <= span[0] < span[1] <= self.sampler.num_samples
            for span in record
        ):
            raise ValueError(
                f"mixture change: 'delivered_record' must be spans [start, end) of the epoch's {self.sampler.num_samples} positions"
            )
        positions = np.concatenate([np.arange(start, end, dtype=np.int64) for start, end in record]) if record else np.zeros(0, np.int64)
        return self.sampler.order_function()(positions)

    def _reweigh(self, pipeline: Pipeline[Any]) -> Pipeline[Any]:
        """Between two batches: stop the epoch's pipeline (what it read ahead was not
        delivered), apply the pending weights, and go on with a pipeline over the rest."""
        weights, self._pending_weights = self._pending_weights, None
        assert weights is not None
        pipeline.stop(timeout=_QUICK_STOP)
        if self._tuning is not None:
            self._tuning.detach()
        self.totals.add(pipeline.stats())
        self._apply_weights(weights)
        rebuilt = self._build(self.sampler.plan_arrays())
        if self._tuning is not None:
            self._tuning.attach(rebuilt)
        rebuilt.start()
        return rebuilt


def _spans(positions: np.ndarray) -> list[list[int]]:
    """Ascending ``positions`` as [start, end) spans of consecutive ones."""
    if len(positions) == 0:
        return []
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts = positions[np.concatenate([[0], breaks])]
    ends = positions[np.concatenate([breaks - 1, [len(positions) - 1]])] + 1
    return [[int(start), int(end)] for start, end in zip(starts.tolist(), ends.tolist())]
