"""Out-of-order incremental prefetch: nothing lost, stalls bypassed, slow start as specified."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from stoker.sampling import OutOfOrderPrefetcher


def _samples(count: int) -> list[tuple[int, str, int]]:
    return [(position, f"key{position}", position % 10) for position in range(count)]


def _collect(prefetcher: OutOfOrderPrefetcher) -> list[list]:
    async def run() -> list[list]:
        return [batch async for batch in prefetcher]

    return asyncio.run(run())


@pytest.mark.parametrize("in_order", [False, True])
def test_every_sample_exactly_once_with_its_label(in_order: bool) -> None:
    generator = random.Random(1)

    async def fetch(key: str) -> bytes:
        await asyncio.sleep(generator.expovariate(1000))  # heavy-ish tail of delays
        return key.encode()

    prefetcher = OutOfOrderPrefetcher(fetch, _samples(203), batch_size=8, max_batches=4, in_order=in_order)
    batches = _collect(prefetcher)
    samples = [sample for batch in batches for sample in batch]
    assert Counter(sample.position for sample in samples) == Counter(range(203))
    assert all(sample.data == sample.key.encode() and sample.label == sample.position % 10 for sample in samples)
    assert sorted(prefetcher.delivered) == list(range(203))
    if in_order:
        assert [sample.position for sample in samples] == list(range(203))


def test_a_stalled_request_does_not_hold_back_out_of_order_batches() -> None:
    release = asyncio.Event()

    async def run() -> tuple[list[int], bool]:
        async def fetch(key: str) -> bytes:
            if key == "key50":
                await release.wait()  # one connection stalls
            else:
                await asyncio.sleep(0.001)
            return key.encode()

        prefetcher = OutOfOrderPrefetcher(fetch, _samples(160), batch_size=8, max_batches=8, ramp_every=1)
        completed_while_stalled = []
        async for batch in prefetcher:
            if not release.is_set():
                completed_while_stalled.append(len(batch))
                if len(completed_while_stalled) == 15:
                    release.set()  # 15 batches came through with key50 still stalled
        return completed_while_stalled, 50 in prefetcher.delivered

    completed, delivered_later = asyncio.run(run())
    assert len(completed) == 15 and all(size == 8 for size in completed)
    assert delivered_later


def test_slow_start_requests_one_extra_batch_every_m_consumed() -> None:
    async def fetch(key: str) -> bytes:
        await asyncio.sleep(0)
        return b""

    # Patience far beyond any hiccup of a shared machine: no stall help changes the ramp.
    prefetcher = OutOfOrderPrefetcher(fetch, _samples(8 * 40), batch_size=8, max_batches=5, ramp_every=4, stall_patience=60)
    _collect(prefetcher)
    history = prefetcher.in_flight_history
    # In flight after each consumed batch: 1 until 4 are consumed, then 2, 3 after 8, ... capped at 5.
    expected = [min(5, 1 + consumed // 4) for consumed in range(1, 41)]
    remaining = [40 - consumed for consumed in range(1, 41)]
    assert history == [min(value, left) for value, left in zip(expected, remaining)]


def test_failed_samples_are_delivered_as_failures() -> None:
    async def fetch(key: str) -> bytes:
        if key == "key3":
            raise ConnectionError("reset by peer")
        return b"ok"

    batches = _collect(OutOfOrderPrefetcher(fetch, _samples(10), batch_size=4))
    failed = [sample for batch in batches for sample in batch if sample.error is not None]
    assert [sample.key for sample in failed] == ["key3"] and failed[0].data is None
    assert "reset by peer" in str(failed[0].error)


def test_a_stall_in_the_first_batch_does_not_stop_slow_start() -> None:
    """Slow start has one batch in flight: a stalled sample in it must not stall the epoch."""
    release = asyncio.Event()

    async def run() -> tuple[int, OutOfOrderPrefetcher]:
        async def fetch(key: str) -> bytes:
            if key == "key0":
                await release.wait()
            return key.encode()

        prefetcher = OutOfOrderPrefetcher(fetch, _samples(80), batch_size=8, max_batches=4, stall_patience=0.05)
        batches_while_stalled = 0
        async for _ in prefetcher:
            if not release.is_set():
                batches_while_stalled += 1
                if batches_while_stalled == 5:
                    release.set()
        return batches_while_stalled, prefetcher

    batches_while_stalled, prefetcher = asyncio.run(run())
    assert batches_while_stalled == 5
    assert prefetcher.stall_escapes >= 1
    assert sorted(prefetcher.delivered) == list(range(80))


@pytest.mark.parametrize("in_order", [False, True])
def test_stalled_requests_at_the_end_of_the_epoch_are_hedged(in_order: bool) -> None:
    """Nothing is left to request at the end of an epoch: a stalled request is sent again, the
    copy that answers first is delivered, and the sample comes once."""
    calls = Counter()

    async def run() -> OutOfOrderPrefetcher:
        async def fetch(key: str) -> bytes:
            calls[key] += 1
            if key == "key38" and calls[key] == 1:
                await asyncio.sleep(3600)  # this copy never answers
            await asyncio.sleep(0.001)
            return key.encode()

        prefetcher = OutOfOrderPrefetcher(fetch, _samples(40), batch_size=8, max_batches=2, in_order=in_order, stall_patience=0.02)
        positions = [sample.position for batch in [batch async for batch in prefetcher] for sample in batch]
        assert Counter(positions) == Counter(range(40))
        return prefetcher

    prefetcher = asyncio.run(run())
    assert calls["key38"] == 2 and prefetcher.hedged >= 1


@pytest.mark.parametrize("known", [True, False])
def test_the_first_patience_comes_from_the_stores_known_latency(known: bool) -> None:
    """Given the store's request times (from opening it, or an earlier epoch), the first batch
    gets help after twice those, not after the one-second guess made when nothing is known."""

    async def run() -> list[list]:
        async def fetch(key: str) -> bytes:
            if key == "key0":
                await asyncio.sleep(0.6)  # a request on a slow connection
            return key.encode()

        latencies = [0.01] * 10 if known else []
        prefetcher = OutOfOrderPrefetcher(fetch, _samples(64), batch_size=8, max_batches=4, stall_patience=0.05, latencies=latencies)
        return [batch async for batch in prefetcher]

    batches = asyncio.run(run())
    first_keys = {sample.key for sample in batches[0]}
    assert ("key0" not in first_keys) == known, "known latency: the first batch is filled without the slow sample"
    assert sorted(sample.position for batch in batches for sample in batch) == list(range(64))


def test_batches_waited_for_ramp_up_faster_than_every_m_consumed() -> None:
    """Where every request takes a round trip the consumer must wait for, each waited-for batch
    adds one in flight at once: the depth that hides the latency is reached in a few batches,
    not after ramp_every times as many."""

    async def fetch(key: str) -> bytes:
        await asyncio.sleep(0.1)  # a 100 ms round trip; the consumer takes no time
        return b""

    prefetcher = OutOfOrderPrefetcher(fetch, _samples(8 * 20), batch_size=8, max_batches=6, ramp_every=4, stall_patience=0.05)
    _collect(prefetcher)
    history = prefetcher.in_flight_history
    assert max(history[:4]) >= 4, f"the paper's ramp alone would still be at 1-2 in flight: {history[:4]}"
    assert sorted(prefetcher.delivered) == list(range(160))
