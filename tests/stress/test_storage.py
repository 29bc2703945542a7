"""Storage read from many threads at once, switching between almost any two bytecodes: a remote
store's requests run on every loop that asks (a pipeline's, the storage's own), so what they share
must stay whole: every sample's bytes right, every counter exact, one fetch per file."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stoker.storage import MemoryStorage, MixedStorage, RemoteStorage
from stoker.storage.policies import HedgedCalls, WholeFiles
from stoker.storage.remote._object_formats import PeerObjects

pytestmark = pytest.mark.usefixtures("switch_often")

THREADS = 16


def run_threads(work: Callable[[int], None]) -> None:
    """``work(number)`` in `THREADS` threads at once; the first error any raised is raised here."""
    errors: list[BaseException] = []

    def guarded(number: int) -> None:
        try:
            work(number)
        except BaseException as error:  # carried to the test
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(number,)) for number in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a thread never ended"
    if errors:
        raise errors[0]


class EchoStorage(RemoteStorage):
    """A network store whose sample bytes are its key; each request lets another task run first."""

    def __init__(self, count: int) -> None:
        super().__init__(max_in_flight=8)
        self._keys = [f"sample-{index:05d}" for index in range(count)]
        self._labels = [None] * count

    async def _request(self, index: int) -> bytes:
        await asyncio.sleep(0)
        return self._keys[index].encode()

    def _classify(self, error: BaseException) -> Any:
        return "fatal"

    def sample_name(self, index: int) -> str:
        return self._keys[index]


def test_a_remote_store_read_from_many_loops_counts_every_request_and_byte() -> None:
    # Once: `requests` and `bytes_fetched` were `+=` in whatever loop's thread the request ran
    # on (each pipeline's scheduler, the storage's own loop), and updates were lost.
    count, rounds = 400, 2
    storage = EchoStorage(count)
    expected = [key.encode() for key in storage.keys]

    def read(number: int) -> None:
        order = list(range(count))
        random.Random(number).shuffle(order)
        for _ in range(rounds):
            if number % 2:  # blocking reads: on the storage's own loop
                for start in range(0, count, 50):
                    chunk = order[start : start + 50]
                    assert storage.read_indices(chunk) == [expected[index] for index in chunk]
            else:  # async reads on a loop of this thread's own, as a pipeline's scheduler makes them

                async def fetch_all() -> list[bytes]:
                    return list(await asyncio.gather(*(storage.fetch_index(index) for index in order)))

                assert asyncio.run(fetch_all()) == [expected[index] for index in order]

    try:
        run_threads(read)
        stats = storage.stats()
    finally:
        storage.close()
    total = THREADS * rounds * count
    assert (stats["requests"], stats["bytes"]) == (total, total * len(expected[0]))


def test_hedged_copies_from_many_loops_stay_within_the_budget_and_are_counted() -> None:
    # Once: the budget check and `copies += 1` were two steps, and `calls += 1` a read-modify-
    # write, run by every loop that fetches blocks: more copies went out than the budget allows,
    # and calls were lost from the count the budget is made of.
    spare, calls_each = 150, 60
    hedged = HedgedCalls(budget=0.0, spare=spare)
    hedged.patience = lambda: 0.0  # type: ignore[method-assign]  # every call asks for a copy at once
    copies_sent: list[int] = []  # list.append is whole by itself
    won_by_copy: list[int] = []

    async def make(copy: int) -> int:
        if copy:
            copies_sent.append(copy)
            await asyncio.sleep(0)
        else:  # the first copy outlasts the patience of 0 seconds
            await asyncio.sleep(0.001)
        return copy

    def call(number: int) -> None:
        async def calls() -> None:
            for _ in range(calls_each):
                if await hedged.call(make) == 1:
                    won_by_copy.append(1)

        asyncio.run(calls())

    run_threads(call)
    assert hedged.calls == THREADS * calls_each
    assert len(copies_sent) == hedged.copies == spare, (len(copies_sent), hedged.copies)
    assert hedged.copies_won == len(won_by_copy)


def test_whole_files_fetched_once_each_from_many_loops_and_counted(tmp_path: Path) -> None:
    # Once: `fetched += 1` ran without the lock when a fetch ended, on whichever loop's thread
    # fetched it, and counts were lost.
    files, size = 150, 64
    whole = WholeFiles(tmp_path, "http://127.0.0.1:1")
    fetches: list[str] = []

    def content(key: str) -> bytes:
        return (key.encode() * size)[:size]

    def fetch_of(key: str) -> Callable[[Path, int], Any]:
        async def fetch(target: Path, length: int) -> None:
            fetches.append(key)
            await asyncio.sleep(0)
            target.write_bytes(content(key))

        return fetch

    def read(number: int) -> None:
        keys = [f"file-{index:04d}" for index in range(files)]
        random.Random(number).shuffle(keys)

        async def read_all() -> None:
            for key in keys:
                meta = {"size": size, "e_tag": None, "last_modified": None}
                data = await whole.read(key, 8, 16, url=f"http://127.0.0.1:1/{key}", meta=meta, fetch=fetch_of(key))
                assert data == content(key)[8:24]

        asyncio.run(read_all())

    run_threads(read)
    assert sorted(fetches) == sorted(f"file-{index:04d}" for index in range(files)), "each file fetched once"
    assert whole.fetched == files


class _OwnLoop:
    """What `PeerObjects` uses of its storage: an event loop in a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.block_cache_bytes = 1 << 30

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        return self.loop

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def test_a_peer_datasets_compressed_files_are_fetched_once_whatever_loop_asks() -> None:
    # Once: `PeerObjects.raw` kept its tables (files held, files on their way) on the caller's
    # loop: two loops' threads updated them at once, and a file on its way on one loop was
    # awaited from another, which asyncio refuses ("attached to a different loop").
    files = 40
    storage = _OwnLoop()
    dataset = SimpleNamespace(fields=("data",), files=[SimpleNamespace(compression="zstd")] * files)
    peer = PeerObjects(storage, dataset, table=None)  # type: ignore[arg-type]
    fetched: list[int] = []

    async def fetch_raw(number: int) -> bytes:
        fetched.append(number)
        await asyncio.sleep(0.001)
        return b"%05d" % number * 100

    peer.fetch_raw = fetch_raw  # type: ignore[method-assign]

    def read(number: int) -> None:
        order: Sequence[int] = random.Random(number).sample(range(files), files)

        async def read_all() -> list[bytes | memoryview]:
            return list(await asyncio.gather(*(peer.raw(file) for file in order)))

        got = asyncio.run(read_all()) if number % 2 else asyncio.run_coroutine_threadsafe(read_all(), storage.loop).result(60)
        assert [bytes(data) for data in got] == [b"%05d" % file * 100 for file in order]

    try:
        run_threads(read)
    finally:
        storage.stop()
    assert sorted(fetched) == list(range(files)), "each file fetched once"
    assert peer._held_bytes == files * 500


