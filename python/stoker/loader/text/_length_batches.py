"""Documents batched by length (``TokenLoader(..., buckets=LengthBuckets([...]))``): every batch
holds whole documents of one length bucket, each padded to the bucket's length, one document a
row, for models that take one sequence a row (encoders, classifiers, fine-tuning on prompts and
answers) where packing several documents into a row is not wanted.

A document goes to the shortest bucket that holds it, so its row is padded by less than the gap
to the next bucket; one longer than every bucket is cut to the longest (counted). Lengths come
from the token file's offsets: nothing is read to bucket the corpus. The order is the bucketed
order of `stoker.sampling.BucketOrder`: each batch one bucket's, equal steps on every rank,
exact resume, leftovers dropped or carried by the buckets' policy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...errors import ConfigurationError
from ...ops.packing import PackedBatch
from ...sampling import BucketOrder, EpochPlan, LengthBuckets, Sampler

__all__ = ["LengthBatches", "document_buckets"]


def document_buckets(lengths: np.ndarray, buckets: LengthBuckets) -> np.ndarray:
    """Each document's bucket: the shortest that holds it, the longest for longer ones; -1 for
    an empty document (nothing to train on)."""
    sizes = np.array(buckets.lengths)
    order = np.argsort(sizes, kind="stable")
    place = np.minimum(np.searchsorted(sizes[order], np.asarray(lengths, dtype=np.float64), side="left"), len(order) - 1)
    assigned = order[place].astype(np.int16)
    assigned[np.asarray(lengths) <= 0] = -1
    return assigned


def padded_batch(documents: list[np.ndarray], length: int, first_id: int, pad_id: int) -> PackedBatch:
    """``documents`` one a row, cut to ``length`` and padded to it, as a `PackedBatch` (the
    packer's fields: positions restart per row, segment 1 on the document, 0 on padding)."""
    rows = len(documents)
    input_ids = np.full((rows, length), pad_id, dtype=np.int64)
    kept = np.array([min(len(document), length) for document in documents], dtype=np.int64)
    for row, document in enumerate(documents):
        input_ids[row, : kept[row]] = document[: kept[row]]
    columns = np.arange(length)
    real = columns[None, :] < kept[:, None]
    # One segment per document and one per padding tail: [doc, pad, doc, pad, ...], empty pads out.
    pieces = np.stack([kept, length - kept], axis=1).reshape(-1)
    pieces = pieces[(pieces > 0) | (np.arange(len(pieces)) % 2 == 0)]
    segments = np.stack([np.arange(rows), first_id + np.arange(rows), np.zeros(rows, dtype=np.int64), kept], axis=1)
    return PackedBatch(
        input_ids=input_ids,
        position_ids=np.broadcast_to(columns.astype(np.int32), (rows, length)).copy(),
        segment_ids=real.astype(np.int32),
        loss_mask=real,
        cu_seqlens=np.concatenate([[0], np.cumsum(pieces)]).astype(np.int32),
        segments=segments.astype(np.int64),
        real_tokens=int(kept.sum()),
    )


class LengthBatches:
    """A `TokenLoader`'s batches with buckets: the plan's documents ``batch_size`` at a time
    (each group one bucket's, by the bucketed order), read, cut and padded to the bucket.

    Args:
        source: Tokenized documents (``documents(indices)``) with their ``lengths``.
        buckets: The lengths, whole numbers of tokens.
        batch_size: Rows per batch.
        context_length: The longest a bucket may be.
        shuffle: Must be on: the bucketed order shuffles.
        pad_id: The padding token.

    Raises:
        ConfigurationError: A source without lengths, buckets that are not whole numbers up to
            ``context_length``, or no shuffle.
        TypeError: Buckets that are not `LengthBuckets`.
    """

    def __init__(self, source: Any, buckets: LengthBuckets, *, batch_size: int, context_length: int, shuffle: bool, pad_id: int) -> None:
        if not isinstance(buckets, LengthBuckets):
            raise TypeError(f"buckets must be a stoker.sampling.LengthBuckets, got {type(buckets).__name__}")
        lengths = getattr(source, "lengths", None)
        if lengths is None:
            raise ConfigurationError(
                "buckets by length need each document's length before the epoch: give a TokenFile (a token file with its "
                "offsets; stoker.ingest.write_token_file writes one), not token shards, whose lengths are known only once read"
            )
        if not shuffle:
            raise ConfigurationError("buckets shuffle within each bucket and across batches: leave shuffle=True")
        if max(buckets.lengths) > context_length or any(length != int(length) for length in buckets.lengths):
            raise ConfigurationError(f"bucket lengths are whole numbers of tokens up to context_length={context_length}: {buckets.lengths}")
        self.source, self.buckets, self.bucket_of = source, buckets, document_buckets(np.asarray(lengths), buckets)
        self.batch_size, self.pad_id = batch_size, pad_id
        self.taken = 0  # documents of this epoch's plan delivered
        self.cut = 0  # documents cut to the longest bucket so far

    def batches(self, plan: EpochPlan) -> Iterator[PackedBatch]:
        """The rest of ``plan``'s batches; `taken` moves past a batch as it is handed over."""
        while self.taken < plan.size:
            part = plan.part(self.taken, self.taken + self.batch_size)
            indices = part.indices.tolist()
            length = int(self.buckets.lengths[int(self.bucket_of[indices[0]])])
            documents = self.source.documents(indices)
            self.cut += sum(1 for document in documents if len(document) > length)
            batch = padded_batch(documents, length, self.taken, self.pad_id)
            self.taken += len(indices)
            yield batch

    def report(self, sampler: Sampler) -> dict[str, Any]:
        """`TokenLoader.bucket_counts` for the sampler's epoch."""
        order = sampler.order_function()
        assert isinstance(order, BucketOrder)
        return {
            "length": list(self.buckets.lengths),
            "samples": order.sizes.tolist(),
            "batches": order.batches,
            "left_over": order.leftovers().tolist(),
            "leftovers": order.policy,
            "without_bucket": int((self.bucket_of < 0).sum()),
            "cut": self.cut,
        }

    def restore(self, taken: Any, plan: EpochPlan) -> None:
        """Continue after ``taken`` documents of ``plan`` (from a state).

        Raises:
            ConfigurationError: Not a whole number of batches within the plan.
        """
        if isinstance(taken, bool) or not isinstance(taken, int) or not 0 <= taken <= plan.size or taken % self.batch_size:
            raise ConfigurationError(f"TokenLoader state: 'taken' must be a whole number of batches up to {plan.size}, got {taken!r:.40}")
        self.taken = taken
