"""The Loader with buckets: images of many aspect ratios, every batch one bucket's shape holding
samples of that bucket, equal steps on every rank, no sample twice, leftovers counted, an exact
resume mid-epoch, and the options buckets cannot work with refused by name."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.errors import ConfigurationError, ProvenanceError
from stoker.loader import Reads, Sampling, replay
from stoker.ops import ImageTransform, image_sizes
from stoker.sampling import Buckets
from stoker.storage import MemoryStorage
from stoker_testbed.data.images import jpeg

SIZES = [(96, 64), (64, 96), (128, 48), (48, 128), (80, 80), (120, 60)]
BUCKETS = Buckets([(48, 64), (64, 48), (32, 96), (96, 32), (56, 56)], crop="random")


def images(count: int = 240) -> MemoryStorage:
    """JPEGs of six aspect ratios, in storage order by ratio (so a plain shuffle mixes them)."""
    samples = {}
    for index in range(count):
        width, height = SIZES[index * len(SIZES) // count]
        samples[f"{index:05d}.jpg"] = jpeg(width, height, seed=index, quality=80)
    return MemoryStorage(samples)


def _expected_bucket(storage: MemoryStorage) -> dict[str, int]:
    sizes = image_sizes(storage.read_many(storage.keys))
    return dict(zip(storage.keys, BUCKETS.assign(sizes.widths, sizes.heights).tolist()))


def test_every_batch_is_one_buckets_shape_and_holds_that_buckets_samples() -> None:
    storage = images()
    expected = _expected_bucket(storage)
    loader = Loader(storage, batch_size=8, transform=ImageTransform(layout="CHW"), sampling=Sampling(seed=1, buckets=BUCKETS))
    seen: Counter[str] = Counter()
    shapes = Counter[tuple[int, ...]]()
    for batch in loader:
        buckets = {expected[key] for key in batch.keys}
        assert len(buckets) == 1, f"a batch mixes buckets {buckets}"
        assert batch.data.shape == (8, 3, *BUCKETS.shapes[buckets.pop()])
        assert batch.valid.all()
        seen.update(batch.keys)
        shapes[batch.data.shape[2:]] += 1
    counts = loader.bucket_counts()
    assert counts is not None
    assert max(seen.values()) == 1 and sum(seen.values()) == counts["batches"] * 8
    assert sum(seen.values()) + sum(counts["left_over"]) + counts["without_bucket"] == len(storage)
    assert len(shapes) >= 4, "the batches take the buckets' shapes"
    assert abs(counts["same_bucket_next"] - counts["same_bucket_expected"]) < 0.2, "batches of the buckets are mixed, not run in order"
    loader.close()


def test_three_ranks_take_equal_steps_and_together_read_each_sample_once() -> None:
    storage = images(300)
    steps, seen = [], Counter[str]()
    for rank in range(3):
        loader = Loader(
            storage, batch_size=6, transform=ImageTransform(), sampling=Sampling(seed=2, rank=rank, world_size=3, buckets=BUCKETS)
        )
        batches = list(loader)
        steps.append(len(batches))
        seen.update(key for batch in batches for key in batch.keys)
        loader.close()
    assert len(set(steps)) == 1 and steps[0] > 0, f"steps per rank: {steps}"
    assert max(seen.values()) == 1


def test_a_resume_mid_epoch_delivers_the_same_batches_as_the_uninterrupted_run() -> None:
    storage = images()
    options = {"batch_size": 8, "transform": ImageTransform(), "sampling": Sampling(seed=5, in_order=True, buckets=BUCKETS)}
    whole = Loader(storage, **options)  # type: ignore[arg-type]
    reference = [(list(batch.keys), batch.data.copy()) for batch in whole]
    whole.close()
    first = Loader(storage, **options)  # type: ignore[arg-type]
    iterator = iter(first)
    for _ in range(4):
        next(iterator)
    state = first.state_dict()
    first.close()
    resumed = Loader(storage, **options)  # type: ignore[arg-type]
    resumed.load_state_dict(state)
    rest = [(list(batch.keys), batch.data.copy()) for batch in resumed]
    resumed.close()
    assert [keys for keys, _ in rest] == [keys for keys, _ in reference[4:]]
    assert all(np.array_equal(ours, theirs) for (_, ours), (_, theirs) in zip(rest, reference[4:])), "the same crops, pixel for pixel"


def test_a_sample_whose_size_cannot_be_read_is_named_and_never_delivered(caplog: pytest.LogCaptureFixture) -> None:
    samples = {key: images(48).read_many([key])[0] for key in images(48).keys}
    samples["broken.jpg"] = b"not an image at all"
    with caplog.at_level(logging.WARNING, logger="stoker.loader"):
        loader = Loader(MemoryStorage(samples), batch_size=4, transform=ImageTransform(), sampling=Sampling(buckets=BUCKETS))
    assert "broken.jpg" in caplog.text and "no bucket" in caplog.text
    delivered = [key for batch in loader for key in batch.keys]
    counts = loader.bucket_counts()
    loader.close()
    assert "broken.jpg" not in delivered and counts is not None and counts["without_bucket"] == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"transform": ImageTransform(center_crop=32)}, "drop center_crop"),
        ({"transform": None, "decode": bytes}, "give an ImageTransform"),
        ({"sampling": Sampling(shuffle="none", buckets=BUCKETS)}, "shuffle='uniform'"),
        ({"reads": Reads(sample_prefetch=True)}, "read each batch whole"),
    ],
)
def test_options_buckets_cannot_work_with_are_refused(options: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"batch_size": 4, "transform": ImageTransform(), "sampling": Sampling(buckets=BUCKETS), **options}
    with pytest.raises(ConfigurationError, match=message):
        Loader(images(48), **arguments)  # type: ignore[arg-type]


def test_every_bucketed_batch_is_rebuilt_from_the_ledger_bit_for_bit(tmp_path: Path) -> None:
    storage = images(96)
    loader = Loader(storage, batch_size=4, transform=ImageTransform(layout="CHW"), sampling=Sampling(seed=1, buckets=BUCKETS))
    loader.record_provenance(tmp_path / "ledger")
    delivered = [(list(batch.keys), batch.data.copy()) for batch in loader]
    loader.close()
    assert len({data.shape for _, data in delivered}) > 1, "several buckets' shapes"
    for step, (keys, data) in enumerate(delivered):
        again = replay(tmp_path / "ledger", step, storage=storage)
        assert again.keys == keys
        assert np.array_equal(again.data, data), f"step {step}: the same bucket's shape and the same random crops"


def _tables(tmp_path: Path, kind: str = "parquet", *, wrong: bool = False) -> Path:
    """The images as a Parquet file or a Lance dataset (``kind``) with width and height columns
    (each image's own, or with ``wrong`` the sizes turned on their side: another bucket)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    storage = images(96)
    payloads = storage.read_many(storage.keys)
    sizes = image_sizes(payloads)
    widths, heights = (sizes.heights, sizes.widths) if wrong else (sizes.widths, sizes.heights)
    table = pa.table({"image": payloads, "width": widths.astype(np.int32), "height": heights.astype(np.float64), "label": [0] * 96})
    if kind == "lance":
        lance = pytest.importorskip("lance")  # no free-threaded wheel: 3.14t runs the Parquet case
        lance.write_dataset(table, str(tmp_path / "images.lance"), max_rows_per_file=40)
        return tmp_path / "images.lance"
    pq.write_table(table, tmp_path / "images.parquet", row_group_size=32)
    return tmp_path / "images.parquet"


@pytest.mark.parametrize("kind", ["parquet", "lance"])
def test_sizes_from_a_tables_columns_give_the_buckets_the_headers_give(kind: str, tmp_path: Path) -> None:
    from stoker.storage import open_storage

    storage = open_storage(_tables(tmp_path, kind))
    by_headers = Loader(storage, batch_size=4, transform=ImageTransform(), sampling=Sampling(seed=3, in_order=True, buckets=BUCKETS))
    expected = [(list(batch.keys), batch.data.shape) for batch in by_headers]
    by_headers.close()
    columns = Buckets(BUCKETS.shapes, crop=BUCKETS.crop, columns=("width", "height"))
    by_columns = Loader(storage, batch_size=4, transform=ImageTransform(), sampling=Sampling(seed=3, in_order=True, buckets=columns))
    assert [(list(batch.keys), batch.data.shape) for batch in by_columns] == expected
    by_columns.close()
    storage.close()


def test_columns_that_disagree_with_the_files_are_refused_naming_the_samples(tmp_path: Path) -> None:
    from stoker.storage import open_storage

    storage = open_storage(_tables(tmp_path, wrong=True))
    columns = Buckets(BUCKETS.shapes, columns=("width", "height"))
    with pytest.raises(ConfigurationError, match=r"another bucket than their files' headers do \(first: images.parquet#"):
        Loader(storage, batch_size=4, transform=ImageTransform(), sampling=Sampling(buckets=columns))
    with pytest.raises(ConfigurationError, match="no columns to read"):
        Loader(images(48), batch_size=4, transform=ImageTransform(), sampling=Sampling(buckets=columns))
    with pytest.raises(Exception, match="no column 'w'"):
        Loader(storage, batch_size=4, transform=ImageTransform(), sampling=Sampling(buckets=Buckets(BUCKETS.shapes, columns=("w", "h"))))
    storage.close()


def test_with_carried_leftovers_what_one_epoch_leaves_the_next_reads() -> None:
    storage = images(150)
    carry = Buckets(BUCKETS.shapes, crop=BUCKETS.crop, leftovers="carry")
    loader = Loader(storage, batch_size=8, transform=ImageTransform(), sampling=Sampling(seed=4, buckets=carry))
    first = {key for batch in loader for key in batch.keys}
    counts = loader.bucket_counts()
    assert counts is not None and counts["leftovers"] == "carry" and sum(counts["left_over"]) > 0
    loader.set_epoch(1)
    second = {key for batch in loader for key in batch.keys}
    loader.close()
    left = set(storage.keys) - first
    assert len(left) == sum(counts["left_over"]) + counts["without_bucket"]
    assert left <= second, "every sample the first epoch left is read in the second"


@pytest.mark.parametrize("leftovers", ["drop", "carry"])
@pytest.mark.parametrize("world", [1, 3])
def test_verify_epoch_proves_a_bucketed_epoch_and_counts_its_leftovers_apart(leftovers: str, world: int) -> None:
    storage = images(150)
    buckets = Buckets(BUCKETS.shapes, crop=BUCKETS.crop, leftovers=leftovers)
    loaders = [
        Loader(storage, batch_size=6, transform=ImageTransform(), sampling=Sampling(seed=3, rank=rank, world_size=world, buckets=buckets))
        for rank in range(world)
    ]
    for epoch in range(2):  # with "carry", the second epoch's full batches differ from the first's
        delivered = sum(len(batch.keys) for loader in loaders for batch in loader)
        states = [loader.state_dict() for loader in loaders]
        proof = loaders[0].verify_epoch(states)
        assert proof["epoch"] == epoch and proof["delivered"] == proof["samples"] == delivered
        assert proof["samples"] + proof["left_over"] == len(storage)
        for loader in loaders:
            loader.set_epoch(epoch + 1)
    # Still a proof: a state that lost a batch is caught.
    for loader in loaders:
        loader.set_epoch(2)
    streams = [iter(loader) for loader in loaders]
    for stream in streams:
        next(stream)
    short = [loader.state_dict() for loader in loaders]
    for stream in streams:
        for _ in stream:
            pass
    with pytest.raises(ProvenanceError, match="missing"):
        loaders[0].verify_epoch(short)
    for loader in loaders:
        loader.close()


BUCKET_RUN = """
import json, sys
from stoker import Loader
from stoker.loader import Sampling
from stoker.ops import ImageTransform
from stoker_testbed.resume_runs import run_in_lockstep
from tests.loader.test_buckets import BUCKETS, images

world, saved, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
storage = images(200)
loaders = [
    Loader(storage, batch_size=4, transform=ImageTransform(), sampling=Sampling(seed=7, in_order=True, rank=rank, world_size=world, buckets=BUCKETS))
    for rank in range(world)
]
if saved == "-":  # the run that reached the spike: saves every rank's state after step 3, killed after step 7
    run_in_lockstep(loaders, save_at=3, kill_at=7, out=out)
for rank, loader in enumerate(loaders):
    loader.load_state_dict(json.load(open(saved))["states"][rank])
    loader.exclude(steps=range(5, 8))
rest = [[list(batch.keys) for batch in loader] for loader in loaders]
with open(out, "w") as file:
    json.dump({"rest": rest, "proof": loaders[0].verify_epoch([loader.state_dict() for loader in loaders])}, file)
"""


@pytest.mark.parametrize("world", [2, 3])
def test_the_steps_of_a_spike_are_cut_out_of_a_bucketed_epoch_across_a_kill(tmp_path: Path, world: int) -> None:
    import json
    import signal
    import subprocess
    import sys

    root = Path(__file__).parents[2]
    saved, out = tmp_path / "saved.json", tmp_path / "out.json"
    killed = subprocess.run(
        [sys.executable, "-c", BUCKET_RUN, str(world), "-", str(saved)], capture_output=True, text=True, timeout=300, cwd=root
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = subprocess.run(
        [sys.executable, "-c", BUCKET_RUN, str(world), str(saved), str(out)], capture_output=True, text=True, timeout=300, cwd=root
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(out.read_text())
    storage = images(200)
    expected = _expected_bucket(storage)
    for rank in range(world):
        whole = Loader(
            storage,
            batch_size=4,
            transform=ImageTransform(),
            sampling=Sampling(seed=7, in_order=True, rank=rank, world_size=world, buckets=BUCKETS),
        )
        reference = [list(batch.keys) for batch in whole]
        whole.close()
        assert result["rest"][rank] == reference[4:5] + reference[8:], (
            f"rank {rank}: steps 5 to 7 cut out, the rest as the run that went on"
        )
        assert all(len({expected[key] for key in keys}) == 1 for keys in result["rest"][rank]), "every batch still one bucket's"
    proof = result["proof"]
    assert proof["excluded"] == 3 * 4 * world
    assert proof["delivered"] + proof["excluded"] == proof["samples"]
