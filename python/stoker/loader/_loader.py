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

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

import numpy as np

from .._bounded import shown_logger
from ..device import BufferPool, pinned_allocator
from ..distributed import discover_world
from ..errors import ConfigurationError
from ..failures import Failure
from ..observe import CpuLimits, LiveSnapshot, ProvenanceLedger, RunTotals
from ..ops import Captions
from ..ops.batch import Transform, allocate_batch
from ..pipeline import Pipeline, PipelineBuilder, PipelineStats
from ..sampling import BatchPlan, EpochPlan, EpochWarmup, OutOfOrderPrefetcher, Sampler
from ..storage import EpochStorage, FilteredStorage, MixedStorage, RemoteStorage, Storage
from ._arguments import as_storage, check_decoding, check_integer
from ._assembly import BatchAssembler
from ._batch import Batch
from ._capabilities import block_window, check_extra, shuffle_blocks
from ._changes import Change, ChangesBetweenBatches, ChangeTarget, ExcludeKeys, ExcludeSteps, NewWeights
from ._exclusions import Exclusions
from ._failure_policy import BadSampleHandler
from ._options import FailurePolicy, Reads, Sampling, Throughput, from_keywords
from ._records import LoaderRecords
from ._sample_prefetch import SamplePrefetch
from ._tuning import TuningHooks, loader_tuning
from .buckets import BucketShapes, bucket_numbers, bucket_report, check_buckets
from .filters import ScheduledFilters, filter_storage, shuffle_quality
from .filters import describe as describe_where
from .state import Batching, Deliveries, LoaderState, MixtureSchedule, MixtureWeights

__all__ = ["Loader"]

_logger = shown_logger("stoker.loader")

# Seconds the loader waits for ops still running when it stops a pipeline early.
_QUICK_STOP = 0.4


