"""One measured run of the Loader: throughput, CPU, memory, first batch, stats and diagnosis."""

from __future__ import annotations

import dataclasses
import resource
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..loader import FailurePolicy, Loader, Reads, Sampling, Shuffle, Throughput
from ..observe import CpuLimits, CpuWatch, DataWaitMeter, diagnose
from ..ops import ImageTransform
from ..storage import BlockStorage, Storage
from ..storage.policies import add_traffic
from ._memory import PeakMemory
from ._shuffle import shuffle_report

__all__ = ["LatencyStorage", "RunResult", "run_loader"]


class LatencyStorage(Storage):
    """Another storage with a fixed delay per read call, standing in for remote storage (one
    call reads a whole batch, as a remote backend requests a batch's samples at once)."""

    def __init__(self, inner: Storage, latency_seconds: float) -> None:
        super().__init__(max_concurrent_reads=inner.max_concurrent_reads)
        self.inner = inner
        self.latency_seconds = latency_seconds
        self._keys, self._labels, self.classes = inner.keys, inner.labels, inner.classes
        self.bytes_read = 0
        self._count_lock = threading.Lock()

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        time.sleep(self.latency_seconds)
        data = self.inner.try_read_indices(indices)
        with self._count_lock:
            self.bytes_read += sum(len(item) for item in data if isinstance(item, bytes))
        return data

    def describe(self) -> str:
        return f"{self.inner.describe()} + {self.latency_seconds * 1e3:.0f} ms per read"

    # The block shuffle sees the inner storage's blocks (none where it has none).
    def block_sizes(self) -> list[int] | None:
        return self.inner.block_sizes() if isinstance(self.inner, BlockStorage) else None

    def max_open_blocks(self) -> int | None:
        return self.inner.max_open_blocks() if isinstance(self.inner, BlockStorage) else None

    def stream_blocks(self) -> None:
        if isinstance(self.inner, BlockStorage):
            self.inner.stream_blocks()

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        if isinstance(self.inner, BlockStorage):
            self.inner.prefetch_blocks(blocks)


