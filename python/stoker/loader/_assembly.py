"""Batch assembly: from a batch's plan to the `Batch` the training loop gets.

The Loader's two stages call it: ``fetch`` reads a batch's samples in one read (or the
prefetcher hands over the samples it assembled), ``decode`` decodes them into a pooled buffer
and deals with every bad sample as the `FailurePolicy` says, drawing replacements from (seed,
epoch, position) so a resumed run makes the same choice. A store that is down or closed is not a
bad sample: it ends the run (`AbortPipeline`) with one error, and nothing of the batch counts as
delivered.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _native
from ..device import BufferPool
from ..errors import SampleError, StorageClosedError, StorageUnavailableError, StorageUnreachableError, TooManyBadSamplesError
from ..ops import CaptionBatch, Captions, caption_text, tokenize_captions
from ..ops.batch import Transform
from ..pipeline import AbortPipeline
from ..sampling import BatchPlan, FetchedSample, PlannedSample, Sampler
from ..storage import MemberStorage, Storage, label_array
from ._batch import Batch
from ._decode import decode_payloads
from ._failure_policy import BadSampleHandler, replacement_candidates
from .buckets import BucketShapes

__all__ = ["BatchAssembler", "FetchedBatch", "label_array"]


@dataclasses.dataclass
class FetchedBatch:
    """A batch between the fetch and decode stages: its number in the epoch, its plan, its
    samples' keys, and each sample's bytes or the error its read failed with."""

    number: int
    plan: BatchPlan
    keys: list[str]
    payloads: list[bytes | Exception]


def _checksums(payloads: Sequence[bytes | Exception]) -> tuple[np.ndarray, np.ndarray]:
    """Each payload's CRC-32 and length (0 and -1 for a failed read), for the provenance ledger."""
    checksums = np.zeros(len(payloads), dtype=np.uint32)
    lengths = np.full(len(payloads), -1, dtype=np.int64)
    for slot, payload in enumerate(payloads):
        if not isinstance(payload, Exception):
            checksums[slot], lengths[slot] = _native.crc32(payload), len(payload)
    return checksums, lengths


