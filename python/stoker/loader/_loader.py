"""`Loader`: storage + sampler + decode + batching on the pipeline engine, resumable exactly.

Stages: the source deals this rank's remaining samples in batches; ``fetch`` reads each batch's
bytes with one `read_many` (all samples of a batch requested at once; shards and LMDB coalesce);
``decode`` decodes and transforms the batch straight into a reused batch buffer. Batches may come
out of order (``in_order=False``, the default: a slow read never stalls the others); every sample
keeps its key, label and epoch position, and the loader records what it *delivered*, so
`state_dict` resumes with nothing lost or repeated even when it stops with batches in flight.

Network storage (``storage.is_remote``) goes further: the source is an `OutOfOrderPrefetcher`
that keeps ``fetch_concurrency`` batches of per-sample requests in flight, ramping up from one
(slow start), and fills each batch with whichever samples arrive first, so one slow request
delays one sample, not a batch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..ops.image import ImageTransform, allocate_batch, decode_batch
from ..pipeline import Pipeline, PipelineBuilder, PipelineStats
from ..sampling import FetchedSample, OutOfOrderPrefetcher, Sampler
from ..storage import Storage
from ._batch import Batch
from ._buffers import BufferPool

__all__ = ["Loader"]


class _BatchPlan(NamedTuple):
    """One batch's samples: epoch positions, storage indices, padding flags."""

    positions: np.ndarray
    indices: np.ndarray
    padding: np.ndarray


class _PlanSamples(Sequence[tuple[int, int, tuple[str, bool]]]):
    """The epoch plan as ``(position, storage index, (key, padding))`` per sample, built per
    slice: a million-sample epoch is never a million tuples at once."""

    def __init__(self, positions: np.ndarray, indices: np.ndarray, padding: np.ndarray, keys: Sequence[str]) -> None:
        self.positions, self.indices, self.padding, self.keys = positions, indices, padding, keys

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, item: Any) -> Any:
        if not isinstance(item, slice):
            return self[item : item + 1][0]
        positions = self.positions[item].tolist()
        indices = self.indices[item].tolist()
        padding = self.padding[item].tolist()
        return [(position, index, (self.keys[index], pad)) for position, index, pad in zip(positions, indices, padding)]


