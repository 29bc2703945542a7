"""Ray Data over stoker storage on a real local Ray cluster (a head and a second node, loopback
only): every sample read once with its key and label, ``map_batches`` on the workers, decoded
images equal to stoker's own decode, a corrupt sample named in the task's error; ``stoker convert
--ray`` (and `convert_with_ray`) byte-identical to ``stoker convert``, also with a worker
SIGKILLed mid-conversion; a failed conversion leaves no ``dataset.json``."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from stoker.ingest import convert_storage
from stoker.ops import ImageTransform, decode_image
from stoker.storage import MemoryStorage, open_storage
from stoker_testbed.data.images import jpeg

ray = pytest.importorskip("ray")


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
    convert_storage(MemoryStorage(images), tmp_path / "shards", progress=False, decode_check=False)  # a bad sample packed on purpose
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


def files_of(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_convert_with_ray_writes_the_same_bytes_as_convert(ray_cluster: str, shards: tuple[Path, MemoryStorage], tmp_path: Path) -> None:
    from stoker.ray import convert_with_ray

    folder, source = shards
    with open_storage(str(folder)) as same_source:
        convert_storage(same_source, tmp_path / "alone", shard_size=50_000, progress=False)
    report = convert_with_ray(str(folder), tmp_path / "ray", shard_size=50_000, rows_per_block=5)
    assert report.samples == len(source) and report.shards > 2
    assert files_of(tmp_path / "ray") == files_of(tmp_path / "alone"), "shards, indexes and dataset.json byte for byte"


def test_stoker_convert_with_ray_from_the_command_line(ray_cluster: str, shards: tuple[Path, MemoryStorage], tmp_path: Path) -> None:
    folder, _ = shards
    with open_storage(str(folder)) as same_source:
        convert_storage(same_source, tmp_path / "alone", shard_size=50_000, progress=False)
    command = [
        str(Path(sys.executable).parent / "stoker"),
        "convert",
        str(folder),
        str(tmp_path / "ray"),
        "--shard-size",
        "50000",
        "--ray",
        ray_cluster,
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "with Ray; verified" in finished.stdout
    assert files_of(tmp_path / "ray") == files_of(tmp_path / "alone")


def test_a_failing_read_leaves_no_dataset_json(ray_cluster: str, tmp_path: Path) -> None:
    from stoker.ray import convert_with_ray

    images = {f"c/{index:02d}.jpg": jpeg(40, 30, seed=index) for index in range(20)}
    convert_storage(MemoryStorage(images), tmp_path / "source", shard_size=10_000, progress=False)
    shard = sorted((tmp_path / "source").glob("shard-*.tar"))[1]
    data = bytearray(shard.read_bytes())
    data[1500] ^= 0xFF  # a payload byte: its CRC-32 no longer matches
    shard.write_bytes(bytes(data))
    with pytest.raises(Exception, match=r"shard-000001\.tar"):
        convert_with_ray(str(tmp_path / "source"), tmp_path / "out", shard_size=10_000)
    assert not (tmp_path / "out" / "dataset.json").exists()
    assert not (tmp_path / "out" / ".ray-parts").exists()


def test_a_destination_that_is_not_empty_is_refused(ray_cluster: str, shards: tuple[Path, MemoryStorage], tmp_path: Path) -> None:
    from stoker.ray import convert_with_ray
    from stoker.storage import StorageError

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(StorageError, match="is not empty"):
        convert_with_ray(str(shards[0]), tmp_path / "out")
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_a_worker_killed_mid_conversion_is_retried_and_the_bytes_are_the_same(ray_cluster: str, tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    from stoker.ray import convert_with_ray

    images = {f"c/{index:03d}.jpg": jpeg(60, 40, seed=index) for index in range(300)}
    convert_storage(MemoryStorage(images), tmp_path / "source", shard_size=50_000, progress=False)
    with open_storage(str(tmp_path / "source")) as source:
        convert_storage(source, tmp_path / "alone", shard_size=50_000, progress=False)
    killed: list[int] = []
    finished = threading.Event()

    def kill_one_reader() -> None:
        while not finished.is_set() and not killed:
            for process in psutil.process_iter(["cmdline"]):
                if " ".join(process.info["cmdline"] or []).startswith("ray::Readstoker"):
                    with contextlib.suppress(psutil.Error):
                        process.send_signal(signal.SIGKILL)
                        killed.append(process.pid)
                    break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_one_reader)
    killer.start()
    try:
        convert_with_ray(str(tmp_path / "source"), tmp_path / "ray", shard_size=50_000, rows_per_block=5)
    finally:
        finished.set()
        killer.join()
    assert killed, "a worker was killed while converting"
    assert files_of(tmp_path / "ray") == files_of(tmp_path / "alone"), "its task ran again: the same bytes"


def test_skip_leaves_out_the_bad_sample_and_logs_it(ray_cluster: str, tmp_path: Path) -> None:
    from stoker.ray import StokerDatasource

    images = {f"ok/{index:02d}.jpg": jpeg(40, 30, seed=index) for index in range(9)}
    images["bad/broken.jpg"] = b"not a jpeg at all"
    convert_storage(MemoryStorage(images), tmp_path / "shards", progress=False, decode_check=False)  # a bad sample packed on purpose
    transform = ImageTransform(resize=(8, 8))
    source = StokerDatasource(str(tmp_path / "shards"), columns=("key", "image"), transform=transform, on_error="skip", rows_per_block=4)
    rows = ray.data.read_datasource(source).take_all()
    assert sorted(row["key"] for row in rows) == [f"ok/{index:02d}" for index in range(9)]  # shard keys drop the extension
    for row in rows:
        assert np.array_equal(row["image"], decode_image(images[row["key"] + ".jpg"], transform))
    with pytest.raises(ValueError, match="on_error"):
        StokerDatasource(str(tmp_path / "shards"), on_error="zero")