class BatchAssembler:
    """Reads, decodes and completes the batches of one Loader.

    Args:
        storage: Where the samples are.
        sampler: The Loader's sampler (its seed and epoch place augmentation and replacements).
        transform: Decodes a batch into one array, or None.
        decode: Decodes one sample, when there is no ``transform``.
        extra: Member extensions to deliver beside the payload (a `MemberStorage`'s).
        pool: Reusable batch buffers, with a ``transform``.
        policy: What a bad sample does, with its budget and log.
        shapes: With buckets, each bucket's transform and pool (``transform`` and ``pool`` are
            then not used).
        captions: Tokenize each sample's caption (one of the ``extra`` members) into the batch.
    """

    def __init__(
        self,
        storage: Storage,
        sampler: Sampler,
        *,
        transform: Transform | None,
        decode: Callable[[bytes], Any] | None,
        extra: tuple[str, ...],
        pool: BufferPool | None,
        policy: BadSampleHandler,
        shapes: BucketShapes | None = None,
        captions: Captions | None = None,
    ) -> None:
        self.storage, self.sampler = storage, sampler
        self.transform, self.decode_function, self.extra = transform, decode, extra
        self.pool, self.policy = pool, policy
        self.shapes = shapes
        self.captions = captions
        self.keys: Sequence[str] = storage.keys
        self.labels = label_array(storage.labels)
        # Bytes read so far and in how many batches: what a batch holds before decode, for the
        # live tuner's memory count. Added to by every fetch thread and read by the tuner's:
        # `_counts_lock` keeps the two whole together.
        self._counts_lock = threading.Lock()
        self.bytes_fetched = 0
        self.batches_fetched = 0
        # With a provenance ledger: each batch carries its samples' CRC-32 and length, and the
        # ledger's rows for it, prepared here, off the training loop's thread.
        self.provenance = False
        self.prepare_rows: Callable[[Batch], Any] | None = None

    def _count(self, payloads: Sequence[bytes | Exception]) -> None:
        size = sum(len(payload) for payload in payloads if not isinstance(payload, Exception))
        with self._counts_lock:
            self.bytes_fetched += size
            self.batches_fetched += 1

    def fetched_batch_bytes(self) -> float:
        """Mean bytes of one batch as read so far (0.0 before the first)."""
        with self._counts_lock:
            return self.bytes_fetched / self.batches_fetched if self.batches_fetched else 0.0

    def set_samples(self, keys: Sequence[str], labels: Sequence[int | float | None]) -> None:
        """The storage's samples changed (a mixture's new epoch)."""
        self.keys, self.labels = keys, label_array(labels)

    def fetch(self, job: tuple[int, BatchPlan]) -> FetchedBatch:
        """The fetch stage's op (local storage): the batch's samples in one read."""
        number, plan = job
        indices = plan.indices.tolist()
        payloads = self.storage.try_read_indices(indices)
        self.raise_if_unavailable(payloads)
        self._count(payloads)
        return FetchedBatch(number, plan, self.keys_of(indices), payloads)

    def keys_of(self, indices: list[int]) -> list[str]:
        """The keys of ``indices``: a batch at once where the storage's key column can (tar
        shards: a shard's keys at a time), else one by one."""
        take = getattr(self.keys, "take", None)
        return take(indices) if take is not None else [self.keys[index] for index in indices]

    def raise_if_unavailable(self, payloads: Sequence[object]) -> None:
        """An unreachable store stops the epoch with one error naming every sample it failed; so
        does a closed one (its samples are not bad samples to skip: they were never read)."""
        closed = next((payload for payload in payloads if isinstance(payload, StorageClosedError)), None)
        if closed is not None:
            raise AbortPipeline(closed)
        outages = [payload for payload in payloads if isinstance(payload, StorageUnavailableError)]
        if not outages:
            return
        first = outages[0]
        if isinstance(first, StorageUnreachableError):  # one line names the host and the cause
            raise AbortPipeline(first)
        samples = tuple(name for outage in outages for name in outage.samples)
        error = StorageUnavailableError(
            f"{first.store or self.storage.describe()} is unavailable: {len(outages)} sample(s) of a batch could not be read "
            f"within the retry deadline (nothing of that batch was delivered; a resume reads them again), e.g. {first}",
            store=first.store,
            samples=samples,
            seconds=max(outage.seconds for outage in outages),
        )
        error.__cause__ = first
        raise AbortPipeline(error)

    def from_prefetched(self, number: int, fetched: list[FetchedSample]) -> FetchedBatch:
        """A batch the prefetcher assembled, as the decode stage takes it."""
        planned: list[PlannedSample] = [sample.context for sample in fetched]
        payloads: list[bytes | Exception] = []
        for sample, about in zip(fetched, planned):
            if sample.data is not None:
                payloads.append(sample.data)
            elif isinstance(sample.error, Exception):
                payloads.append(sample.error)
            else:
                raise sample.error or RuntimeError(f"sample {about.key!r} was fetched with neither data nor error")
        self.raise_if_unavailable(payloads)
        self._count(payloads)
        plan = BatchPlan(
            np.array([sample.position for sample in fetched], dtype=np.int64),
            np.array([sample.request for sample in fetched], dtype=np.int64),
            np.array([about.padding for about in planned], dtype=bool),
        )
        return FetchedBatch(number, plan, [about.key for about in planned], payloads)

    def decode(self, job: FetchedBatch) -> Batch:
        """The decode stage's op: the batch decoded into a pooled buffer, its bad samples dealt
        with by the policy (replaced, zero-filled, or the run stopped), as a `Batch`."""
        number, plan, payloads = job.number, job.plan, job.payloads
        keys = list(job.keys)
        labels = self.labels[plan.indices]
        positions = plan.positions.tolist()
        transform, pool = self.shapes.for_batch(plan.indices) if self.shapes is not None else (self.transform, self.pool)
        out = pool.acquire() if pool is not None else None
        data, failed = self._decode_samples(payloads, positions, keys, out, transform)
        failed.update(
            {
                slot: ("fetch", f"{type(payload).__name__}: {payload}")
                for slot, payload in enumerate(payloads)
                if isinstance(payload, Exception)
            }
        )
        extras: list[dict[str, Any]] = [{} for _ in keys]
        if self.extra:
            members = self._members(plan.indices.tolist())
            self.raise_if_unavailable(members)
            for slot, found in enumerate(members):
                if isinstance(found, Exception):
                    failed.setdefault(slot, ("fetch", f"{type(found).__name__}: {found}"))
                else:
                    extras[slot] = found
                    reason = self._caption_problem(found)
                    if reason is not None:
                        failed.setdefault(slot, ("caption", reason))
        valid = np.ones(len(keys), dtype=bool)
        replaced = np.zeros(len(keys), dtype=bool)
        indices = plan.indices.copy()
        checksums = lengths = None
        if self.provenance:
            checksums, lengths = _checksums(payloads)
        if failed:
            replacements: dict[int, tuple[int, str, bytes]] = {}

            def replace(slot: int) -> str | None:
                found = self._replace(slot, data, out, positions[slot], extras, transform)
                if found is None:
                    return None
                replacements[slot] = found
                return found[1]

            def zero(slot: int) -> None:
                valid[slot] = False
                data[slot] = None if isinstance(data, list) else 0
                extras[slot] = {}

            try:
                self.policy.apply(failed, epoch=self.sampler.epoch, keys=keys, positions=positions, replace=replace, zero=zero)
            except (SampleError, TooManyBadSamplesError) as error:
                raise AbortPipeline(error) from None
            for slot, (index, key, payload) in replacements.items():
                # Looked up as an array: a storage's label column answers arrays with numbers
                # (-1 where there is no label), where one at a time it answers None.
                label = self.labels[np.array([index], dtype=np.int64)][0]
                keys[slot], labels[slot], replaced[slot], indices[slot] = key, label, True, index
                if checksums is not None and lengths is not None:
                    checksums[slot], lengths[slot] = _native.crc32(payload), len(payload)
            if checksums is not None and lengths is not None:
                zeroed = ~valid
                checksums[zeroed], lengths[zeroed] = 0, -1
        batch = Batch(
            data=data,
            labels=labels,
            keys=keys,
            valid=valid & ~plan.padding,
            padding=plan.padding.copy(),
            positions=plan.positions.copy(),
            index=number,
            replaced=replaced,
            extra=extras if self.extra else None,
            captions=self._tokenized(extras, valid) if self.captions is not None else None,
            indices=indices,
            checksums=checksums,
            lengths=lengths,
        )
        if self.prepare_rows is not None:
            batch._ledger_rows = self.prepare_rows(batch)
        return batch

    def _members(self, indices: list[int]) -> list[dict[str, Any] | Exception]:
        """The ``extra`` members of the samples at ``indices`` (`check_extra` made sure the
        storage has members)."""
        assert isinstance(self.storage, MemberStorage)
        return self.storage.try_read_members(indices, self.extra)

    def _decode_samples(
        self,
        payloads: Sequence[bytes | Exception],
        positions: list[int],
        keys: list[str],
        out: np.ndarray | None,
        transform: Transform | None,
    ) -> tuple[Any, dict[int, tuple[str, str]]]:
        seeds = [self._augmentation_seed(position) for position in positions]
        return decode_payloads(payloads, keys=keys, seeds=seeds, transform=transform, decode=self.decode_function, out=out)

    def _replace(
        self, slot: int, data: Any, out: np.ndarray | None, position: int, extras: list[dict[str, Any]], transform: Transform | None
    ) -> tuple[int, str, bytes] | None:
        """Fill ``slot`` with the first readable, decodable replacement for the sample at
        ``position`` (see `replacement_candidates`). Returns (storage index, key, its bytes), or None."""
        for index in replacement_candidates(self.sampler.seed, self.sampler.epoch, position, len(self.keys)):
            key = self.keys[index]
            payload = self.storage.try_read_indices([index])[0]
            self.raise_if_unavailable([payload])
            if isinstance(payload, Exception):
                continue
            if self.extra:
                members = self._members([index])[0]
                self.raise_if_unavailable([members])
                if isinstance(members, Exception) or self._caption_problem(members) is not None:
                    continue
                extras[slot] = members
            target = out[slot : slot + 1] if out is not None else None
            decoded, failures = self._decode_samples([payload], [position], [key], target, transform)
            if failures:
                continue
            if isinstance(data, list):
                data[slot] = decoded[0]
            return index, key, payload
        return None

    def _caption_problem(self, members: dict[str, Any]) -> str | None:
        """Why a sample's caption cannot be tokenized, or None (always None without captions)."""
        if self.captions is None:
            return None
        try:
            caption_text(members, self.captions)
        except ValueError as error:
            return str(error)
        return None

    def _tokenized(self, extras: list[dict[str, Any]], valid: np.ndarray) -> CaptionBatch:
        """The batch's captions as token rows (an empty row for a zero-filled sample)."""
        assert self.captions is not None
        texts = [caption_text(members, self.captions) if ok else None for members, ok in zip(extras, valid.tolist())]
        return tokenize_captions(texts, self.captions)

    def _augmentation_seed(self, position: int) -> int:
        """A sample's random crop and flip depend on (seed, epoch, position) only: a resumed or
        re-sharded run augments every sample exactly as the uninterrupted run would."""
        mixed = self.sampler.seed * 0x9E3779B97F4A7C15 + self.sampler.epoch * 0xBF58476D1CE4E5B9 + position
        return mixed & 0xFFFFFFFFFFFFFFFF
