"""What the Loader's threads record together, written from many threads switching between almost
any two bytecodes: the metrics endpoint's counters, the provenance ledger, the bad-sample log, the
batch buffers and the bytes-read count: none lost, every count exact."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from stoker import Loader
from stoker.device import BufferPool
from stoker.failures import Failure
from stoker.loader import FailurePolicy, Sampling
from stoker.loader._assembly import BatchAssembler
from stoker.loader._failure_policy import BadSampleHandler
from stoker.observe import ProvenanceLedger, read_ledger, serve_metrics
from stoker.sampling import BatchPlan, Sampler
from stoker.storage import MemoryStorage

pytestmark = pytest.mark.usefixtures("switch_often")

THREADS = 16


def together(work: Callable[[int], None], threads: int = THREADS) -> None:
    """``work(number)`` on ``threads`` threads started at once; raises what one raised."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(number: int) -> None:
        start.wait(30)
        try:
            work(number)
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors.append(error)

    running = [threading.Thread(target=run, args=(number,)) for number in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(60)
    if errors:
        raise errors[0]


def test_ledger_records_from_many_threads_are_all_there(tmp_path: Path) -> None:
    samples = {f"k{index:03d}": bytes([index]) for index in range(64)}
    ledger = ProvenanceLedger(tmp_path, rank=0, storage=MemoryStorage(samples), metadata={})
    each = 20

    def record(number: int) -> None:
        for turn in range(each):
            step = number * each + turn
            slots = np.arange(2)
            batch = SimpleNamespace(
                keys=[f"k{step % 64:03d}", f"k{(step + 1) % 64:03d}"],
                indices=np.array([step % 64, (step + 1) % 64]),
                index=step,
                lengths=np.ones(2),
                checksums=np.zeros(2),
                positions=slots + 2 * step,
                padding=np.zeros(2, bool),
                replaced=np.zeros(2, bool),
                valid=np.ones(2, bool),
            )
            ledger.record(step=step, epoch=0, batch=batch, seeds=[0, 0])

    together(record)
    ledger.close()
    steps = sorted(read_ledger(tmp_path).column("step").to_pylist())
    assert steps == sorted(step for step in range(THREADS * each) for _ in range(2))
    assert ledger.rows == 2 * THREADS * each


def test_bad_samples_logged_from_many_threads_are_all_counted() -> None:
    handler = BadSampleHandler(FailurePolicy(on_error="zero"))
    handler.start_epoch(10**6)
    each = 200

    def fail(number: int) -> None:
        for turn in range(each):
            handler.log.add(Failure(f"k{number}-{turn}", "decode", "broken", "zero-filled", epoch=0, position=turn))

    together(fail)
    assert handler.log.count == THREADS * each
    assert handler.log.counts() == {"decode: zero-filled": THREADS * each}
    assert len(handler.log.kept()) == THREADS * each


def test_batch_buffers_leased_and_returned_by_many_threads_are_counted_and_bounded() -> None:
    # Once: `allocated += 1` ran in every decode thread without a lock, and the room in the free
    # list was checked apart from the append that filled it. Under the GIL no bytecode boundary
    # falls inside either, so this fails only on a free-threaded build, where both can interleave.
    made = []
    made_lock = threading.Lock()

    def allocate() -> np.ndarray:
        with made_lock:
            made.append(None)
        return np.zeros(4, dtype=np.uint8)

    capacity = 4
    pool = BufferPool(allocate, capacity=capacity)
    too_many: list[int] = []

    def lease(_: int) -> None:
        for _ in range(1000):
            leased = pool.acquire()
            leased[:] = 1
            del leased  # the buffer goes back now (its lease's owner is collected)
            if pool.free > capacity:
                too_many.append(pool.free)

    together(lease)
    assert pool.allocated == len(made), f"{pool.allocated} counted, {len(made)} allocated"
    assert not too_many and pool.free <= capacity


def test_bytes_read_counted_by_many_fetch_threads_are_exact() -> None:
    # Once: the fetch threads added to the bytes and batches read without a lock ("a lost update
    # only blurs an estimate"), and the tuner divided one by the other read apart: 76,996 and
    # 292,502 of 832,000 bytes were lost in two runs of three.
    storage = MemoryStorage({f"k{index:03d}": bytes(index + 1) for index in range(64)})
    sampler = Sampler(64, shuffle=False)
    assembler = BatchAssembler(storage, sampler, transform=None, decode=None, extra=(), pool=None, policy=BadSampleHandler(FailurePolicy()))
    each = 400
    plans = [BatchPlan(np.arange(start, start + 4), np.arange(start, start + 4), np.zeros(4, bool)) for start in range(0, 64, 4)]

    def fetch(number: int) -> None:
        for turn in range(each):
            assembler.fetch((turn, plans[(number + turn) % len(plans)]))

    together(fetch)
    batches = THREADS * each
    expected = sum(
        sum(int(plan.indices[slot]) + 1 for slot in range(4))
        for plan in (plans[(n + t) % len(plans)] for n in range(THREADS) for t in range(each))
    )
    assert (assembler.batches_fetched, assembler.bytes_fetched) == (batches, expected)
    assert assembler.fetched_batch_bytes() == expected / batches


def test_metrics_scraped_by_many_threads_while_the_loop_runs_only_grow_and_end_exact() -> None:
    pytest.importorskip("prometheus_client")
    samples = {f"k{index:03d}": index.to_bytes(4, "little") for index in range(64)}
    loader = Loader(MemoryStorage(samples), batch_size=4, decode=bytes, sampling=Sampling(seed=3))
    epochs, batches = 3, 16
    stop = threading.Event()
    problems: list[str] = []

    def delivered(url: str) -> float:
        for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
            if line.startswith("stoker_batches_delivered_total"):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError("no stoker_batches_delivered_total on the page")

    with serve_metrics(loader, port=0) as server:

        def scrape(_: int) -> None:
            last = 0.0
            while not stop.is_set():
                now = delivered(server.url)
                step = loader.step
                # The pipeline counts a batch taken just before the Loader records it: one ahead at most.
                if now < last or now > step + 1:
                    problems.append(f"{now} batches shown after {last}, with {step} delivered")
                last = now

        failed: list[BaseException] = []

        def scrapers() -> None:
            try:
                together(scrape, 4)
            except BaseException as error:  # noqa: BLE001 - handed to the test's thread
                failed.append(error)

        scraping = threading.Thread(target=scrapers)
        scraping.start()
        try:
            for _ in range(epochs):
                for _ in loader:
                    pass
        finally:
            stop.set()
            scraping.join(60)
        assert not failed, failed
        assert delivered(server.url) == epochs * batches
    assert not problems, problems[:5]


def test_each_bucket_gets_one_buffer_pool_whichever_decode_threads_ask_first() -> None:
    # Once: a bucket's pool was looked up and made in two steps, so decode threads asking for a
    # new bucket at once each made one, and all but the last were lost with their buffers.
    from stoker.loader.buckets import BucketShapes
    from stoker.ops import ImageTransform
    from stoker.sampling import Buckets

    buckets = Buckets([(8, 8), (8, 16), (16, 8)], crop="center")
    transform = ImageTransform(resize_shorter=8, center_crop=(8, 8))
    bucket_of = np.arange(3, dtype=np.int64)
    seen: list[tuple[int, BufferPool]] = []  # the pools kept alive, so no two share an id

    for _ in range(100):  # a fresh set of buckets each round: each pool made by a race
        shapes = BucketShapes(buckets, transform, bucket_of, batch_size=2, capacity=4, pin_memory=False)

        def ask(number: int, shapes: BucketShapes = shapes) -> None:
            _, pool = shapes.for_batch(np.array([number % 3]))
            seen.append((number % 3, pool))

        seen.clear()
        together(ask)
        pools: dict[int, set[int]] = {}
        for bucket, pool in seen:
            pools.setdefault(bucket, set()).add(id(pool))
        assert all(len(made) == 1 for made in pools.values()), {bucket: len(made) for bucket, made in pools.items()}
