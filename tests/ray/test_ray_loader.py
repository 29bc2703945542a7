"""`RayLoader` on a real local Ray cluster: a Ray Data pipeline (stoker's source, ``map_batches``
on the workers) feeding training as stoker batches: every row once with its key, label and
pixels, through `to_device` and the data-wait meter; equal steps per rank from
``streaming_split``; an exact mid-epoch resume when Ray keeps the order."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker.ingest import convert_storage
from stoker.observe import DataWaitMeter
from stoker.ops import ImageTransform, decode_image
from stoker.storage import MemoryStorage
from stoker_testbed.data.images import jpeg

ray = pytest.importorskip("ray")
TRANSFORM = ImageTransform(resize=(16, 24))


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[bytes, int]]]:
    images = {f"class_{index % 3}/{index:03d}.jpg": jpeg(48 + index % 5, 40, seed=index) for index in range(60)}
    labels = {key: index % 3 for index, key in enumerate(images)}
    folder = tmp_path_factory.mktemp("ray-loader") / "shards"
    convert_storage(MemoryStorage(images, labels), folder, shard_size=40_000, progress=False)
    # Shard keys drop the extension.
    return folder, {key.rsplit(".", 1)[0]: (data, labels[key]) for key, data in images.items()}


def inverted(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The preprocessing Ray runs on its workers in these tests."""
    return {**batch, "image": 255 - batch["image"]}


def pipeline(folder: Path) -> Any:
    from stoker.ray import StokerDatasource

    source = StokerDatasource(str(folder), columns=("key", "label", "image"), transform=TRANSFORM, rows_per_block=8)
    return ray.data.read_datasource(source, override_num_blocks=4).map_batches(inverted, batch_format="numpy")


@contextlib.contextmanager
def preserved_order() -> Iterator[None]:
    context = ray.data.DataContext.get_current()
    before = context.execution_options.preserve_order
    context.execution_options.preserve_order = True
    try:
        yield
    finally:
        context.execution_options.preserve_order = before


def test_every_row_once_with_its_key_label_and_pixels_through_to_device_and_the_meter(
    ray_cluster: str, shards: tuple[Path, dict[str, tuple[bytes, int]]]
) -> None:
    from stoker.device import to_device
    from stoker.ray import RayLoader

    folder, truth = shards
    loader = RayLoader(pipeline(folder), batch_size=8)
    meter = DataWaitMeter(loader, verbose=False)
    for epoch in range(2):  # each iteration is an epoch: Ray runs the pipeline again
        seen: list[str] = []
        sizes = []
        for moved in to_device(meter, "cpu"):
            batch = moved.host
            sizes.append(len(batch))
            assert moved.data.shape == (len(batch), 16, 24, 3) and str(moved.data.dtype) == "torch.uint8"
            for key, pixels, label in zip(batch.keys, moved.data.numpy(), moved.labels.tolist()):
                data, expected_label = truth[key]
                assert np.array_equal(pixels, 255 - decode_image(data, TRANSFORM)), key
                assert label == expected_label
            seen += batch.keys
        assert sorted(seen) == sorted(truth), f"epoch {epoch}: every row exactly once"
        assert sorted(sizes) == [4] + [8] * 7  # Ray may hand over its short batch before the last
        assert loader.epoch == epoch + 1
    assert meter.steps == 16
    stats = loader.stats
    assert (stats.batches, stats.rows) == (16, 120)
    assert stats.verdict


def test_drop_last_drops_the_short_batch(ray_cluster: str, shards: tuple[Path, dict[str, tuple[bytes, int]]]) -> None:
    from stoker.ray import RayLoader

    batches = list(RayLoader(pipeline(shards[0]), batch_size=8, drop_last=True))
    assert [len(batch) for batch in batches] == [8] * 7
    assert len({key for batch in batches for key in batch.keys}) == 56


def test_streaming_split_gives_every_rank_the_same_steps_and_each_row_once(
    ray_cluster: str, shards: tuple[Path, dict[str, tuple[bytes, int]]]
) -> None:
    from stoker.ray import RayLoader

    folder, truth = shards
    splits = pipeline(folder).streaming_split(2, equal=True)
    keys: list[list[str]] = [[], []]
    steps = [0, 0]
    errors: list[BaseException] = []

    def rank(number: int) -> None:
        try:
            for batch in RayLoader(splits[number], batch_size=5):
                keys[number] += batch.keys
                steps[number] += 1
        except BaseException as error:  # noqa: BLE001 - reported by the test's thread
            errors.append(error)

    threads = [threading.Thread(target=rank, args=(number,)) for number in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    assert steps[0] == steps[1] == 6, "equal shares: no rank waits in DDP for a step the other never takes"
    assert not set(keys[0]) & set(keys[1])
    assert sorted(keys[0] + keys[1]) == sorted(truth)


def test_a_mid_epoch_resume_continues_exactly_when_ray_keeps_the_order(
    ray_cluster: str, shards: tuple[Path, dict[str, tuple[bytes, int]]]
) -> None:
    from stoker.ray import RayLoader

    folder, truth = shards
    with preserved_order():
        whole = [key for batch in RayLoader(pipeline(folder), batch_size=8) for key in batch.keys]
        first = RayLoader(pipeline(folder), batch_size=8)
        delivered: list[str] = []
        for batch in first:
            delivered += batch.keys
            if len(delivered) == 24:
                break
        state = first.state_dict()
        assert state["rows"] == 24 and state["epoch"] == 0
        resumed = RayLoader(pipeline(folder), batch_size=8)
        resumed.load_state_dict(state)
        rest = list(resumed)
        continued = list(first)  # the same loader after its break: the rest of the epoch
    assert delivered + [key for batch in rest for key in batch.keys] == whole
    assert [key for batch in continued for key in batch.keys] == [key for batch in rest for key in batch.keys]
    assert sorted(whole) == sorted(truth)
    assert [int(batch.positions[0]) for batch in rest] == list(range(24, 60, 8))
    assert resumed.epoch == 1
