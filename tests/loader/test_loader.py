"""The Loader: exact resume (in flight, out of order, across world sizes), images, buffers, meter."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stoker import DataWaitMeter, Loader
from stoker.ingest import convert_storage
from stoker.loader import FailurePolicy, Reads, Sampling, Throughput
from stoker.ops import ImageTransform
from stoker.storage import FileStorage, MemoryStorage, TarShardStorage


class SlowStorage(MemoryStorage):
    """Reads of some keys stall, so batches complete out of order."""

    def _read_indices(self, indices):  # type: ignore[no-untyped-def]
        if any(int(self.keys[index][1:]) % 17 == 0 for index in indices):
            time.sleep(0.01)
        return super()._read_indices(indices)


class BlockedStorage(SlowStorage):
    """Samples in blocks of 17 (as a shard or row group would hold them): for shuffle="block"."""

    def block_sizes(self) -> list[int]:
        return [min(17, len(self) - start) for start in range(0, len(self), 17)]

    # The rest of the BlockStorage capability: no bound on blocks in memory, nothing to stream.
    def max_open_blocks(self) -> int | None:
        return None

    def stream_blocks(self) -> None:
        pass

    def prefetch_blocks(self, blocks):  # type: ignore[no-untyped-def]
        pass


def storage(count: int = 203, blocks: bool = False) -> MemoryStorage:
    return (BlockedStorage if blocks else SlowStorage)(
        {f"k{index}": index.to_bytes(4, "little") for index in range(count)}, {f"k{index}": index % 5 for index in range(count)}
    )


def test_one_epoch_delivers_every_sample_once_with_its_label() -> None:
    loader = Loader(storage(), batch_size=8, decode=lambda data: int.from_bytes(data, "little"))
    seen = Counter()
    for batch in loader:
        for key, value, label, valid in zip(batch.keys, batch.data, batch.labels, batch.valid):
            assert valid and int(key[1:]) == value and label == value % 5
            seen[value] += 1
    assert seen == Counter(range(203))


def test_out_of_order_delivery_happens_and_in_order_is_kept() -> None:
    out_of_order = [
        batch.index
        for batch in Loader(storage(), batch_size=4, throughput=Throughput(decode_concurrency=4), reads=Reads(fetch_concurrency=8))
    ]
    assert sorted(out_of_order) == list(range(len(out_of_order)))
    assert out_of_order != sorted(out_of_order), "a stalled read lets later batches overtake"
    in_order = [
        batch.index for batch in Loader(storage(), batch_size=4, sampling=Sampling(in_order=True), reads=Reads(fetch_concurrency=8))
    ]
    assert in_order == sorted(in_order)


@pytest.mark.parametrize("seed, shuffle", [(0, "uniform"), (1, "uniform"), (2, "uniform"), (0, "block"), (1, "block")])
def test_resume_at_random_points_out_of_order(seed: int, shuffle: bool | str) -> None:
    data = storage(blocks=shuffle == "block")
    generator = random.Random(seed)
    delivered: list[str] = []
    state = None
    for _ in range(4):
        loader = Loader(data, batch_size=6, sampling=Sampling(seed=9, shuffle=shuffle, shuffle_window=2), reads=Reads(fetch_concurrency=6))
        if state is not None:
            loader.load_state_dict(json.loads(json.dumps(state)))
        stop_after = generator.randint(1, 10)
        for count, batch in enumerate(loader, start=1):
            delivered.extend(batch.keys)
            if count == stop_after:
                break  # batches in flight are abandoned
        state = loader.state_dict()
    loader = Loader(data, batch_size=6, sampling=Sampling(seed=9, shuffle=shuffle, shuffle_window=2))
    loader.load_state_dict(state)
    for batch in loader:
        delivered.extend(batch.keys)
    assert Counter(delivered) == Counter(f"k{index}" for index in range(203))


@pytest.mark.parametrize("shuffle", ["uniform", "block"])
def test_elastic_resume_from_two_ranks_to_three(shuffle: bool | str) -> None:
    data = storage(211, blocks=shuffle == "block")
    delivered: list[str] = []
    states = []
    for rank, stop_after in ((0, 5), (1, 9)):
        loader = Loader(data, batch_size=5, sampling=Sampling(rank=rank, world_size=2, seed=4, shuffle=shuffle))
        for count, batch in enumerate(loader, start=1):
            delivered.extend(key for key, padding in zip(batch.keys, batch.padding) if not padding)
            if count == stop_after:
                break
        states.append(loader.state_dict())
    counts = []
    for rank in range(3):
        loader = Loader(data, batch_size=5, sampling=Sampling(rank=rank, world_size=3, seed=4, shuffle=shuffle))
        loader.load_state_dict(states)
        batches = list(loader)
        counts.append(sum(len(batch) for batch in batches))
        delivered.extend(key for batch in batches for key, padding in zip(batch.keys, batch.padding) if not padding)
    assert len(set(counts)) == 1, "the new ranks get equal counts"
    assert Counter(delivered) == Counter(f"k{index}" for index in range(211))


def test_images_from_shards_with_a_corrupt_sample(tmp_path: Path) -> None:
    from stoker_testbed.data.images import jpeg

    folder = tmp_path / "images"
    for index in range(20):
        (folder / f"c{index % 2}").mkdir(parents=True, exist_ok=True)
        data = jpeg(80, 60, seed=index) if index != 7 else b"\xff\xd8\xff broken"
        (folder / f"c{index % 2}" / f"{index:03d}.jpg").write_bytes(data)
    with FileStorage(folder) as source:
        convert_storage(source, tmp_path / "shards", progress=False, decode_check=False)  # a bad sample packed on purpose
    transform = ImageTransform(resize_shorter=40, center_crop=(32, 32), layout="CHW", dtype="float32", mean=[0.5] * 3, std=[0.25] * 3)
    loader = Loader(
        TarShardStorage(tmp_path / "shards"),
        batch_size=6,
        transform=transform,
        sampling=Sampling(seed=1),
        failure_policy=FailurePolicy(on_error="zero", max_bad_samples=1),
    )
    seen = {}
    for batch in loader:
        assert batch.data.shape[1:] == (3, 32, 32) and batch.data.dtype == np.float32
        for key, valid, label, image in zip(batch.keys, batch.valid, batch.labels, batch.data):
            seen[key] = valid
            assert label == int(key.split("/")[0][1])
            if not valid:
                assert not image.any()
    assert len(seen) == 20 and [key for key, valid in seen.items() if not valid] == ["c1/007"]
    assert [(failure.sample, failure.stage) for failure in loader.failures] == [("c1/007", "decode")]


def test_buffers_held_by_the_loop_are_never_overwritten(tmp_path: Path) -> None:
    from stoker_testbed.data.images import jpeg

    data = MemoryStorage({f"k{index}": jpeg(64, 48, seed=index) for index in range(40)})
    transform = ImageTransform(resize=(16, 16))
    held = []
    for batch in Loader(data, batch_size=4, transform=transform, sampling=Sampling(shuffle="none", in_order=True)):
        held.append((batch.data, batch.data.copy()))
    assert all(np.array_equal(kept, copy) for kept, copy in held)
    many = MemoryStorage({f"k{index}": jpeg(64, 48, seed=index % 40) for index in range(400)})
    loader = Loader(many, batch_size=4, transform=transform)
    for _batch in loader:
        pass  # nothing held: buffers are recycled, on free-threaded CPython too
    # 100 batches through no more buffers than the pool keeps: each came back when the loop let
    # go of its batch (a lease returned late, as one made by a decode thread would be on 3.14t,
    # makes the pool allocate again).
    assert loader._pool is not None and loader._pool.allocated <= loader._pool.capacity


def test_stopping_leaves_no_thread() -> None:
    loader = Loader(storage(), batch_size=4)
    for _ in loader:
        break
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("stoker-loader")]
    assert loader.stats() is not None


def test_data_wait_meter_verdicts() -> None:
    def slow_data():
        for item in range(12):
            time.sleep(0.02)
            yield item

    meter = DataWaitMeter(slow_data())
    for _ in meter:
        pass
    assert meter.report().steps == 12 and "data-bound" in meter.report().verdict
    meter = DataWaitMeter(range(12))
    for _ in meter:
        time.sleep(0.02)
    assert "compute-bound" in meter.report().verdict and meter.report().wait_fraction < 0.1


def test_mixture_proportions_determinism_and_resume() -> None:
    from stoker.storage import MixedStorage

    big = MemoryStorage({f"b{index}": b"b" for index in range(5000)})
    small = MemoryStorage({f"s{index}": b"s" for index in range(300)})

    def mixture() -> MixedStorage:
        return MixedStorage({"big": big, "small": small}, {"big": 0.7, "small": 0.3}, num_samples=4000, seed=5)

    mixed = mixture()
    assert mixed.source_counts(mixed.keys) == {"big": 2800, "small": 1200}
    assert len(set(mixed.keys)) == 4000, "repeats of the small source get distinct keys"
    assert list(mixed.keys) == list(mixture().keys)
    loader = Loader(mixed, batch_size=100, sampling=Sampling(seed=2))
    delivered = [key for batch in loader for key in batch.keys]
    # Every window of 1,000 consecutive samples holds 30% +- 5 standard deviations of small ones.
    sigma = (1000 * 0.3 * 0.7) ** 0.5
    for start in range(0, 4000, 1000):
        small_count = mixed.source_counts(delivered[start : start + 1000])["small"]
        assert abs(small_count - 300) < 5 * sigma, small_count
    # Resumable, and a new epoch draws other samples of the big source.
    first = Loader(mixture(), batch_size=100, sampling=Sampling(seed=2))
    part = []
    for count, batch in enumerate(first, start=1):
        part.extend(batch.keys)
        if count == 7:
            break
    second = Loader(mixture(), batch_size=100, sampling=Sampling(seed=2))
    second.load_state_dict(first.state_dict())
    part.extend(key for batch in second for key in batch.keys)
    assert Counter(part) == Counter(delivered)
    second.set_epoch(1)
    assert set(second.storage.keys) != set(mixed.keys)


def test_token_loader_resumes_exactly_with_the_packer_state(tmp_path: Path) -> None:
    from stoker import TokenLoader
    from stoker.storage import open_tokens

    generator = np.random.default_rng(3)
    documents = [np.arange(int(length), dtype=np.uint32) + index * 1000 for index, length in enumerate(generator.integers(0, 90, 300))]
    flat = np.concatenate(documents)
    flat.astype(np.uint32).tofile(tmp_path / "tokens.bin")
    np.save(tmp_path / "tokens.bin.offsets.npy", np.concatenate([[0], np.cumsum([len(document) for document in documents])]))
    source = open_tokens(tmp_path / "tokens.bin", dtype="uint32")

    def make() -> TokenLoader:
        return TokenLoader(source, context_length=128, batch_size=4, seed=5, read_ahead=37, strategy="best_fit", window=50)

    expected = [batch.input_ids.tolist() for batch in make()]
    rows: list = []
    loader = make()
    for count, batch in enumerate(loader, start=1):
        rows.append(batch.input_ids.tolist())
        if count == 3:
            break
    state = json.loads(json.dumps(loader.state_dict()))
    resumed = make()
    resumed.load_state_dict(state)
    rows.extend(batch.input_ids.tolist() for batch in resumed)
    assert rows == expected
    tokens = np.concatenate([np.array(batch)[np.array(batch) != 0] for batch in expected]) if expected else []
    assert sorted(tokens.tolist()) == sorted(flat[flat != 0].tolist()), "every token once"


def test_block_shuffle_needs_a_storage_with_blocks() -> None:
    with pytest.raises(ValueError, match="has no blocks to shuffle by"):
        Loader(storage(), batch_size=4, sampling=Sampling(shuffle="block"))
    with pytest.raises(ValueError, match='shuffle must be "uniform", "block" or "none"'):
        Loader(storage(blocks=True), batch_size=4, sampling=Sampling(shuffle="blocks"))


class LookaheadStorage(BlockedStorage):
    """Records, in one sequence, each block asked for ahead and each sample read."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.events: list[tuple[str, int]] = []
        self._events_lock = threading.Lock()

    def prefetch_blocks(self, blocks):  # type: ignore[no-untyped-def]
        with self._events_lock:
            self.events.extend(("ahead", int(block)) for block in blocks)

    async def fetch_index(self, index: int) -> bytes:
        with self._events_lock:
            self.events.append(("read", index // 17))
        return await super().fetch_index(index)


@pytest.mark.parametrize("window", [1, 3])
def test_the_block_shuffle_asks_for_each_block_before_its_first_sample(window: int) -> None:
    samples = {f"k{index}": index.to_bytes(4, "little") for index in range(203)}
    blocked = LookaheadStorage(samples, dict.fromkeys(samples, 0))
    loader = Loader(
        blocked,
        batch_size=4,
        sampling=Sampling(shuffle="block", shuffle_window=window, seed=4),
        reads=Reads(sample_prefetch=True, fetch_concurrency=1),
    )
    assert sum(len(batch.keys) for batch in loader) == len(samples)
    asked = [block for kind, block in blocked.events if kind == "ahead"]
    assert sorted(asked) == list(range(12)), "every block asked for ahead, once"
    first_read = {}
    for order, (kind, block) in enumerate(blocked.events):
        if kind == "read":
            first_read.setdefault(block, order)
    ahead = {block: order for order, (kind, block) in enumerate(blocked.events) if kind == "ahead"}
    assert all(ahead[block] < first_read[block] for block in first_read), "asked for before its first sample was read"