@dataclass
class RunResult:
    """What `run_loader` measured."""

    name: str
    images: int
    seconds: float
    images_per_second: float
    megabytes_per_second: float
    cpu_percent: float
    peak_rss_mb: float
    first_batch_seconds: float
    data_wait_fraction: float
    stats: dict[str, Any] = field(default_factory=dict)
    diagnosis: dict[str, Any] = field(default_factory=dict)
    shuffle: dict[str, Any] = field(default_factory=dict)
    """The shuffle's scheme and its mixing against a uniform one (`shuffle_report`)."""
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since the start, images delivered so far) at each batch, for plots over time."""
    bad_samples: list[dict[str, str]] = field(default_factory=list)
    """Each bad sample met: ``{"key", "stage", "reason", "action"}`` (the Loader's failures)."""
    storage: dict[str, Any] = field(default_factory=dict)
    """Network storage only: the run's requests by kind, bytes, cache bytes, retries and cost
    (`stoker.pipeline.PipelineStats.storage` over every epoch), with ``dollars_per_epoch``."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_loader(
    storage: Storage,
    *,
    batch_size: int = 32,
    transform: ImageTransform | None = None,
    fetch_concurrency: int | None = None,
    decode_concurrency: int | None = None,
    latency_seconds: float = 0.0,
    step_seconds: float = 0.0,
    duration: float = 20.0,
    progress: bool = True,
    name: str = "stoker.Loader",
    shuffle: Shuffle = "uniform",
    shuffle_window: int = 32,
) -> RunResult:
    """Run epochs of a Loader over ``storage`` for about ``duration`` seconds (at least one batch).

    ``step_seconds`` simulates a training step after every batch (sleeping, like a GPU step that
    leaves the CPU free); 0 measures the loader alone. ``shuffle`` and ``shuffle_window`` are the
    Loader's `Sampling`'s.
    """
    from tqdm import tqdm

    # Network storage is measured as it is (its own latency); local storage may get a delay.
    remote = storage.is_remote and latency_seconds == 0
    delayed = None if remote else LatencyStorage(storage, latency_seconds)
    source: Storage = delayed if delayed is not None else storage

    def bytes_read() -> int:
        return delayed.bytes_read if delayed is not None else storage.stats()["bytes"]

    transform = transform or ImageTransform(
        resize_shorter=256, center_crop=(224, 224), layout="CHW", dtype="float32", mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]
    )
    cores = CpuLimits.read().affinity
    loader = Loader(
        source,
        batch_size=batch_size,
        transform=transform,
        reads=Reads(fetch_concurrency=fetch_concurrency),
        throughput=Throughput(decode_concurrency=decode_concurrency, stats_interval=0.1),
        failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
        sampling=Sampling(shuffle=shuffle, shuffle_window=shuffle_window),
    )
    shuffle_facts = shuffle_report(storage, loader)
    usage_before = resource.getrusage(resource.RUSAGE_SELF)
    watch = CpuWatch().__enter__()  # what else held the CPU meanwhile, from the kernel's accounting
    peak = PeakMemory().__enter__()
    started = time.perf_counter()
    first_batch = None
    images = delivered_bytes = 0
    bar = tqdm(
        total=duration,
        unit="s",
        desc="stoker bench",
        disable=not progress,
        file=sys.stderr,
        mininterval=0.5,
        bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s",
    )
    epoch = 0
    stats = None
    # The diagnosis reads the longest epoch: the last one may be a few batches cut short by the
    # clock, whose stats would say nothing about the steady state.
    longest = None
    # One meter over every epoch: the loop's data wait over the whole run.
    meter = DataWaitMeter(loader, verbose=False)
    # One timeline over all epochs: each epoch's samples shifted to run time and running totals.
    timeline: list[dict[str, Any]] = []
    totals: list[int] | None = None
    busy_totals: list[float] | None = None
    wait_total = 0.0
    arrivals: list[tuple[float, int]] = []  # (seconds since start, images delivered so far)
    traffic: dict[str, Any] = {}  # network storage: what reading took, over every epoch
    while True:
        epoch_started = time.perf_counter() - started
        loader.set_epoch(epoch)
        for batch in meter:
            if first_batch is None:
                first_batch = time.perf_counter() - started
            images += len(batch)
            delivered_bytes += batch.data.nbytes
            arrivals.append((time.perf_counter() - started, images))
            if step_seconds:
                time.sleep(step_seconds)
            elapsed = time.perf_counter() - started
            bar.update(min(elapsed, duration) - bar.n)
            if elapsed >= duration:
                break
        stats = loader.stats()
        assert stats is not None
        if stats.storage:
            traffic = add_traffic(traffic, stats.storage)
        if longest is None or stats.elapsed_seconds > longest.elapsed_seconds:
            longest = stats
        base = totals or [0] * len(stats.stages)
        busy_base = busy_totals or [0.0] * len(stats.stages)
        for sample in stats.timeline:
            timeline.append(
                {
                    "time": epoch_started + sample["time"],
                    "items_out": [offset + count for offset, count in zip(base, sample["items_out"])],
                    "queue_length": sample["queue_length"],
                    "busy_seconds": [offset + busy for offset, busy in zip(busy_base, sample["busy_seconds"])],
                    "consumer_wait": wait_total + sample["consumer_wait"],
                }
            )
        totals = [offset + stage.items_out for offset, stage in zip(base, stats.stages)]
        if stats.timeline:
            busy_totals = timeline[-1]["busy_seconds"]
            wait_total = timeline[-1]["consumer_wait"]
        epoch += 1
        if time.perf_counter() - started >= duration:
            break
    bar.close()
    seconds = time.perf_counter() - started
    peak.__exit__(None, None, None)
    watch.__exit__(None, None, None)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_seconds = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
    cpu_fraction = cpu_seconds / (seconds * cores)
    assert stats is not None and longest is not None
    facts = {"bytes_read": bytes_read(), "bytes_delivered": delivered_bytes}
    # Bad samples are counted over the whole run, not the chosen epoch.
    longest = dataclasses.replace(longest, sample_failures=stats.sample_failures)
    verdict = diagnose(
        longest,
        cpu_fraction=cpu_fraction,
        cores=cores,
        meter=meter.report(),
        storage_facts=facts,
        training_step=step_seconds > 0,
        contention=watch.contention,
    )
    return RunResult(
        name=name,
        images=images,
        seconds=seconds,
        images_per_second=images / seconds,
        megabytes_per_second=facts["bytes_read"] / seconds / 1e6,
        cpu_percent=100 * cpu_seconds / seconds,
        peak_rss_mb=peak.megabytes,
        first_batch_seconds=first_batch or 0.0,
        data_wait_fraction=meter.report().wait_fraction,
        stats={**stats.as_dict(), "timeline": timeline},
        arrivals=thin(arrivals),
        diagnosis=verdict.as_dict(),
        shuffle=shuffle_facts,
        bad_samples=[
            {"key": failure.sample, "stage": failure.stage, "reason": failure.error, "action": failure.action}
            for failure in loader.failures
        ],
        storage={**traffic, "dollars_per_epoch": traffic["cost"]["dollars"] * len(storage) / max(images, 1)}
        if "cost" in traffic
        else traffic,
    )


def thin(arrivals: list[tuple[float, int]], points: int = 2000) -> list[tuple[float, int]]:
    """At most about ``points`` of ``arrivals`` (evenly spaced, the last kept), for run files."""
    if len(arrivals) <= points:
        return arrivals
    step = len(arrivals) / points
    kept = [arrivals[int(index * step)] for index in range(points)]
    return kept if kept[-1] == arrivals[-1] else [*kept, arrivals[-1]]