class Loader:
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
            is a bad sample. Tar shards, local or on S3. A `stoker.ops.Captions` among them
            tokenizes each sample's caption member into `Batch.captions` (padded token rows and
            their attention mask, aligned with the images), in the decode stage; a caption
            missing, not text, or too long is a bad sample.
        drop_last: Drop this rank's last, short batch.
        sampling: Order, sharding, seed and filter (`Sampling`): a uniform shuffle seeded with 0,
            and this process's rank found by itself, unless given.
        reads: How reads are kept in flight (`Reads`); the defaults suit the storage (per-sample
            out-of-order prefetch for network storage).
        failure_policy: What a bad sample does (`FailurePolicy`); by default it raises.
        throughput: Concurrency, batches kept ready, pinned memory, live tuning (`Throughput`).
        **deprecated: The keywords these objects replaced (``shuffle=``, ``on_error=``...) work
            for one release, each with a `DeprecationWarning` naming its new spelling (as does
            ``failures=``, the old name of ``failure_policy=``: ``failures`` is the records).

    Attributes:
        failures: Every bad sample met so far, oldest first (`stoker.failures.Failure`: sample,
            stage, reason, epoch, position, action; the first 10,000 are kept, `failure_count`
            counts all).
        options: The four option objects in force (``loader.options["sampling"]``...).
        filter_report: With ``Sampling(where=...)``, what the shuffle mixes at a time with the
            filter and without it (``mixed``, ``mixed_unfiltered``; with the block shuffle also
            ``blocks_kept`` of ``blocks``), also logged; None without a filter.

    Its parts, each owning its own state and knowing nothing of the Loader: the batch
    assembler (one batch's read and decode), the delivery bookkeeping, `LoaderState` (what
    `state_dict` saves and `load_state_dict` accepts), `LoaderRecords` (stats, the live
    `snapshot`, the ledger), `LoaderTuning` (given its knobs as callbacks) and, over a mixture,
    `MixtureWeights`. The Loader wires them and runs the epochs.

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
        extra: Sequence[str | Captions] = (),
        drop_last: bool = False,
        sampling: Sampling | None = None,
        reads: Reads | None = None,
        failure_policy: FailurePolicy | None = None,
        throughput: Throughput | None = None,
        **deprecated: Any,
    ) -> None:
        options = from_keywords(
            {"sampling": sampling, "reads": reads, "failure_policy": failure_policy, "throughput": throughput}, deprecated
        )
        self.options: dict[str, Any] = options
        sampling_options: Sampling = options["sampling"]
        read_options: Reads = options["reads"]
        failure_options: FailurePolicy = options["failure_policy"]
        throughput_options: Throughput = options["throughput"]
        self._source = os.fspath(storage) if isinstance(storage, (str, os.PathLike)) else getattr(storage, "url", None)
        storage = as_storage(storage)
        unfiltered = storage
        where = sampling_options.where
        if where is not None:
            if isinstance(storage, EpochStorage):
                raise ConfigurationError("where= filters a storage whose samples stay; a mixture draws anew each epoch: filter its sources")
            storage = filter_storage(storage, where)
        check_integer("batch_size", batch_size)
        rank, world_size, _ = discover_world(sampling_options.rank, sampling_options.world_size)
        check_integer("world_size", world_size)
        check_integer("rank", rank, minimum=0)
        check_decoding(transform, decode)
        self._policy = BadSampleHandler(failure_options, source=storage.describe())
        self.storage = storage
        self.batch_size = batch_size
        self.transform = transform
        self.decode = decode
        self.drop_last = drop_last
        self.in_order = sampling_options.in_order
        remote = storage.is_remote
        buckets = sampling_options.buckets
        self.buckets = buckets
        if buckets is not None:
            check_buckets(buckets, transform, sampling_options, read_options)
        self.sample_prefetch = (remote and buckets is None) if read_options.sample_prefetch is None else read_options.sample_prefetch
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
        self.decode_concurrency = throughput_options.decode_concurrency or CpuLimits.read().threads
        self.prefetch = 2 if throughput_options.prefetch is None else throughput_options.prefetch
        self.max_failures = failure_options.max_failures
        self.stats_interval = throughput_options.stats_interval
        shuffle = sampling_options.shuffle
        bucket_of = bucket_numbers(storage, buckets, transform) if buckets is not None else None
        self.sampler = Sampler(
            len(storage),
            shuffle=shuffle != "none",
            seed=sampling_options.seed,
            rank=rank,
            world_size=world_size,
            pad=sampling_options.pad,
            blocks=None if buckets is not None else shuffle_blocks(storage, shuffle),
            window=block_window(storage, shuffle, sampling_options.shuffle_window),
            buckets=None if bucket_of is None or buckets is None else (bucket_of, len(buckets)),
            batch_size=batch_size,
            leftovers="drop" if buckets is None else buckets.leftovers,
        )
        if buckets is not None:
            _ = self.sampler.epoch_length  # buckets that fill no batch: said now, not at the first batch
        self.filter_report = (
            shuffle_quality(storage, shuffle, self.sampler.window) if isinstance(storage, FilteredStorage) and where is not None else None
        )
        self.extra, self.captions = check_extra(extra, storage)
        self._pool: BufferPool | None = None
        self._shapes: BucketShapes | None = None
        if buckets is not None and bucket_of is not None and transform is not None:
            self._shapes = BucketShapes(
                buckets,
                transform,
                bucket_of,
                batch_size=batch_size,
                capacity=self.decode_concurrency + self.prefetch + 4,
                pin_memory=bool(throughput_options.pin_memory),  # "auto": pinned where CUDA is
            )
        elif transform is not None:
            allocate: Callable[[], np.ndarray] = lambda: allocate_batch(transform, batch_size)  # noqa: E731
            if throughput_options.pin_memory:
                # Page-locked when CUDA is there; without it there is nothing to pin.
                shape = allocate_batch(transform, 1).shape[1:]
                allocate = pinned_allocator((batch_size, *shape), transform.dtype)
            self._pool = BufferPool(allocate, capacity=self.decode_concurrency + self.prefetch + 4)
        self._assembler = BatchAssembler(
            storage,
            self.sampler,
            transform=transform,
            decode=decode,
            extra=self.extra,
            captions=self.captions,
            pool=self._pool,
            policy=self._policy,
            shapes=self._shapes,
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
        assembler, sample_prefetch = self._assembler, self._sample_prefetch
        hooks = TuningHooks(
            settle=self._settle_tuned,
            fetched_batch_bytes=assembler.fetched_batch_bytes,
            requests=lambda: sample_prefetch if self.sample_prefetch else None,
        )
        # With buckets, the largest bucket's batch: what the memory budget must allow.
        shaped = [transform] if self._shapes is None else list(self._shapes.transforms)
        self._tuning = loader_tuning(throughput_options, read_options, hooks, transforms=shaped, batch_size=batch_size)
        self._deliveries = Deliveries(self.sampler, self._assembler._augmentation_seed)
        batching = Batching(batch_size, drop_last, sampling_options, transform, decode, where=describe_where(where))
        self._mixture = MixtureWeights(storage, self.sampler, self._assembler) if isinstance(storage, MixedStorage) else None
        self._filters = ScheduledFilters(storage, unfiltered, self.sampler, shuffle=shuffle, read_through=self._read_through)
        self._state = LoaderState(
            storage,
            self.sampler,
            self._assembler,
            self._deliveries,
            batching,
            mixture=self._mixture,
            filters=self._filters,
            after_load=self._sync_storage_epoch,
            read_through=self._read_through,
        )
        self._exclusions = Exclusions(
            self.sampler,
            self._deliveries,
            self._assembler,
            self._state,
            batch_size=batch_size,
            batch_count=self._batch_count,
            refusal="with buckets" if buckets is not None else "over a mixture" if self._mixture is not None else None,
            in_order=self.in_order,
        )
        self._records = LoaderRecords(
            storage, self.sampler, self._assembler, self._deliveries, self._policy, self._tuning, read_options, batching, self._source
        )
        self._view_indices: np.ndarray | None = None  # while reading through a view (see _read_through)
        # Changes asked for while the loop runs (any thread), applied by the loop's thread
        # between two batches (`_replan`) to the parts they change: see _changes.py.
        self._changes = ChangesBetweenBatches()
        self._change_target = ChangeTarget(self._mixture, self._exclusions)
        self._iteration_lock = threading.Lock()
        self._iterating: str | None = None  # the thread iterating now
        self._iterating_thread: threading.Thread | None = None  # the same thread (names can repeat)

    @property
    def prefetcher(self) -> OutOfOrderPrefetcher | None:
        """The per-sample prefetcher of the running (or last) epoch, with sample prefetch."""
        return self._sample_prefetch.prefetcher

    @property
    def failures(self) -> list[Failure]:
        """Every bad sample met so far (see the class notes)."""
        return self._policy.log.kept()

    @property
    def failure_count(self) -> int:
        """How many bad samples were met so far, in all epochs."""
        return self._policy.log.count

    # ---- state and resume (LoaderState) ---------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is in the epoch: delivered samples only, so batches in flight are read
        again after a resume (batches a read-ahead wrapper such as `stoker.device.to_device`
        still holds count as in flight), with what the positions mean (`fingerprint`) and the
        epoch's delivery digest (`verify_epoch`). Plain data."""
        return self._state.state_dict()

    def fingerprint(self) -> dict[str, Any]:
        """What a position in this Loader's epochs means (saved with its state): the dataset's
        samples and labels (a hash), the sampling and batching, and the transform."""
        return self._state.fingerprint()

    def load_state_dict(
        self,
        state: dict[str, Any] | Sequence[dict[str, Any]],
        *,
        allow_changes: bool = False,
        keys_before: str | os.PathLike[str] | None = None,
        new_samples: Literal["next_epoch", "this_epoch"] = "next_epoch",
    ) -> None:
        """Continue from this rank's state, or from every rank's states to change world size.
        Another batch size is carried over too (the rest of the epoch is dealt in the new
        batches; logged). With buckets it needs every rank's states (the rest of the epoch is
        cut again by bucket for the new size, `stoker.sampling.RecutOrder`; once an epoch) and
        ``leftovers="drop"``; with carried leftovers or ``drop_last`` it is a change refused
        like the others below (which samples are left over depends on the batch size).

        A dataset that gained or lost samples since the state was saved is resumed by key, given
        the key list of the dataset the state was saved over (``keys_before``; found by itself
        beside this Loader's provenance ledger when `record_provenance` came first): the epoch
        goes on in its saved order; samples delivered stay delivered; samples now gone are left
        out for every rank, named in the log and counted by `verify_epoch` as removed; added
        samples are read from the next epoch on, or at the end of this one (``new_samples``),
        shuffled among themselves. Every rank's states are needed (what is left of the epoch is
        dealt again over the ranks, equally). A later resume in the same epoch takes the same
        key list again.

        Example::

            loader.record_provenance("runs/42/ledger")  # writes the key list there, once per dataset
            loader.load_state_dict(states)  # the dataset lost and gained shards since: resumed by key

        Args:
            state: What `state_dict` returned (this rank's), or every rank's states.
            allow_changes: Resume although the dataset, sampling, batching or transform differ
                from what the state was saved with (logged); the saved positions then refer to
                the saved order.
            keys_before: The key list of the dataset the state was saved over: a file written by
                `save_keys`, or a directory holding it (a provenance ledger's).
            new_samples: When samples added since the state are read: ``"next_epoch"`` (the
                default) or ``"this_epoch"`` (at its end).

        Raises:
            ProvenanceError: The state was saved over another dataset or configuration; the
                message says what differs.
            ValueError: Not a Loader state, or states that do not fit together.
        """
        # Under the iteration lock: an iteration cannot start while the state is loaded, and one
        # running is refused (its pipeline reads the old plan and its deliveries would be
        # recorded over the new state: the loop went on delivering the old epoch while the
        # loaded record counted none, and `verify_epoch` failed with 0 deliveries for 64).
        with self._iteration_lock:
            self._refuse_while_iterating("load_state_dict")
            with self._deliveries.lock:  # the record lock: a state taken meanwhile is of before or after
                self._state.load_state_dict(state, allow_changes=allow_changes, keys_before=keys_before, new_samples=new_samples)

    def _refuse_while_iterating(self, what: str) -> None:
        """Raise if another thread's loop is running over this Loader (called under
        `_iteration_lock`). The iterating thread itself may call: a loop it left suspended and
        will not resume (Lightning's epoch cut short by ``limit_train_batches``, whose next
        epoch starts with ``set_epoch`` before the old generator is dropped) is no running epoch."""
        if self._iterating_thread is not None and self._iterating_thread is not threading.current_thread():
            raise RuntimeError(
                f"{what} while thread {self._iterating!r} iterates this Loader: the running epoch would go on over the "
                "old record; call it between runs of the loop (after the loop ends or breaks)"
            )

    def save_keys(self, path: str | os.PathLike[str]) -> str:
        """Write this Loader's dataset's key list (every key, in storage order, with the
        dataset's digest) to ``path``, a file, or a directory where it is named after the
        digest (and written once): what `load_state_dict` needs to resume by key after the
        dataset changed. `record_provenance` writes it beside the ledger by itself. Returns the
        file's path.

        Raises:
            ConfigurationError: pyarrow is not installed (``pip install 'stoker[parquet]'``).
        """
        return os.fspath(self._state.save_keys(path))

    def _read_through(self, storage: Storage, indices: np.ndarray | None) -> None:
        """Read through ``storage`` from now on: a view of this Loader's storage (its samples at
        ``indices`` of it) while an epoch continues over a changed dataset (see
        `load_state_dict`), the storage itself (and None) again after."""
        self._view_indices = indices
        if self._shapes is not None and self.sampler.buckets is not None:
            self._shapes.bucket_of = self.sampler.buckets[0]  # the view's samples' (a filter's epoch), as the sampler's
        self._assembler.storage = storage
        self._assembler.set_samples(storage.keys, storage.labels)
        self._sample_prefetch.storage = storage
        # The next epoch's first samples are asked for early by the storage's own indices.
        self._sample_prefetch.warmup = self._warmup if storage is self.storage else None
        if self._deliveries.ledger is not None:
            self._deliveries.ledger.index_map = indices

    def verify_epoch(self, states: Sequence[dict[str, Any]] | None = None) -> dict[str, int]:
        """Prove that the epoch delivered each of its samples exactly once, across resumes
        (or left it out on purpose: `exclude`).

        Args:
            states: Every rank's `state_dict` at the end of the epoch; None for this Loader's
                own (a world of one rank). The epoch's samples are counted as the world of these
                states deals them.

        Returns:
            ``{"epoch", "samples", "delivered", "excluded", "removed", "added"}``:
            ``delivered``, ``excluded`` (`exclude`) and ``removed`` (gone from a changed dataset
            before they were read, see `load_state_dict`) add up to ``samples``; ``added``
            counts the samples a changed dataset gained (in ``samples`` when they joined this
            epoch). With buckets, ``samples`` are the epoch's full batches' and ``left_over``
            counts the rest (read in a later epoch, see `bucket_counts`).

        Raises:
            ProvenanceError: A sample was missed or delivered twice (the digests differ).
        """
        return self._state.verify_epoch(states)

    @contextlib.contextmanager
    def hold_deliveries(self, ahead: int | None = None) -> Iterator[None]:
        """For wrappers that read batches ahead of the training loop (`stoker.device.to_device`,
        `to_jax`, your own prefetcher): while this is open, each batch this Loader yields is held
        (left out of `state_dict`) until the wrapper hands it on and calls `release`. Batches
        still held when it closes were never delivered: a continued epoch reads them again.

        Args:
            ahead: The most batches the wrapper holds while the training loop runs a step, and
                reads before it hands the loop its next one (`to_device`: 1). Said, it lets
                several ranks leave keys out while their loops run (`exclude`): every rank
                then leaves them out from the same batch. None: not said.

        Example::

            with loader.hold_deliveries():
                for batch in read_ahead(loader):
                    loader.release(batch)
                    yield batch
        """
        if ahead is not None and (isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0):
            raise ConfigurationError(f"hold_deliveries(ahead=...) takes a whole number of batches >= 0, got {ahead!r}")
        with self._deliveries.hold(ahead):
            yield

    def release(self, batch: Batch) -> None:
        """A held batch reached the training loop (see `hold_deliveries`); a batch not held is ignored."""
        self._deliveries.release(batch)

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
        if self._mixture is None:
            raise ConfigurationError(f"set_mixture_weights needs a MixedStorage, not {type(self.storage).__name__}")
        self._mixture.check(weights)
        self._mixture.check_room()
        self._change(lambda running: NewWeights(dict(weights)))  # over a schedule's point due now, which counts as applied

    def exclude(self, *, steps: range | None = None, keys: Iterable[str] | None = None) -> None:
        """Leave the batches of ``steps``, or the samples of ``keys``, out of this epoch.

        By key, the samples not delivered yet in this epoch are left out for every rank (each
        rank calls it with the same keys) and the rest is dealt again, equal steps on each: a
        list from the ledger (`stoker.observe.ledger_keys`: every sample of the steps around a
        spike, as the run that reached them had them), or samples found bad. Called right after
        `load_state_dict` with every rank's states, or while the loop runs, from the next batch:
        then every rank calls it at the same step (between the same two batches), and with
        several ranks the batches come in order (``Sampling(in_order=True)``), so each can tell
        from its own deliveries what the world delivered (`Sampler.settle_deliveries`).
        Through a wrapper that reads ahead (`stoker.device.to_device`, `to_jax`), the batches it
        holds already stay as they are (they may yet be handed back, and are then read again),
        and with several ranks every rank leaves the keys out from the same batch, the first
        past what its wrapper may have read (`hold_deliveries(ahead=...)`).
        Keys already delivered (or read ahead) in this epoch are named in the log and stay.

        By step, the batches of ``steps`` are left out on this rank (every rank calls it
        with the same steps, so all take the same number of steps after): to cut out the batches
        around a loss spike after resuming from a checkpoint before it. ``steps`` count as
        `step` does (batches delivered since the run began, carried across resumes); the
        batches are those this run deals at those steps, which are the ones the run that
        reached them trained on there only if it delivered batches in order: train with
        ``Sampling(in_order=True)`` to cut out batches by step (by default a batch leaves as it
        completes, so step N may have seen a batch dealt later; by key needs no order). The
        samples are never read, are recorded as left out in `state_dict` (a resume keeps them
        out), and `verify_epoch` proves the rest of the epoch was delivered once, counting them
        apart. Applies from the next batch.

        Example::

            loader.load_state_dict(checkpoint_at_step_183_000)
            loader.exclude(steps=range(183_390, 183_411))
            # or, from the ledger of the run that reached the spike:
            loader.exclude(keys=ledger_keys("runs/42/ledger", steps=range(183_390, 183_411)))

        Args:
            steps: Consecutive steps of this epoch not delivered yet.
            keys: Samples to leave out of the rest of this epoch (one of ``steps`` and ``keys``):
                any iterable of keys (a list, a set, a generator: read once, here), at most as
                many as the storage has samples.

        Raises:
            ConfigurationError: Not a range of consecutive steps, a step already delivered or
                past this epoch's last, not an iterable of keys (a key that is null, not text or
                not UTF-8 is named with its position), a key the storage does not hold, keys while the loop runs
                with several ranks delivering out of order or behind a read-ahead wrapper that
                does not say how far it reads (`hold_deliveries(ahead=...)`; give them between
                runs of the loop there), or a
                Loader with buckets by key (whose batches are dealt whole by bucket: by step,
                a bucketed Loader leaves out whole batches too, and takes it).
        """
        if (steps is None) == (keys is None):
            raise ConfigurationError("exclude takes steps= or keys=, one of them")
        if keys is not None:
            listed = self._exclusions.read_keys(keys)
            # The slot (the first batch past what a read-ahead wrapper may hold) is for a running loop.
            self._change(lambda running: ExcludeKeys(listed, self._exclusions.check_keys(listed) if running else None))
            return
        assert steps is not None
        self._exclusions.check_steps(steps)
        self._change(lambda running: ExcludeSteps(steps))

    def _change(self, change_for: Callable[[bool], Change]) -> None:
        """The change ``change_for(loop running)`` makes: applied now when no loop runs (under
        the record lock), or queued for the loop's next batch (`_replan`). Decided and done
        under the iteration lock, so a loop starting or ending meanwhile sees it whole: applied
        before its plan is made, or queued for it (was: applied "now" as another thread's loop
        started, which then died on a plan the change had cut, 66,666 of 100,000 samples
        undelivered)."""
        with self._iteration_lock:
            running = self._iterating is not None
            change = change_for(running)
            if running:
                self._changes.put(change)
                return
            with self._deliveries.lock:
                change.apply(self._change_target)

    def _apply_waiting_changes(self) -> None:
        """Apply the changes waiting, in their order, under the record lock (a state taken
        meanwhile is of before or after them)."""
        changes = self._changes.take()
        if changes:
            with self._deliveries.lock:
                for change in changes:
                    change.apply(self._change_target)

    def set_mixture_schedule(self, points: dict[int, dict[str, float]]) -> None:
        """A curriculum by step: a `stoker.storage.MixedStorage`'s weights from each of the
        given steps on (`step`: batches delivered since the run began, carried across resumes),
        each applied between two batches as `set_mixture_weights` does. The schedule, and how
        far it went, are part of `state_dict`: a resume continues it without it being given
        again, and a schedule given after a resume replaces the rest of the saved one (points
        already passed are not applied again).

        Example::

            loader.set_mixture_schedule({0: {"web": 0.8, "books": 0.2}, 20_000: {"web": 0.5, "books": 0.5}})

        Args:
            points: ``{step: {source name: weight}}``.

        Raises:
            ConfigurationError: The storage is not a weighted mixture, or a step or weights are
                not valid (named with their step).
        """
        if self._mixture is None:
            raise ConfigurationError(f"set_mixture_schedule needs a MixedStorage, not {type(self.storage).__name__}")
        schedule = MixtureSchedule(points, self._mixture.check)
        if self._mixture.schedule is not None:
            schedule.applied_through = self._mixture.schedule.applied_through
        self._mixture.schedule = schedule

    def set_filter_schedule(self, points: dict[int, str | None]) -> None:
        """A curriculum of filters by step: from each of the given steps on, epochs read only
        the samples that filter keeps (an expression as `Sampling(where=...)` takes, over the
        storage's own columns; None for none beyond ``where=``, which always holds too).

        Which samples an epoch holds is what every rank must agree on without talking to the
        others, so a point takes effect at the first epoch that begins at or after its step
        (`step`: batches delivered since the run began, carried across resumes); an epoch not
        begun yet when the schedule is given reads under the point in force now. Each epoch is
        then exact as any: equal steps per rank, exact resume, `verify_epoch` over the samples
        it holds. To cut samples out within an epoch, use `exclude`. Every filter is worked out
        when the schedule is given (a bad one is named with its step) and again, from the
        column cache, when its epoch begins; never per read. The schedule, and the filter the
        epoch reads under, are part of `state_dict`: a resume continues it without it being
        given again; one given after a resume replaces it from the next epoch.

        Example::

            loader.set_filter_schedule({0: "length < 512", 40_000: "length < 2048", 90_000: None})

        Args:
            points: ``{step: expression or None}``.

        Raises:
            ConfigurationError: A mixture (filter its sources), an epoch continued over a
                changed dataset, steps that are not whole numbers >= 0, or a filter that does
                not parse, names a column the storage lacks or keeps nothing (named with its step).
        """
        refusal = (
            "over a mixture (filter its sources)"
            if isinstance(self.storage, EpochStorage)
            else "in an epoch continued over a changed dataset (give it at the next epoch)"
            if self._state.change is not None
            else None
        )
        if refusal is not None:
            raise ConfigurationError(f"set_filter_schedule does not take a Loader {refusal}")
        begun = self._iterating is not None or self.sampler.delivered_count > 0 or self.sampler.done_everywhere > 0
        self._filters.set(points, step=self._deliveries.next_step, begun=begun)

    def _scheduled_weights(self) -> tuple[int, dict[str, float]] | None:
        """The schedule's point due before the next batch, (its step, its weights), or None if
        none is due. The caller marks it applied (`NewWeights.apply`) when it applies its weights,
        under the record lock: a state never says a point was applied with the weights before it."""
        schedule = self._mixture.schedule if self._mixture is not None else None
        due = schedule.due(self._deliveries.next_step) if schedule is not None else None
        if schedule is None or due is None:
            return None
        _logger.info("mixture weights from step %d (the schedule's, at step %d): %s", self._deliveries.next_step, due[0], due[1])
        return due

    # ---- what it reports (LoaderRecords) ----------------------------------------------------

    def bucket_counts(self) -> dict[str, Any] | None:
        """With buckets, this epoch's: each bucket's ``shape`` and ``samples``, the ``batches``
        dealt (over all ranks), the samples ``left_over`` per bucket (its last partial batch and
        its share of the batches past a multiple of the ranks: read in a later epoch), the
        samples ``without_bucket`` (no readable size), and the shuffle's mixing as numbers: the
        share of consecutive batches (in the dealing) from the same bucket, ``same_bucket_next``,
        against ``same_bucket_expected`` for batches drawn independently; for an epoch resumed
        with another batch size, ``cut``: the ``batch_size_before``, and the rest's ``batches``
        and samples ``left_over`` (the figures before it are the epoch's first order's). None
        without buckets."""
        return bucket_report(self.sampler, self.buckets) if self.buckets is not None else None

    def stats(self) -> PipelineStats | None:
        """Per-stage stats of the running epoch, or of the last one, with the bad samples met so
        far by stage and action (``sample_failures``) and the live tuner's moves in all epochs
        (``tuning``)."""
        return self._records.stats()

    def snapshot(self) -> LiveSnapshot:
        """The Loader's figures now, read-only: what the metrics endpoint, `stoker bench` and
        reports read (see `stoker.observe.LiveSnapshot`). Cheap enough for every scrape: the
        pipeline's stats and a few counters, nothing per sample."""
        return self._records.snapshot()

    @property
    def totals(self) -> RunTotals:
        """The finished epochs' counts (what counters across epochs add to the running one): a
        copy taken whole, which later epochs do not change."""
        return self._records.totals_now()

    def record_provenance(self, directory: str | os.PathLike[str]) -> ProvenanceLedger:
        """Keep a provenance ledger in ``directory`` from now on: every delivered batch's samples
        (key, where their bytes are, length and CRC-32, epoch, position, augmentation seed), one
        file per rank and run, readable up to the last batch even after a kill.
        `stoker.loader.replay` (and ``stoker replay``) builds any recorded batch again bit for
        bit. Steps are numbered from this rank's `step` (carried by `state_dict`).

        Example::

            loader = Loader("shards/", batch_size=256, transform=transform)
            loader.record_provenance("runs/42/ledger")

        Raises:
            ConfigurationError: pyarrow is not installed (``pip install 'stoker[parquet]'``).
            StorageError: The directory cannot be written.
        """
        ledger = self._records.record_provenance(directory)
        ledger.index_map = self._view_indices  # a continued epoch's view, where one is read
        self._state.ledger_directory = ledger.directory
        self._state.save_keys(ledger.directory)
        return ledger

    @property
    def step(self) -> int:
        """Batches this rank delivered since the run began (carried across resumes by the state)."""
        return self._deliveries.step

    def close(self) -> None:
        """Finish the provenance ledger, if any (the storage stays open: it is the caller's)."""
        self._deliveries.close()

    # ---- epochs and resume ----------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: a new order from (seed, epoch), and a new draw of a mixture.

        Raises:
            RuntimeError: Another thread's loop is iterating this Loader (call it between runs of the loop).
        """
        # Under the iteration lock: from another thread mid-loop, the running pipeline went on
        # with the old epoch's plan while the record counted the new one (epoch 3 "48
        # deliveries for 64 samples" at `verify_epoch`).
        with self._iteration_lock:
            self._refuse_while_iterating("set_epoch")
            self._start_epoch(epoch)

    def _start_epoch(self, epoch: int) -> None:
        """`set_epoch` without the check: the loop itself starts the next epoch this way."""
        # Under the record lock: a state taken from another thread meanwhile is of the old epoch
        # or of the new one (once, the sampler's new epoch was saved with the old epoch's digest).
        with self._deliveries.lock:
            self.sampler.set_epoch(epoch)
            self._state.epoch_changed()
            self._filters.begin_epoch(self._deliveries.next_step)
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
        """Batches in this rank's epoch, those delivered and those left, as torch's
        ``len(DataLoader)`` counts an epoch whatever has been read of it: the same before,
        during and after the epoch, and after a mid-epoch resume (`batches_left` is the rest).
        A finished epoch is counted until the next one starts (`set_epoch`, or iterating on)."""
        return self.epoch_batches

    @property
    def batches_left(self) -> int:
        """Batches this rank has left in the epoch: what an iteration now delivers before the
        epoch ends (0 once it has ended): what `len` was in stoker 0.1."""
        return self._batch_count(self.sampler.plan_arrays().size)

    @property
    def epoch_batches(self) -> int:
        """Batches in this rank's whole epoch, those delivered and those left: `len` (what a
        trainer counts an epoch in, also after a mid-epoch resume)."""
        return -(-self.sampler.delivered_count // self.batch_size) + self.batches_left

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
            self._iterating_thread = threading.current_thread()
        finished = False
        pipeline: Pipeline[Any] | None = None
        try:
            scheduled = self._scheduled_weights()
            if scheduled is not None:
                with self._deliveries.lock:
                    NewWeights(scheduled[1], through=scheduled[0]).apply(self._change_target)
            plan = self.sampler.plan_arrays()
            if plan.size == 0 and self.sampler.delivered_count > 0:
                _logger.info(
                    "epoch %d is finished; starting epoch %d (call set_epoch to choose)", self.sampler.epoch, self.sampler.epoch + 1
                )
                self._start_epoch(self.sampler.epoch + 1)
                plan = self.sampler.plan_arrays()
            self._policy.start_epoch(plan.size + self.sampler.delivered_count)
            pipeline = self._build(plan)
            self._records.epoch_started(pipeline)
            if self._tuning is not None:
                self._tuning.attach(pipeline)
            pipeline.start()
            while True:
                scheduled = self._scheduled_weights()
                if scheduled is not None:
                    self._changes.put(NewWeights(scheduled[1], through=scheduled[0]))
                if self._changes:
                    pipeline = self._replan(pipeline)
                try:
                    batch = pipeline.get()
                except StopIteration:
                    break
                batch = _handed_over(batch)
                self._deliveries.delivered(batch)
                yield batch
            finished = True
        finally:
            if pipeline is not None:
                # A stuck read must not hold up an interrupted loop; a finished epoch has
                # nothing left running.
                pipeline.stop(timeout=10.0 if finished else _QUICK_STOP)
                if self._tuning is not None:
                    self._tuning.detach()
            self._records.epoch_ended(pipeline)
            with self._iteration_lock:
                try:
                    # Asked for after the last batch (or before a break): applied now, so the
                    # state says so and no later epoch or loaded state gets them (was: kept
                    # waiting, then applied to the next epoch, or over a checkpoint loaded after).
                    self._apply_waiting_changes()
                finally:
                    self._iterating = None
                    self._iterating_thread = None

    def _replan(self, pipeline: Pipeline[Any]) -> Pipeline[Any]:
        """Between two batches: stop the epoch's pipeline (what it read ahead was not
        delivered), apply the changes waiting (the one place they are applied), and go on with
        a pipeline over the rest."""
        pipeline.stop(timeout=_QUICK_STOP)
        if self._tuning is not None:
            self._tuning.detach()
        self._apply_waiting_changes()
        rebuilt = self._build(self.sampler.plan_arrays())
        self._records.pipeline_replaced(pipeline, rebuilt)
        if self._tuning is not None:
            self._tuning.attach(rebuilt)
        rebuilt.start()
        return rebuilt

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
        if self._shapes is not None:
            self._shapes.capacity = self.decode_concurrency + self.prefetch + 4


def _handed_over(batch: Batch) -> Batch:
    """The batch as the training loop gets it: a Batch and a lease on its buffer made by this
    thread, so the buffer is back in the pool as soon as the loop drops the batch, free-threaded
    CPython included (see `BufferPool.hand_over`)."""
    data = BufferPool.hand_over(batch.data)
    return batch if data is batch.data else dataclasses.replace(batch, data=data)