class Loader:
    """Batches from a storage, for a training loop.

    Args:
        storage: Where the samples are (see `stoker.storage.open_storage`).
        batch_size: Samples per batch.
        transform: Decode images with this `ImageTransform` into one array per batch. Without
            it, ``decode`` is applied per sample, or the raw bytes are delivered.
        decode: A function of a sample's bytes (when there is no ``transform``).
        shuffle, seed, rank, world_size, pad: The `Sampler`'s; ``pad=False`` drops the uneven
            tail instead of padding ranks to equal counts.
        drop_last: Drop this rank's last, short batch.
        in_order: Deliver batches in sampler order (a slow batch then holds the others back).
        fetch_concurrency: Batches being read at once (default 4; 8 for network storage).
        sample_prefetch: Fetch per sample with out-of-order assembly and slow start (default:
            on for network storage, whose ``fetch_index`` is async).
        ramp_every: With ``sample_prefetch``, consumed batches per extra batch in flight while
            ramping up (the Cassandra paper: 4).
        stall_patience: With ``sample_prefetch``, least seconds a batch waits on stalled requests
            before more are requested or they are sent again (see `OutOfOrderPrefetcher`).
        hedge: With ``sample_prefetch``, send stalled requests again when no more can be
            requested (at the cap, in order, at the end of an epoch); False waits for them.
        decode_concurrency: Batches being decoded at once (default: the number of cores).
        prefetch: Finished batches kept ready ahead of the training loop.
        max_failures: Batches a stage may fail on before the epoch stops with an error (a failed
            sample inside a batch is not a batch failure: it is zeroed and marked invalid).
        pin_memory: Decode into page-locked host buffers when CUDA is available (``"auto"`` and
            True; False never pins), for asynchronous copies with `stoker.device.to_device`.
        stats_interval: Seconds between the timeline samples of each epoch's stats.

    Raises:
        ValueError: Bad sizes.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        batch_size: int,
        transform: ImageTransform | None = None,
        decode: Callable[[bytes], Any] | None = None,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        pad: bool = True,
        drop_last: bool = False,
        in_order: bool = False,
        fetch_concurrency: int | None = None,
        sample_prefetch: bool | None = None,
        ramp_every: int = 4,
        stall_patience: float = 0.05,
        hedge: bool = True,
        decode_concurrency: int | None = None,
        prefetch: int = 2,
        max_failures: int | None = 0,
        pin_memory: bool | str = "auto",
        stats_interval: float = 0.25,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if transform is not None and decode is not None:
            raise ValueError("give transform or decode, not both")
        self.storage = storage
        self.batch_size = batch_size
        self.transform = transform
        self.decode = decode
        self.drop_last = drop_last
        self.in_order = in_order
        remote = bool(getattr(storage, "is_remote", False))
        self.sample_prefetch = remote if sample_prefetch is None else sample_prefetch
        if self.sample_prefetch and not hasattr(storage, "fetch_index"):
            raise ValueError(f"sample_prefetch needs a storage with an async fetch_index; {storage.describe()} has none")
        self.fetch_concurrency = fetch_concurrency or (8 if remote else 4)
        self.ramp_every = ramp_every
        self.stall_patience = stall_patience
        self.hedge = hedge
        self.prefetcher: OutOfOrderPrefetcher | None = None
        self.decode_concurrency = decode_concurrency or os.cpu_count() or 1
        self.prefetch = prefetch
        self.max_failures = max_failures
        self.stats_interval = stats_interval
        self.sampler = Sampler(len(storage), shuffle=shuffle, seed=seed, rank=rank, world_size=world_size, pad=pad)
        labels = storage.labels
        self._labels = np.array([-1 if label is None else label for label in labels], dtype=np.int64)
        self._keys = storage.keys
        self._pool = None
        if transform is not None:
            allocate: Callable[[], np.ndarray] = lambda: allocate_batch(transform, batch_size)  # noqa: E731
            if pin_memory:
                from ..device import pinned_allocator

                # Page-locked when CUDA is there; without it there is nothing to pin.
                shape = allocate_batch(transform, 1).shape[1:]
                allocate = pinned_allocator((batch_size, *shape), transform.dtype)
            self._pool = BufferPool(allocate, capacity=self.decode_concurrency + prefetch + 4)
        self._pipeline: Pipeline[Any] | None = None
        self._last_stats: PipelineStats | None = None

    # ---- epochs and resume ----------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: a new order from (seed, epoch), and a new draw of a mixture."""
        self.sampler.set_epoch(epoch)
        self._sync_storage_epoch()

    def _sync_storage_epoch(self) -> None:
        # A mixture draws its samples per epoch: keys and labels change with it.
        set_storage_epoch = getattr(self.storage, "set_epoch", None)
        if set_storage_epoch is not None and getattr(self.storage, "epoch", None) != self.sampler.epoch:
            set_storage_epoch(self.sampler.epoch)
            self._keys = self.storage.keys
            self._labels = np.array([-1 if label is None else label for label in self.storage.labels], dtype=np.int64)

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is in the epoch: delivered samples only, so batches in flight are read
        again after a resume. Plain data."""
        return {"version": 1, "sampler": self.sampler.state_dict(), "batch_size": self.batch_size}

    def load_state_dict(self, state: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
        """Continue from this rank's state, or from every rank's states to change world size."""
        states = [state] if isinstance(state, dict) else list(state)
        for saved in states:
            if saved.get("version") != 1:
                raise ValueError(f"loader state version {saved.get('version')} is not 1")
        sampler_states = [saved["sampler"] for saved in states]
        self.sampler.load_state_dict(sampler_states[0] if isinstance(state, dict) else sampler_states)
        self._sync_storage_epoch()

    def _batch_count(self, samples: int) -> int:
        return samples // self.batch_size if self.drop_last else -(-samples // self.batch_size)

    def _batches(self) -> Iterator[tuple[int, _BatchPlan]]:
        positions, indices, padding = self.sampler.plan_arrays()
        for number in range(self._batch_count(len(positions))):
            part = slice(number * self.batch_size, (number + 1) * self.batch_size)
            yield number, _BatchPlan(positions[part], indices[part], padding[part])

    def __len__(self) -> int:
        """Batches left in this epoch for this rank."""
        return self._batch_count(len(self.sampler.plan_arrays()[0]))

    # ---- the pipeline ---------------------------------------------------------------------

    def _fetch(self, job: tuple[int, _BatchPlan]) -> tuple[int, _BatchPlan, list[str], list[bytes | None]]:
        number, plan = job
        indices = plan.indices.tolist()
        return number, plan, [self._keys[index] for index in indices], self.storage.read_indices(indices, on_error="skip")

    def _prefetched_batches(self) -> Any:
        """The source with sample prefetch: each batch as fetched, as the decode stage takes it."""
        positions, indices, padding = self.sampler.plan_arrays()
        count = self._batch_count(len(positions)) * self.batch_size
        # The prefetcher's "key" is the storage index (what fetch_index takes); the sample's name
        # and padding flag ride along as its "label".
        samples = _PlanSamples(positions[:count], indices[:count], padding[:count], self._keys)
        self.prefetcher = OutOfOrderPrefetcher(
            self.storage.fetch_index,  # type: ignore[attr-defined]
            samples,
            batch_size=self.batch_size,
            max_batches=self.fetch_concurrency,
            ramp_every=self.ramp_every,
            in_order=self.in_order,
            stall_patience=self.stall_patience,
            hedge=self.hedge,
            # Slow start once per job: a later epoch starts at the depth the last one reached.
            start_batches=self.prefetcher.ramp_level if self.prefetcher is not None else 1,
        )
        return self._as_jobs(self.prefetcher)

    async def _as_jobs(self, prefetcher: OutOfOrderPrefetcher) -> Any:
        number = 0
        async for fetched in prefetcher:
            yield self._job_of(number, fetched)
            number += 1

    def _job_of(self, number: int, fetched: list[FetchedSample]) -> tuple[int, _BatchPlan, list[str], list[bytes | None]]:
        keys = [sample.label[0] for sample in fetched]
        for key, sample in zip(keys, fetched):
            if sample.error is not None:
                self.storage.record_failure(key, sample.error)
        plan = _BatchPlan(
            np.array([sample.position for sample in fetched], dtype=np.int64),
            np.array([sample.key for sample in fetched], dtype=np.int64),
            np.array([sample.label[1] for sample in fetched], dtype=bool),
        )
        return number, plan, keys, [sample.data for sample in fetched]

    def _decode(self, job: tuple[int, _BatchPlan, list[str], list[bytes | None]]) -> Batch:
        number, plan, keys, payloads = job
        padding = plan.padding
        valid = np.array([payload is not None for payload in payloads], dtype=bool)
        if self.transform is not None:
            assert self._pool is not None
            out = self._pool.acquire()
            decoded = decode_batch(
                [payload if payload is not None else b"" for payload in payloads],
                self.transform,
                out=out,
                seeds=[self._augmentation_seed(position) for position in plan.positions.tolist()],
                names=keys,
                on_error="zero",
            )
            data: Any = decoded.images
            valid &= decoded.valid
        elif self.decode is not None:
            data = []
            for index, payload in enumerate(payloads):
                try:
                    data.append(self.decode(payload) if payload is not None else None)
                except Exception:
                    data.append(None)
                    valid[index] = False
        else:
            data = payloads
        return Batch(
            data=data,
            labels=self._labels[plan.indices],
            keys=keys,
            valid=valid & ~padding,
            padding=padding.copy(),
            positions=plan.positions.copy(),
            index=number,
        )

    def _augmentation_seed(self, position: int) -> int:
        """A sample's random crop and flip depend on (seed, epoch, position) only: a resumed or
        re-sharded run augments every sample exactly as the uninterrupted run would."""
        mixed = self.sampler.seed * 0x9E3779B97F4A7C15 + self.sampler.epoch * 0xBF58476D1CE4E5B9 + position
        return mixed & 0xFFFFFFFFFFFFFFFF

    def _build(self) -> Pipeline[Any]:
        order = "input" if self.in_order else "completion"
        builder = PipelineBuilder()
        if self.sample_prefetch:
            builder.add_source(self._prefetched_batches(), name="fetch", buffer_size=max(1, self.prefetch))
        else:
            builder.add_source(self._batches(), name="sampler").pipe(
                self._fetch, concurrency=self.fetch_concurrency, name="fetch", output_order=order, max_failures=self.max_failures
            )
        return (
            builder.pipe(self._decode, concurrency=self.decode_concurrency, name="decode", output_order=order, max_failures=self.max_failures)
            .add_sink(self.prefetch)
            .build(name="loader", stats_interval=self.stats_interval)
        )

    def __iter__(self) -> Iterator[Batch]:
        """The rest of this rank's epoch. Stopping the loop (break, error, Ctrl-C) stops the
        pipeline; batches in flight were not delivered and come again after a resume."""
        self._pipeline = pipeline = self._build()
        try:
            for batch in pipeline:
                self.sampler.mark_delivered(batch.positions, batch.padding)
                yield batch
        finally:
            pipeline.stop()
            self._last_stats = pipeline.stats()
            self._pipeline = None

    def stats(self) -> PipelineStats | None:
        """Per-stage stats of the running epoch, or of the last one."""
        if self._pipeline is not None:
            return self._pipeline.stats()
        return self._last_stats
