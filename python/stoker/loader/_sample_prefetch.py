"""The Loader's source for network storage: per-sample requests, out of order (the Cassandra
paper's incremental prefetch).

An `OutOfOrderPrefetcher` keeps ``Reads.fetch_concurrency`` batches of per-sample requests in
flight, ramping up from two (slow start; a later epoch starts at the depth the last one reached),
and fills each batch with whichever samples arrive first, so one slow request delays one sample,
not a batch. With the block shuffle, blocks are asked for ahead of their first sample; near the
end of an epoch, the next epoch's first samples are requested (`EpochWarmup`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from ..sampling import BlockLookahead, EpochPlan, EpochWarmup, OutOfOrderPrefetcher, Sampler
from ..storage import BlockStorage, Storage
from ._assembly import BatchAssembler, FetchedBatch
from ._capabilities import request_latencies
from ._options import Reads

__all__ = ["SamplePrefetch"]


class SamplePrefetch:
    """Per-sample prefetch for one Loader, across its epochs.

    Args:
        storage: Where the samples are (its async ``fetch_index``).
        sampler: The Loader's sampler.
        assembler: Turns each assembled batch into what the decode stage takes.
        batch_size: Samples per batch.
        reads: The Loader's read options (``fetch_concurrency`` resolved).
        in_order: Assemble batches in the sampler's order.
        warmup: Requests the next epoch's first samples early, or None.
    """

    def __init__(
        self,
        storage: Storage,
        sampler: Sampler,
        assembler: BatchAssembler,
        *,
        batch_size: int,
        reads: Reads,
        in_order: bool,
        warmup: EpochWarmup | None,
    ) -> None:
        self.storage, self.sampler, self.assembler = storage, sampler, assembler
        self.batch_size, self.reads, self.in_order, self.warmup = batch_size, reads, in_order, warmup
        self.prefetcher: OutOfOrderPrefetcher | None = None
        self._max_batches = reads.fetch_concurrency or 8

    @property
    def max_batches(self) -> int:
        """Batches of requests in flight at most (the live tuner moves it)."""
        return self._max_batches

    @max_batches.setter
    def max_batches(self, value: int) -> None:
        self._max_batches = value
        if self.prefetcher is not None:  # read at every batch it assembles
            self.prefetcher.max_batches = value

    def saturated(self) -> bool:
        """Whether the running epoch's requests reached the cap (its last batch saw it)."""
        history = self.prefetcher.in_flight_history if self.prefetcher is not None else []
        return bool(history) and history[-1] >= self._max_batches

    def source(self, plan: EpochPlan) -> Any:
        """The epoch's source over ``plan`` (whole batches only): each batch as the prefetcher
        assembled it, as the decode stage takes it."""
        # Requested by storage index (what fetch_index takes); key and padding ride along.
        samples = plan.requests(self.assembler.keys, on_slice=self._block_lookahead(plan))
        fetch = self.warmup.fetcher(self.sampler.epoch) if self.warmup is not None else self.storage.fetch_index
        self.prefetcher = OutOfOrderPrefetcher(
            fetch,
            samples,
            batch_size=self.batch_size,
            max_batches=self._max_batches,
            ramp_every=self.reads.ramp_every,
            in_order=self.in_order,
            stall_patience=self.reads.stall_patience,
            hedge=self.reads.hedge,
            # Slow start once per job: a later epoch starts at the depth the last one reached.
            # The first starts at two batches, so that out-of-order assembly fills the first
            # batch from the faster of 64 requests: with one connection in ten slow, nearly
            # every batch of 32 has a slow request, and the first would wait a whole patience.
            start_batches=self.prefetcher.ramp_level if self.prefetcher is not None else 2,
            on_all_requested=self._warm_next_epoch if self.warmup is not None else None,
            latencies=self.prefetcher.latencies if self.prefetcher is not None else request_latencies(self.storage),
        )
        return self._as_jobs(self.prefetcher)

    def _block_lookahead(self, indices: Any) -> Callable[[int], None] | None:
        """With the block shuffle, each block is asked of the storage half a window of samples
        before its first sample is due (see `BlockLookahead`); None for the other shuffles."""
        blocks = self.sampler.blocks
        if blocks is None or not isinstance(self.storage, BlockStorage):
            return None
        ahead = int(self.sampler.window * len(self.storage) / len(blocks) / 2)
        return BlockLookahead(indices, blocks, ahead, self.storage.prefetch_blocks).requested

    def _warm_next_epoch(self) -> None:
        """Request the next epoch's first batches (as many as are in flight now) while this
        epoch's last requests are out, so its first batch does not wait a round trip."""
        assert self.warmup is not None and self.prefetcher is not None
        count = self.prefetcher.ramp_level * self.batch_size
        self.warmup.start(self.sampler.epoch + 1, self.sampler.next_epoch_indices(count).tolist())

    async def _as_jobs(self, prefetcher: OutOfOrderPrefetcher) -> AsyncIterator[FetchedBatch]:
        number = 0
        async for fetched in prefetcher:
            yield self.assembler.from_prefetched(number, fetched)
            number += 1
