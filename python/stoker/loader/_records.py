"""What the Loader reports: its stats (with bad samples, tuning moves and what reading network
storage took, priced), its provenance ledger and its step count.

A part of `Loader` kept in its own file (the Loader inherits it); it relies on the Loader's fields
declared below.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..observe import LiveSnapshot, ProvenanceLedger, RunTotals
from ..ops.batch import allocate_batch, transform_description
from ..pipeline import Pipeline, PipelineStats
from ..sampling import Sampler
from ..storage import RemoteStorage, Storage
from ..storage.policies import PRICE_TABLES, epoch_traffic
from ._assembly import BatchAssembler
from ._deliveries import Deliveries
from ._failure_policy import BadSampleHandler
from ._options import Sampling

if TYPE_CHECKING:
    from ._tuning import LoaderTuning

__all__ = ["LoaderRecords"]


class LoaderRecords:
    """Stats, costs and the provenance ledger: a part of `Loader`."""

    storage: Storage
    sampler: Sampler
    options: dict[str, Any]
    batch_size: int
    transform: Any
    decode: Any
    _assembler: BatchAssembler
    _deliveries: Deliveries
    _pipeline: Pipeline[Any] | None
    _last_stats: PipelineStats | None
    _policy: BadSampleHandler
    _tuning: LoaderTuning | None
    _traffic_start: dict[str, Any] | None
    _source: str | None
    totals: RunTotals

    def stats(self) -> PipelineStats | None:
        """Per-stage stats of the running epoch, or of the last one, with the bad samples met so
        far by stage and action (``sample_failures``) and the live tuner's moves in all epochs
        (``tuning``)."""
        pipeline = self._pipeline
        stats = pipeline.stats() if pipeline is not None else self._last_stats
        if stats is None:
            return None
        tuning = list(self._tuning.decisions) if self._tuning is not None else []
        return dataclasses.replace(stats, sample_failures=self._policy.log.counts(), tuning=tuning, storage=self._epoch_traffic())

    def snapshot(self) -> LiveSnapshot:
        """The Loader's figures now, read-only: what the metrics endpoint, `stoker bench` and
        reports read (see `stoker.observe.LiveSnapshot`). Cheap enough for every scrape: the
        pipeline's stats and a few counters, nothing per sample."""
        running = self._pipeline.stats() if self._pipeline is not None else None
        last = running if running is not None else self._last_stats
        moves = Counter(move.knob for move in (self._tuning.decisions if self._tuning is not None else []))
        return LiveSnapshot(
            rank=self.sampler.rank,
            step=self.step,
            totals=self.totals.copy(),
            running=running,
            stages=tuple(last.stages) if last is not None else (),
            bad_samples=self._policy.log.counts(),
            tuning_moves=dict(moves),
        )

    def _epoch_traffic(self) -> dict[str, Any]:
        """What reading network storage took since the epoch began, priced (see `Reads.prices`)."""
        if self._traffic_start is None or not isinstance(self.storage, RemoteStorage):
            return {}
        traffic = epoch_traffic(self._traffic_start, self.storage.traffic_report())
        prices = self.options["reads"].prices
        table = PRICE_TABLES[prices] if isinstance(prices, str) else prices
        if table is not None:
            traffic["cost"] = {"dollars": table.cost(traffic), "prices": table.name, "as_of": table.as_of}
        return traffic

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
        options: Sampling = self.options["sampling"]
        ledger = ProvenanceLedger(
            directory,
            rank=self.sampler.rank,
            storage=self.storage,
            metadata={
                "source": self._source,
                "transform": transform_description(self.transform),
                # What one decoded sample is: replay checks the transform it rebuilds against it.
                "sample_shape": list(allocate_batch(self.transform, 0).shape[1:]) if self.transform is not None else None,
                "decode": getattr(self.decode, "__qualname__", None),
                "batch_size": self.batch_size,
                "seed": options.seed,
                "shuffle": options.shuffle,
                "world_size": self.sampler.world_size,
            },
        )
        self._assembler.provenance = True
        deliveries = self._deliveries
        self._assembler.prepare_rows = lambda batch: ledger.prepare(epoch=self.sampler.epoch, batch=batch, seeds=deliveries.seeds(batch))
        deliveries.ledger = ledger
        return ledger

    @property
    def step(self) -> int:
        """Batches this rank delivered since the run began (carried across resumes by the state)."""
        return self._deliveries.step

    def close(self) -> None:
        """Finish the provenance ledger, if any (the storage stays open: it is the caller's)."""
        self._deliveries.close()
