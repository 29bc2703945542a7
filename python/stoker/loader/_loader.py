"""`Loader`: storage + sampler + decode + batching on the pipeline engine, resumable exactly.

Stages: the source deals this rank's remaining samples in batches; ``fetch`` reads each batch's
bytes with one `read_many` (all samples of a batch requested at once; shards and LMDB coalesce);
``decode`` decodes and transforms the batch straight into a reused batch buffer. Batches may come
out of order (``in_order=False``, the default: a slow read never stalls the others); every sample
keeps its key, label and epoch position, and the loader records what it *delivered*, so
`state_dict` resumes with nothing lost or repeated even when it stops with batches in flight.

Bad samples are never silent (see `_failures`): each is retried by the storage where that makes
sense, then raised, replaced or zero-filled as ``on_error`` says, and always listed in
`Loader.failures`. An unreachable store is retried up to its deadline and then raised as
`StorageUnavailableError`; the samples it did not read are not recorded as delivered.

Network storage (``storage.is_remote``) goes further: the source is an `OutOfOrderPrefetcher`
that keeps ``fetch_concurrency`` batches of per-sample requests in flight, ramping up from two
(slow start), and fills each batch with whichever samples arrive first, so one slow request
delays one sample, not a batch.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import numpy as np

from ..device import BufferPool, pinned_allocator
from ..distributed import discover_world
from ..errors import ConfigurationError
from ..failures import Failure
from ..observe import RunTotals
from ..ops import media_backend
from ..ops.batch import TRANSFORMS, Transform, allocate_batch
from ..ops.media import AudioTransform, VideoTransform
from ..pipeline import Pipeline, PipelineBuilder, PipelineStats
from ..sampling import BatchPlan, EpochPlan, EpochWarmup, OutOfOrderPrefetcher, Sampler
from ..storage import (
    EpochStorage,
    RemoteStorage,
    Storage,
)
from ..storage.policies import describe_traffic
from ._arguments import as_storage, check_integer
from ._assembly import BatchAssembler
from ._batch import Batch
from ._capabilities import block_window, check_extra, shuffle_blocks
from ._deliveries import Deliveries
from ._failure_policy import BadSampleHandler
from ._options import FailurePolicy, Reads, Sampling, Throughput, from_keywords
from ._records import LoaderRecords
from ._resume import _QUICK_STOP, LoaderResume
from ._sample_prefetch import SamplePrefetch
from ._tuning import LoaderTuning, TuningHooks

__all__ = ["Loader"]

_logger = logging.getLogger("stoker.loader")


class Loader(LoaderResume, LoaderRecords):
    """Batches from a storage, for a training loop.

    The common path is one line, ``Loader(storage, batch_size=256, transform=ImageTransform(...))``;
    everything else is in four option objects, each checked where it is built and printable.

    Args:
        storage: Where the samples are: a `Storage`, or a path or URL that
            `stoker.storage.open_storage` opens (a folder, shards, LMDB, ``s3://``...).
        batch_size: Samples per batch.
        transform: Decode samples with this into one array per batch: an `ImageTransform`, an
            `AudioTransform` (a window per file, ``(batch, channels, samples)``) or a
            `VideoTransform` (a clip per file, ``(batch, frames, 3, height, width)`` in TCHW).
            Windows and clips are placed by each sample's seed (seed, epoch, position). Without
            it, ``decode`` is applied per sample, or the raw bytes are delivered. Audio and
            video need the user's FFmpeg: without one, building the Loader raises
            `stoker.errors.MediaUnavailableError`, saying what to install.
        decode: A function of a sample's bytes (when there is no ``transform``).
        extra: Other members of each sample to deliver beside the decoded payload, by extension
            (``("txt", "json")`` for LAION-style image-text shards): `Batch.extra` holds them
            per sample, ``txt`` as text, ``json`` parsed, others as bytes. A sample lacking one
            is a bad sample. Tar shards, local or on S3.
        drop_last: Drop this rank's last, short batch.
        sampling: Order, sharding and seed (`Sampling`): a uniform shuffle seeded with 0, and
            this process's rank found by itself, unless given.
        reads: How reads are kept in flight (`Reads`); the defaults suit the storage (per-sample
            out-of-order prefetch for network storage).
        failures: What a bad sample does (`FailurePolicy`); by default it raises.
        throughput: Concurrency, batches kept ready, pinned memory, live tuning (`Throughput`).
        **deprecated: The keywords these objects replaced (``shuffle=``, ``on_error=``...) work
            for one release, each with a `DeprecationWarning` naming its new spelling.

    Attributes:
        failures: Every bad sample met so far, oldest first (`stoker.failures.Failure`: key,
            stage, reason, epoch, position, action; the first 10,000 are kept, `failure_count`
            counts all).
        options: The four option objects in force (``loader.options["sampling"]``...).

    Iterating a Loader gives the rest of the current epoch; once an epoch is finished, the next
    iteration starts the next epoch (as if ``set_epoch(epoch + 1)`` had been called). One
    iteration at a time: a second concurrent one raises `RuntimeError`. `state_dict` may be
    called from any thread at any moment.

    Raises:
        TypeError: An argument of the wrong type (the message names it and what it takes).
        ConfigurationError: Bad sizes or policy (a `ValueError`).
        MediaUnavailableError: An audio or video transform, and no FFmpeg this stoker supports.
    """

    def __init__(
        self,
        storage: Storage | str | os.PathLike[str],
        *,
        batch_size: int,
        transform: Transform | None = None,
        decode: Callable[[bytes], Any] | None = None,
        extra: Sequence[str] = (),
        drop_last: bool = False,
        sampling: Sampling | None = None,
        reads: Reads | None = None,
        failures: FailurePolicy | None = None,
        throughput: Throughput | None = None,
        **deprecated: Any,
    ) -> None:
        options = from_keywords({"sampling": sampling, "reads": reads, "failures": failures, "throughput": throughput}, deprecated)
        self.options: dict[str, Any] = options
        sampling_options: Sampling = options["sampling"]
        read_options: Reads = options["reads"]
        failure_options: FailurePolicy = options["failures"]
        throughput_options: Throughput = options["throughput"]
        self._source = os.fspath(storage) if isinstance(storage, (str, os.PathLike)) else getattr(storage, "url", None)
        storage = as_storage(storage)
        check_integer("batch_size", batch_size)
        rank, world_size, _ = discover_world(sampling_options.rank, sampling_options.world_size)
        check_integer("world_size", world_size)
        check_integer("rank", rank, minimum=0)
        if transform is not None and not isinstance(transform, TRANSFORMS):
            raise TypeError(
                f"transform must be a stoker.ops ImageTransform, AudioTransform or VideoTransform, got {type(transform).__name__}"
            )
        if decode is not None and not callable(decode):
            raise TypeError(f"decode must be a function of a sample's bytes, got {type(decode).__name__}")
        if transform is not None and decode is not None:
            raise ConfigurationError("give transform or decode, not both")
        if isinstance(transform, (AudioTransform, VideoTransform)):
            media_backend()  # no FFmpeg here: say so now, before any thread starts, not at the first batch
        self._policy = BadSampleHandler(
            failure_options.on_error, failure_options.max_bad_samples, failure_options.quarantine, source=storage.describe()
        )
        self.storage = storage
        self.batch_size = batch_size
        self.transform = transform
        self.decode = decode
        self.drop_last = drop_last
        self.in_order = sampling_options.in_order
        remote = storage.is_remote
        self.sample_prefetch = remote if read_options.sample_prefetch is None else read_options.sample_prefetch
        self.fetch_concurrency = read_options.fetch_concurrency or (8 if remote else 4)
        self.ramp_every = read_options.ramp_every
        self.stall_patience = read_options.stall_patience
        self.hedge = read_options.hedge
        # Network storage: the next epoch's first samples are requested before this one ends.
        self._warmup = (
            EpochWarmup(storage.fetch_index, storage.event_loop)
            if isinstance(storage, RemoteStorage) and not isinstance(storage, EpochStorage)
            else None
        )
        self.decode_concurrency = throughput_options.decode_concurrency or os.cpu_count() or 1
        self.prefetch = 2 if throughput_options.prefetch is None else throughput_options.prefetch
        self.max_failures = failure_options.max_failures
        self.stats_interval = throughput_options.stats_interval
        shuffle = sampling_options.shuffle
        self.sampler = Sampler(
            len(storage),
            shuffle=shuffle != "none",
            seed=sampling_options.seed,
            rank=rank,
            world_size=world_size,
            pad=sampling_options.pad,
            blocks=shuffle_blocks(storage, shuffle),
            window=block_window(storage, shuffle, sampling_options.shuffle_window),
        )
        self.extra = check_extra(extra, storage)
        self._pool: BufferPool | None = None
        if transform is not None:
            allocate: Callable[[], np.ndarray] = lambda: allocate_batch(transform, batch_size)  # noqa: E731
            if throughput_options.pin_memory:
                # Page-locked when CUDA is there; without it there is nothing to pin.
                shape = allocate_batch(transform, 1).shape[1:]
                allocate = pinned_allocator((batch_size, *shape), transform.dtype)
            self._pool = BufferPool(allocate, capacity=self.decode_concurrency + self.prefetch + 4)
        self._assembler = BatchAssembler(
            storage, self.sampler, transform=transform, decode=decode, extra=self.extra, pool=self._pool, policy=self._policy
        )
        self._sample_prefetch = SamplePrefetch(
            storage,
            self.sampler,
            self._assembler,
            batch_size=batch_size,
            reads=dataclasses.replace(read_options, fetch_concurrency=self.fetch_concurrency),
            in_order=self.in_order,
            warmup=self._warmup,
        )
        self._tuning: LoaderTuning | None = None
        if throughput_options.autotune:
            pinned = {
                name
                for name, value in (
                    ("decode", throughput_options.decode_concurrency),
                    ("fetch", read_options.fetch_concurrency),
                    ("prefetch", throughput_options.prefetch),
                )
                if value is not None
            }
            assembler, sample_prefetch = self._assembler, self._sample_prefetch
            hooks = TuningHooks(
                settle=self._settle_tuned,
                fetched_batch_bytes=lambda: assembler.bytes_fetched / assembler.batches_fetched if assembler.batches_fetched else 0.0,
                requests=lambda: sample_prefetch if self.sample_prefetch else None,
            )
            self._tuning = LoaderTuning(
                hooks,
                pinned=pinned,
                wait_target=throughput_options.wait_target,
                memory_budget=throughput_options.memory_budget,
                batch_bytes=_batch_bytes(transform, batch_size),
            )
        self._deliveries = Deliveries(self.sampler, self._assembler._augmentation_seed)
        self._dataset_digest: str | None = None  # worked out at the first state saved or loaded
        self._traffic_start: dict[str, Any] | None = None
        self._pending_weights: dict[str, float] | None = None  # set_mixture_weights, between steps
        self.totals = RunTotals()  # the finished epochs' counts (for counters across epochs)
        self._pipeline: Pipeline[Any] | None = None
        self._last_stats: PipelineStats | None = None
        self._iteration_lock = threading.Lock()
        self._iterating: str | None = None  # the thread iterating now

    @property
    def prefetcher(self) -> OutOfOrderPrefetcher | None:
        """The per-sample prefetcher of the running (or last) epoch, with sample prefetch."""
        return self._sample_prefetch.prefetcher

    @property
    def failures(self) -> list[Failure]:
        """Every bad sample met so far (see the class notes)."""
        return list(self._policy.log.failures)

    @property
    def failure_count(self) -> int:
        """How many bad samples were met so far, in all epochs."""
        return self._policy.log.count

    # ---- epochs and resume ----------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: a new order from (seed, epoch), and a new draw of a mixture."""
        self.sampler.set_epoch(epoch)
        self._sync_storage_epoch()
        self._deliveries.new_epoch(epoch)

    def _sync_storage_epoch(self) -> None:
        # A mixture draws its samples per epoch: keys and labels change with it.
        if isinstance(self.storage, EpochStorage) and self.storage.epoch != self.sampler.epoch:
            self.storage.set_epoch(self.sampler.epoch)
            self._assembler.set_samples(self.storage.keys, self.storage.labels)

    def _batch_count(self, samples: int) -> int:
        return samples // self.batch_size if self.drop_last else -(-samples // self.batch_size)

    def _batches(self, plan: EpochPlan) -> Iterator[tuple[int, BatchPlan]]:
        for number in range(self._batch_count(plan.size)):
            yield number, plan.part(number * self.batch_size, (number + 1) * self.batch_size)

    def __len__(self) -> int:
        """Batches left in this epoch for this rank."""
        return self._batch_count(self.sampler.plan_arrays().size)

    # ---- the pipeline ---------------------------------------------------------------------

    def _build(self, plan: EpochPlan) -> Pipeline[Any]:
        """The epoch's pipeline over ``plan`` (the sampler's `plan_arrays`)."""
        order: Literal["input", "completion"] = "input" if self.in_order else "completion"
        builder = PipelineBuilder()
        if self.sample_prefetch:
            whole = plan.truncated(self._batch_count(plan.size) * self.batch_size)
            builder.add_source(self._sample_prefetch.source(whole), name="fetch", buffer_size=max(1, self.prefetch))
        else:
            builder.add_source(self._batches(plan), name="sampler").pipe(
                self._assembler.fetch, concurrency=self.fetch_concurrency, name="fetch", output_order=order, max_failures=self.max_failures
            )
        return (
            builder.pipe(
                self._assembler.decode,
                concurrency=self.decode_concurrency,
                name="decode",
                output_order=order,
                max_failures=self.max_failures,
            )
            .add_sink(max(1, self.prefetch))  # prefetch=0: the one batch being handed over, no more
            .build(name="loader", stats_interval=self.stats_interval)
        )

    def __iter__(self) -> Iterator[Batch]:
        """The rest of this rank's epoch (the next epoch once this one is finished). Stopping
        the loop (break, error, Ctrl-C) stops the pipeline within a fraction of a second;
        batches in flight were not delivered and come again after a resume.

        Raises:
            RuntimeError: Another thread is iterating this Loader.
            SampleError: A bad sample under ``on_error="raise"``.
            TooManyBadSamplesError: More bad samples than ``max_bad_samples``.
            StorageUnavailableError: The store stayed unreachable past its retry deadline.
            StorageError: The provenance ledger cannot be written (that batch is not delivered).
        """
        with self._iteration_lock:
            if self._iterating is not None:
                raise RuntimeError(
                    f"this Loader is already being iterated by thread {self._iterating!r}; one iteration at a time "
                    "(make one Loader per consumer, with rank and world_size to split the data)"
                )
            self._iterating = threading.current_thread().name
        finished = False
        pipeline: Pipeline[Any] | None = None
        try:
            plan = self.sampler.plan_arrays()
            if plan.size == 0 and self.sampler.delivered_count > 0:
                _logger.info(
                    "epoch %d is finished; starting epoch %d (call set_epoch to choose)", self.sampler.epoch, self.sampler.epoch + 1
                )
                self.set_epoch(self.sampler.epoch + 1)
                plan = self.sampler.plan_arrays()
            self._policy.start_epoch(plan.size + self.sampler.delivered_count)
            self._traffic_start = self.storage.traffic_report() if isinstance(self.storage, RemoteStorage) else None
            self._pipeline = pipeline = self._build(plan)
            if self._tuning is not None:
                self._tuning.attach(pipeline)
            pipeline.start()
            while True:
                if self._pending_weights is not None:
                    self._pipeline = pipeline = self._reweigh(pipeline)
                try:
                    batch = pipeline.get()
                except StopIteration:
                    break
                self._deliveries.delivered(batch)
                yield batch
            finished = True
        finally:
            if pipeline is not None:
                # A stuck read must not hold up an interrupted loop; a finished epoch has
                # nothing left running.
                pipeline.stop(timeout=10.0 if finished else _QUICK_STOP)
                self._last_stats = pipeline.stats()
                self.totals.add(self._last_stats)
                if self._tuning is not None:
                    self._tuning.detach()
            self._policy.log.summarize(self.sampler.epoch, self.sampler.delivered_count)
            traffic = self._epoch_traffic()
            if traffic:
                _logger.info("epoch %d from %s: %s", self.sampler.epoch, self.storage.describe(), describe_traffic(traffic))
            self._pipeline = None
            with self._iteration_lock:
                self._iterating = None

    def _settle_tuned(self, knob: str, value: int) -> None:
        """The live tuner moved ``knob`` to ``value`` in the running pipeline: keep it for the next
        epoch, and keep as many batch buffers for reuse as can then be in use at once."""
        if knob == "decode":
            self.decode_concurrency = value
        elif knob == "fetch":
            self.fetch_concurrency = value
        else:
            self.prefetch = value
        if self._pool is not None:
            self._pool.capacity = self.decode_concurrency + self.prefetch + 4


def _batch_bytes(transform: Transform | None, batch_size: int) -> int | None:
    """Bytes of one decoded batch, from the shape of an empty one (nothing allocated), or None."""
    if transform is None:
        return None
    empty = allocate_batch(transform, 0)
    return empty.itemsize * int(np.prod(empty.shape[1:])) * batch_size
