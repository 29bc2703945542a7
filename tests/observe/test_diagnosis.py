"""The diagnosis names the right stage when each stage in turn is made the bottleneck."""

from __future__ import annotations

import hashlib
import time

from stoker.bench import LatencyStorage, run_loader
from stoker.loader import Loader
from stoker.observe import DataWaitMeter, diagnose
from stoker.storage import MemoryStorage

PAYLOAD = bytes(4 << 20)


def _storage(count: int = 160) -> MemoryStorage:
    return MemoryStorage({f"k{index}": b"x" * 100 for index in range(count)})


def _run(storage, *, decode, fetch_concurrency: int = 4, decode_concurrency: int = 2, step: float = 0.0):  # type: ignore[no-untyped-def]
    import os
    import resource

    loader = Loader(storage, batch_size=8, decode=decode, fetch_concurrency=fetch_concurrency, decode_concurrency=decode_concurrency)
    meter = DataWaitMeter(loader)
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    for _ in meter:
        if step:
            time.sleep(step)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    cores = len(os.sched_getaffinity(0))
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / (seconds * cores)
    return diagnose(loader.stats(), cpu_fraction=cpu, cores=cores, meter=meter.report())


def test_slow_storage_is_a_latency_bound_fetch() -> None:
    verdict = _run(LatencyStorage(_storage(), 0.05), decode=lambda data: data, fetch_concurrency=2)
    assert (verdict.bottleneck, verdict.kind) == ("fetch", "latency")
    assert "raise fetch concurrency" in verdict.message


def test_cpu_heavy_decode_is_cpu_bound() -> None:
    def heavy(data: bytes) -> bytes:
        for _ in range(3):
            hashlib.sha256(PAYLOAD).digest()  # GIL released: real parallel CPU work
        return data

    verdict = _run(_storage(96), decode=heavy)
    assert (verdict.bottleneck, verdict.kind) == ("decode", "cpu"), verdict.message
    assert "More concurrency will not help" in verdict.message


def test_waiting_decode_is_latency_bound() -> None:
    def waiting(data: bytes) -> bytes:
        time.sleep(0.01)  # e.g. a remote decode service: slots busy, CPU idle
        return data

    verdict = _run(_storage(), decode=waiting)
    assert (verdict.bottleneck, verdict.kind) == ("decode", "latency"), verdict.message


def test_slow_training_step_is_compute_bound() -> None:
    verdict = _run(_storage(), decode=lambda data: data, step=0.02)
    assert (verdict.bottleneck, verdict.kind) == ("training loop", "compute"), verdict.message


def test_run_loader_reports_storage_facts() -> None:
    from stoker.bench import image_folder
    from stoker.storage import FileStorage

    result = run_loader(FileStorage(image_folder(64)), duration=1.0, progress=False)
    assert result.images >= 32 and result.first_batch_seconds > 0
    assert result.diagnosis["facts"]["bytes_read"] > 0
    assert result.stats["timeline"], "the timeline spans the run"


def test_bad_samples_reach_the_diagnosis() -> None:
    from tests.images import jpeg

    samples = {f"k{index}": jpeg(40, 30, seed=index) for index in range(40)}
    samples["k7"] = b"not an image"
    result = run_loader(MemoryStorage(samples), duration=0.5, progress=False)
    assert result.diagnosis["facts"]["sample_failures"] == {"decode: replaced": result.stats["sample_failures"]["decode: replaced"]}
    assert "Bad samples:" in result.diagnosis["message"] and "loader.failures" in result.diagnosis["message"]
