"""`BucketOrder`: an epoch's order in which every batch of every rank is one bucket's, all ranks
take the same number of steps, and the order is a function of (seed, epoch) evaluated a chunk
at a time, as the uniform shuffle's is.

The hand-written bucket samplers of the diffusion trainers fail in three ways this order rules
out: ranks get different step counts at the epoch's end (a collective on one rank while another
has stopped hangs the job), leftovers of several buckets are mixed into one batch, and a resume
replays or skips samples because the sampler's state is the generator's, not the positions'.

The layout, for batch size B and W ranks:

- each bucket's samples are shuffled among themselves (`IndexPermutation` over the bucket's
  members, which are kept sorted by bucket once per dataset);
- they are cut into full batches; a bucket's last partial batch is left over;
- the full batches of all buckets are shuffled together (a permutation of batch numbers), and the
  count is cut to a multiple of W: the batches past it are left over too;
- batch b goes to round b // W and rank b % W, and its k-th sample to epoch position
  ``(b // W) * W * B + k * W + b % W``: the rank dealing of `EpochPlan` (rank r takes positions
  r, r + W, ...) then hands rank r exactly batch b's samples, in its order, as its batch b // W.

What becomes of the leftovers is a policy (``leftovers``):

- ``"drop"``: each epoch is its own pass over every bucket; the leftovers are not read this epoch
  (`leftovers` counts them by bucket) and a later epoch's shuffle gives them their turn. The
  order is a permutation of every sample: the first `length` positions are the epoch, the
  leftovers follow it.
- ``"carry"``: each bucket is read as one endless stream of passes (pass j is the bucket's
  shuffle for j), and an epoch takes the full batches of what is left of the stream up to the
  end of its own pass: the leftovers of epoch e are the first samples epoch e + 1 reads of that
  bucket (`carried` names them), so every sample is read once per pass of its bucket, none is
  skipped. An epoch may then read a carried sample again in its own pass (at most two batches'
  worth per bucket). The batches past a multiple of the ranks are the last of some buckets,
  carried too. Where each epoch's stream starts is worked out from epoch 0 (a few array steps
  an epoch, no sample-sized work).

Samples of no bucket (unknown size) are never read under either policy.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigurationError
from ._permutation import IndexPermutation

__all__ = ["LEFTOVER_POLICIES", "BucketOrder", "check_leftovers"]

_BUCKET_STREAM = 0x5EED_B0C5
"""Mixed into the seed of each bucket's own shuffle, so that it differs from the batch shuffle's."""

_TRIM_STREAM = 0x7B1A_CA22
"""Mixed into the seed of the choice of buckets whose last batch waits (``"carry"``)."""

LEFTOVER_POLICIES = ("drop", "carry")


def check_leftovers(leftovers: str) -> str:
    """A leftover policy, checked (see `BucketOrder`): the one place it is."""
    if leftovers not in LEFTOVER_POLICIES:
        raise ConfigurationError(f"leftovers must be one of {', '.join(map(repr, LEFTOVER_POLICIES))}, got {leftovers!r}")
    return leftovers


class BucketOrder:
    """The storage index at each position of an epoch's bucketed order (see the module notes).

    Args:
        bucket_of: Each sample's bucket number (-1: none), as `Buckets.assign` gives them.
        buckets: How many buckets there are (numbers 0 to buckets - 1).
        batch_size: Samples per batch.
        seed: With ``epoch``, decides the order.
        epoch: With ``seed``, decides the order.
        ranks: Ranks the batches are dealt to.
        leftovers: ``"drop"`` or ``"carry"`` (see the module notes).

    Raises:
        ConfigurationError: A bucket number out of range, no full batch for all ranks, or another
            leftover policy.
    """

    def __init__(
        self, bucket_of: np.ndarray, buckets: int, *, batch_size: int, seed: int, epoch: int, ranks: int, leftovers: str = "drop"
    ) -> None:
        bucket_of = np.asarray(bucket_of)
        if batch_size < 1 or ranks < 1:
            raise ConfigurationError(f"batch size and ranks must be positive, got {batch_size} and {ranks}")
        check_leftovers(leftovers)
        self.policy = leftovers
        self.seed, self.epoch = seed, epoch
        if bucket_of.size and (int(bucket_of.max()) >= buckets or int(bucket_of.min()) < -1):
            raise ConfigurationError(f"bucket numbers must be from -1 to {buckets - 1}")
        self.num_samples = len(bucket_of)
        self.batch_size = batch_size
        self.ranks = ranks
        # Members of each bucket, sorted by bucket (a stable sort keeps storage order within).
        self._members = np.argsort(bucket_of, kind="stable").astype(np.int64)
        counts = np.bincount(bucket_of + 1, minlength=buckets + 1)
        self._unbucketed = int(counts[0])
        self.sizes = counts[1:]
        self._member_starts = np.concatenate([[self._unbucketed], self._unbucketed + np.cumsum(self.sizes)])[:-1]
        # Where this epoch starts in each bucket's stream of passes, and its full batches there.
        layout: tuple[np.ndarray, np.ndarray] = (
            self._carried_layout() if leftovers == "carry" else (epoch * self.sizes, self.sizes // batch_size)
        )
        self._stream_starts, self._full = layout
        self._batch_starts = np.concatenate([[0], np.cumsum(self._full)])
        total = int(self._batch_starts[-1])
        self.batches = total - total % ranks
        if self.batches == 0:
            raise ConfigurationError(
                f"no bucket holds a full batch of {batch_size} for each of {ranks} ranks (largest bucket: {int(self.sizes.max(initial=0))} samples)"
            )
        self.length = self.batches * batch_size
        self._batch_order = IndexPermutation(total, seed, epoch)
        self._shuffles: dict[tuple[int, int], IndexPermutation] = {}  # (bucket, pass)
        self._leftover_order: np.ndarray | None = None

    def _carried_layout(self) -> tuple[np.ndarray, np.ndarray]:
        """``"carry"``: each bucket's stream start this epoch and its full batches, epochs 0 to
        this one worked out in turn (each reads the full batches of what is left up to the end
        of its own pass, less the last batch of a few buckets to make a multiple of the ranks)."""
        start = np.zeros(len(self.sizes), dtype=np.int64)
        for epoch in range(self.epoch + 1):
            full = ((epoch + 1) * self.sizes - start) // self.batch_size
            surplus = int(full.sum()) % self.ranks
            if surplus:
                order = IndexPermutation(len(self.sizes), self.seed ^ _TRIM_STREAM, epoch)(np.arange(len(self.sizes), dtype=np.int64))
                while surplus:  # each chosen bucket's last batch waits; fewer than the ranks in all
                    for bucket in order[full[order] > 0][:surplus]:
                        full[bucket] -= 1
                        surplus -= 1
            if epoch < self.epoch:
                start += full * self.batch_size
        return start, full

    def carried(self) -> np.ndarray:
        """``"carry"``: the storage indices this epoch leaves for the next one to read first of
        their bucket (its first batches of that bucket, wherever the batch shuffle puts them)."""
        parts = []
        for number, size in enumerate(self.sizes.tolist()):
            first = int(self._stream_starts[number] + self._full[number] * self.batch_size)
            end = (self.epoch + 1) * size if self.policy == "carry" else first
            parts.append(self._in_bucket(np.full(end - first, number), np.arange(first, end, dtype=np.int64)))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def leftovers(self) -> np.ndarray:
        """Samples of each bucket this epoch leaves out (its last partial batch, and its share of
        the batches past the last multiple of the ranks), by bucket number: carried into the
        next epoch, or dropped, by the policy."""
        if self.policy == "carry":
            return (self.epoch + 1) * self.sizes - self._stream_starts - self._full * self.batch_size
        left = self.sizes - self._full * self.batch_size
        dropped_batches = self._batch_order(np.arange(self.batches, int(self._batch_starts[-1]), dtype=np.int64))
        for bucket in np.searchsorted(self._batch_starts, dropped_batches, side="right") - 1:
            left[bucket] += self.batch_size
        return left

    def bucket_of_batch(self, batches: np.ndarray) -> np.ndarray:
        """The bucket of each of ``batches`` (numbers in the epoch's dealing, ``position //
        (ranks * batch_size) * ranks + rank``)."""
        shuffled = self._batch_order(np.asarray(batches, dtype=np.int64))
        return (np.searchsorted(self._batch_starts, shuffled, side="right") - 1).astype(np.int64)

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The storage index at each of ``positions`` (in [0, num_samples))."""
        positions = np.asarray(positions, dtype=np.int64)
        result = np.empty(len(positions), dtype=np.int64)
        inside = positions < self.length
        if inside.any():
            result[inside] = self._batched(positions[inside])
        if not inside.all():
            result[~inside] = self._left_over(positions[~inside] - self.length)
        return result

    def _batched(self, positions: np.ndarray) -> np.ndarray:
        span = self.ranks * self.batch_size
        round_number, within = positions // span, positions % span
        batch = round_number * self.ranks + within % self.ranks
        slot = within // self.ranks
        shuffled = self._batch_order(batch)
        bucket = np.searchsorted(self._batch_starts, shuffled, side="right") - 1
        place = self._stream_starts[bucket] + (shuffled - self._batch_starts[bucket]) * self.batch_size + slot
        return self._in_bucket(bucket, place)

    def _in_bucket(self, bucket: np.ndarray, place: np.ndarray) -> np.ndarray:
        """The member at ``place`` of each ``bucket``'s stream of passes (pass j: its shuffle
        for j)."""
        result = np.empty(len(bucket), dtype=np.int64)
        for number in np.unique(bucket):
            chosen = bucket == number
            size = int(self.sizes[number])
            passes, offsets = np.divmod(place[chosen], size)
            found = np.empty(len(offsets), dtype=np.int64)
            for number_of_pass in np.unique(passes):
                in_pass = passes == number_of_pass
                key = (int(number), int(number_of_pass))
                shuffle = self._shuffles.get(key)
                if shuffle is None:
                    shuffle = self._shuffles[key] = IndexPermutation(size, self.seed ^ _BUCKET_STREAM ^ (key[0] << 32), key[1])
                found[in_pass] = shuffle(offsets[in_pass])
            result[chosen] = self._members[self._member_starts[number] + found]
        return result

    def _left_over(self, offsets: np.ndarray) -> np.ndarray:
        """The leftovers, after the epoch: computed once when first asked for (they are few)."""
        if self._leftover_order is None:
            used = np.zeros(self.num_samples, dtype=bool)
            for start in range(0, self.length, 1 << 20):
                used[self._batched(np.arange(start, min(self.length, start + (1 << 20)), dtype=np.int64))] = True
            self._leftover_order = np.flatnonzero(~used)
        return self._leftover_order[offsets]
