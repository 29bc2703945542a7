"""What the Loader reports: its stats (with bad samples, tuning moves and what reading network
storage took, priced), its live snapshot, its provenance ledger and its step count. A part of
the Loader: the Loader tells it when an epoch's pipeline starts and ends, and it keeps the
figures; it holds no reference back to the Loader."""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import Counter
from typing import Any

from .._bounded import shown_logger
from ..observe import LiveSnapshot, ProvenanceLedger, RunTotals
from ..ops.batch import allocate_batch
from ..pipeline import Pipeline, PipelineStats
from ..sampling import Sampler
from ..storage import RemoteStorage, Storage
from ..storage.policies import PRICE_TABLES, describe_traffic, epoch_traffic
from ._assembly import BatchAssembler
from ._failure_policy import BadSampleHandler
from ._options import Reads
from ._tuning import LoaderTuning
from .buckets import describe_buckets
from .state import Batching, Deliveries

__all__ = ["LoaderRecords"]

_logger = shown_logger("stoker.loader")


class LoaderRecords:
    """Stats, costs, the live snapshot and the provenance ledger of one Loader.

    Args:
        storage: The Loader's storage (its traffic, where each sample lives).
        sampler: Its sampler (rank, epoch).
        assembler: Its batch assembler (rows prepared for the ledger).
        deliveries: Its delivery bookkeeping (step, seeds; the ledger's writer once recording).
        policy: Its bad-sample handler (the counts by stage and action).
        tuning: Its live tuning, if any (the moves).
        reads: Its `Reads` (the price table).
        batching: Its `Batching` (what the ledger records to rebuild a batch).
        source: The path or URL it was given, for the ledger.
    """

    def __init__(
        self,
        storage: Storage,
        sampler: Sampler,
        assembler: BatchAssembler,
        deliveries: Deliveries,
        policy: BadSampleHandler,
        tuning: LoaderTuning | None,
        reads: Reads,
        batching: Batching,
        source: str | None,
    ) -> None:
        self.storage, self.sampler, self.assembler, self.deliveries = storage, sampler, assembler, deliveries
        self.policy, self.tuning, self.reads, self.batching, self.source = policy, tuning, reads, batching, source
        # The consumer's thread changes the four figures below as epochs and pipelines come and
        # go; `snapshot`, `stats` and `totals_now` read them from any thread (a metrics scrape, a
        # checkpoint thread). `_lock` keeps them whole together: an epoch's counts join `totals`
        # in the same turn as its pipeline stops being `running`, so no reader counts it twice.
        self._lock = threading.Lock()
        self.totals = RunTotals()  # the finished epochs' counts (for counters across epochs)
        self.running: Pipeline[Any] | None = None
        self.last_stats: PipelineStats | None = None
        self._traffic_start: dict[str, Any] | None = None

    def epoch_started(self, pipeline: Pipeline[Any]) -> None:
        """An epoch's pipeline was built: its stats are the running ones from now on."""
        traffic_start = self.storage.traffic_report() if isinstance(self.storage, RemoteStorage) else None
        with self._lock:
            self._traffic_start = traffic_start
            self.running = pipeline

    def pipeline_replaced(self, old: Pipeline[Any], new: Pipeline[Any]) -> None:
        """The epoch goes on in ``new`` (``old`` stopped): ``old``'s figures join the totals."""
        finished = old.stats()
        with self._lock:
            self.totals.add(finished)
            self.running = new

    def epoch_ended(self, pipeline: Pipeline[Any] | None) -> None:
        """The epoch's (stopped) pipeline ended: keep its stats, count them, log the traffic."""
        finished = pipeline.stats() if pipeline is not None else None
        with self._lock:
            if finished is not None:
                self.last_stats = finished
                self.totals.add(finished)
            self.running = None
        self.policy.log.summarize(self.sampler.epoch, self.sampler.delivered_count)
        traffic = self.epoch_traffic()
        if traffic:
            _logger.info("epoch %d from %s: %s", self.sampler.epoch, self.storage.describe(), describe_traffic(traffic))

    def totals_now(self) -> RunTotals:
        """A copy of the finished epochs' counts, taken whole (see `Loader.totals`)."""
        with self._lock:
            return self.totals.copy()

    def stats(self) -> PipelineStats | None:
        """See `Loader.stats`."""
        with self._lock:
            pipeline, last = self.running, self.last_stats
        stats = pipeline.stats() if pipeline is not None else last
        if stats is None:
            return None
        tuning = self.tuning.moves() if self.tuning is not None else []
        return dataclasses.replace(stats, sample_failures=self.policy.log.counts(), tuning=tuning, storage=self.epoch_traffic())

    def snapshot(self) -> LiveSnapshot:
        """See `Loader.snapshot`."""
        # The pipeline and the totals are taken in one turn of the lock: the pipeline's own stats
        # (read after, under the engine's lock) are then never in those totals too.
        with self._lock:
            pipeline, totals, last = self.running, self.totals.copy(), self.last_stats
        running = pipeline.stats() if pipeline is not None else None
        last = running if running is not None else last
        moves = Counter(move.knob for move in (self.tuning.moves() if self.tuning is not None else []))
        return LiveSnapshot(
            rank=self.sampler.rank,
            step=self.deliveries.step,
            totals=totals,
            running=running,
            stages=tuple(last.stages) if last is not None else (),
            bad_samples=self.policy.log.counts(),
            tuning_moves=dict(moves),
        )

    def epoch_traffic(self) -> dict[str, Any]:
        """What reading network storage took since the epoch began, priced (see `Reads.prices`)."""
        with self._lock:
            start = self._traffic_start
        if start is None or not isinstance(self.storage, RemoteStorage):
            return {}
        traffic = epoch_traffic(start, self.storage.traffic_report())
        prices = self.reads.prices
        if prices == "store":  # the store's own list prices; S3's where a store names none (Cassandra)
            prices = getattr(self.storage, "price_table", "aws-s3-standard")
        table = PRICE_TABLES[prices] if isinstance(prices, str) else prices
        if table is not None:
            traffic["cost"] = {"dollars": table.cost(traffic), "prices": table.name, "as_of": table.as_of}
        return traffic

    def record_provenance(self, directory: str | os.PathLike[str]) -> ProvenanceLedger:
        """See `Loader.record_provenance`."""
        batching = self.batching
        buckets = batching.sampling.buckets
        fixed = batching.transform is not None and buckets is None  # with buckets, each batch has its bucket's shape
        ledger = ProvenanceLedger(
            directory,
            rank=self.sampler.rank,
            storage=self.storage,
            metadata={
                "source": self.source,
                "transform": batching.describe_transform() if batching.transform is not None else None,
                # What one decoded sample is: replay checks the transform it rebuilds against it.
                "sample_shape": list(allocate_batch(batching.transform, 0).shape[1:]) if fixed else None,
                "buckets": describe_buckets(buckets) if buckets is not None else None,
                "decode": getattr(batching.decode, "__qualname__", None),
                "batch_size": batching.batch_size,
                "seed": batching.sampling.seed,
                "shuffle": batching.sampling.shuffle,
                "world_size": self.sampler.world_size,
            },
        )
        self.assembler.provenance = True
        deliveries, sampler = self.deliveries, self.sampler
        self.assembler.prepare_rows = lambda batch: ledger.prepare(epoch=sampler.epoch, batch=batch, seeds=deliveries.seeds(batch))
        deliveries.ledger = ledger
        return ledger
