"""Ray Data over stoker storage on a real local Ray cluster (a head and a second node, loopback
only): every sample read once with its key and label, ``map_batches`` on the workers, decoded
images equal to stoker's own decode, and a corrupt sample named in the task's error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from stoker.ops import ImageTransform, decode_image
from stoker.storage import MemoryStorage, convert_storage
from tests.images import jpeg
from tests.support.server import free_port

ray = pytest.importorskip("ray")


def unavailable(error: str) -> None:
    message = f"a local Ray cluster is not available here: {error}"
    if os.environ.get("STOKER_REQUIRE_SERVERS"):
        pytest.fail(message + " (STOKER_REQUIRE_SERVERS is set: CI must run these tests)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``ray start --head`` and a second node joined to it, on 127.0.0.1; yields the address."""
    command = shutil.which("ray", path=str(Path(sys.executable).parent))  # the venv's own
    if command is None:
        unavailable("the ray command is not installed")
    address = f"127.0.0.1:{free_port()}"
    temp = tmp_path_factory.mktemp("ray")
    common = ["--num-cpus=1", "--object-store-memory=150000000", "--disable-usage-stats", "--node-ip-address=127.0.0.1"]
    started = subprocess.run(
        [command, "start", "--head", f"--port={address.split(':')[1]}", "--include-dashboard=false", f"--temp-dir={temp}", *common],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if started.returncode != 0:
        unavailable(started.stderr[-2000:])
    joined = subprocess.run([command, "start", f"--address={address}", *common], capture_output=True, text=True, timeout=180)
    try:
        if joined.returncode != 0:
            unavailable(joined.stderr[-2000:])
        ray.init(address=address, log_to_driver=False)
        yield address
    finally:
        ray.shutdown()
        subprocess.run([command, "stop", "--force"], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MemoryStorage]:
    images = {f"class_{index % 3}/{index:03d}.jpg": jpeg(64 + index % 5, 48, seed=index) for index in range(60)}
    source = MemoryStorage(images, {key: index % 3 for index, key in enumerate(images)})
    folder = tmp_path_factory.mktemp("shards") / "shards"
    convert_storage(source, folder, shard_size=60_000, progress=False)
    return folder, source


def test_every_sample_once_with_its_key_and_label_through_map_batches(ray_cluster: str, shards: tuple[Path, MemoryStorage]) -> None:
    from stoker.ray import StokerDatasource

    folder, source = shards
    dataset = ray.data.read_datasource(StokerDatasource(str(folder), rows_per_block=7), override_num_blocks=4)
    sized = dataset.map_batches(lambda batch: {**batch, "size": np.array([len(item) for item in batch["bytes"]])}, batch_format="numpy")
    rows = sized.take_all()
    truth = {key.rsplit(".", 1)[0]: (data, label) for key, data, label in zip(source.keys, source.read_many(source.keys), source.labels)}
    assert sorted(row["key"] for row in rows) == sorted(truth), "every sample once"
    for row in rows:
        assert (bytes(row["bytes"]), row["label"]) == truth[row["key"]]
        assert row["size"] == len(truth[row["key"]][0])


def test_decoded_images_equal_stokers_own_decode(ray_cluster: str, shards: tuple[Path, MemoryStorage]) -> None:
    from stoker.ray import StokerDatasource

    folder, source = shards
    transform = ImageTransform(resize=(24, 32))
    rows = ray.data.read_datasource(StokerDatasource(str(folder), columns=("key", "image"), transform=transform)).take_all()
    by_key = dict(zip((key.rsplit(".", 1)[0] for key in source.keys), source.read_many(source.keys)))
    assert len(rows) == len(source)
    for row in rows:
        assert np.array_equal(row["image"], decode_image(by_key[row["key"]], transform))


def test_a_corrupt_sample_is_named_in_the_error(ray_cluster: str, tmp_path: Path) -> None:
    from stoker.ray import StokerDatasource

    images = {f"ok/{index:02d}.jpg": jpeg(40, 30, seed=index) for index in range(9)}
    images["bad/broken.jpg"] = b"not a jpeg at all"
    convert_storage(MemoryStorage(images), tmp_path / "shards", progress=False)
    dataset = ray.data.read_datasource(
        StokerDatasource(str(tmp_path / "shards"), columns=("key", "image"), transform=ImageTransform(resize=(8, 8)))
    )
    with pytest.raises(Exception, match="bad/broken"):
        dataset.take_all()


def test_bad_columns_are_refused_on_the_driver(shards: tuple[Path, MemoryStorage]) -> None:
    from stoker.ray import StokerDatasource

    with pytest.raises(ValueError, match="unknown column"):
        StokerDatasource(str(shards[0]), columns=("key", "pixels"))
    with pytest.raises(ValueError, match="needs a transform"):
        StokerDatasource(str(shards[0]), columns=("image",))