def test_a_mixture_reweighted_while_read_gives_each_position_a_sample_of_one_draw() -> None:
    # Once: a read took a position's source and its index in that source in two steps, and a
    # `reweight` between them paired a new source with an index of another draw: a sample of
    # the wrong source, or an IndexError past the small source's end.
    small = MemoryStorage({f"s{index}": b"small-%d" % index for index in range(5)})
    large = MemoryStorage({f"l{index}": b"large-%d" % index for index in range(2000)})
    mixture = MixedStorage({"small": small, "large": large}, {"small": 1.0, "large": 1.0}, num_samples=2000, seed=7)
    allowed = {small.read(key) for key in small.keys} | {large.read(key) for key in large.keys}
    done = threading.Event()

    def work(number: int) -> None:
        if number == 0:  # the Loader's thread: the weights swing from one source to the other
            try:
                for turn in range(60):
                    mixture.reweight({"small": 1.0, "large": 1000.0} if turn % 2 else {"small": 1000.0, "large": 1.0}, [])
            finally:
                done.set()
            return
        generator = random.Random(number)
        while not done.is_set():
            positions = [generator.randrange(2000) for _ in range(64)]
            payloads = mixture.read_indices(positions)
            assert set(payloads) <= allowed
            for position in positions[:4]:
                label = mixture.labels[position]  # a pair read too: never an IndexError
                assert label is None

    run_threads(work)
