"""WebDataset's conventions in full, both ways: mixed payload extensions per sample, integer, float,
text and JSON labels, multi-member samples, keys with dots and folders."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stoker.ingest import convert_storage
from stoker.loader import FailurePolicy, Loader, Sampling
from stoker.ops import ImageTransform
from stoker.storage import FileStorage, ShardError, StorageError, TarShardStorage

webdataset = pytest.importorskip("webdataset")


def _image(value: int, extension: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((12, 16, 3), value, np.uint8)).save(
        buffer, {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "webp": "WEBP"}[extension.lower()]
    )
    return buffer.getvalue()


def _write(path: Path, samples: list[dict]) -> Path:
    with webdataset.TarWriter(str(path)) as writer:
        for sample in samples:
            writer.write(sample)
    return path


def test_mixed_extensions_read_per_sample(tmp_path: Path) -> None:
    extensions = ["jpg", "png", "jpeg", "JPEG", "PNG", "webp", "jpg"]
    samples = [
        {"__key__": f"s{index}", extension: _image(10 * index, extension), "cls": str(index % 2).encode()}
        for index, extension in enumerate(extensions)
    ]
    shard = _write(tmp_path / "mixed.tar", samples)
    with TarShardStorage(shard) as storage:
        assert storage.read_many(storage.keys) == [
            next(value for name, value in sample.items() if name not in ("__key__", "cls")) for sample in samples
        ]
        assert storage.labels == [index % 2 for index in range(len(samples))]
        loader = Loader(storage, batch_size=3, transform=ImageTransform(resize=(16, 12)), sampling=Sampling(shuffle="none"))
        batches = list(loader)
    means = {key: float(pixels.mean()) for batch in batches for key, pixels in zip(batch.keys, batch.data)}
    assert sorted(means) == [f"s{index}" for index in range(len(samples))]
    assert all(abs(means[f"s{index}"] - 10 * index) <= 2 for index in range(len(samples))), means


def test_labels_of_every_kind(tmp_path: Path) -> None:
    image = _image(50, "jpg")
    text = _write(
        tmp_path / "text.tar",
        [{"__key__": f"t{index}", "jpg": image, "class": name.encode()} for index, name in enumerate(["dog", "cat", "dog", "emu"])],
    )
    with TarShardStorage(text) as storage:
        assert storage.classes == ["cat", "dog", "emu"]
        assert list(storage.labels) == [1, 0, 1, 2]
    floats = _write(
        tmp_path / "floats.tar", [{"__key__": f"f{index}", "jpg": image, "target": f"{index * 0.25}".encode()} for index in range(4)]
    )
    with TarShardStorage(floats) as storage:
        assert list(storage.labels) == [0.0, 0.25, 0.5, 0.75]
        batch = next(iter(Loader(storage, batch_size=4, sampling=Sampling(shuffle="none"))))
        assert batch.labels.dtype == np.float64 and batch.labels.tolist() == [0.0, 0.25, 0.5, 0.75]
    described = _write(
        tmp_path / "json.tar",
        [{"__key__": f"j{index}", "jpg": image, "json": json.dumps({"meta": {"label": index * 3}}).encode()} for index in range(3)],
    )
    with TarShardStorage(described, label_key="meta.label") as storage:
        assert list(storage.labels) == [0, 3, 6]
    with TarShardStorage(described) as storage:
        assert list(storage.labels) == [None, None, None]
    mixed = _write(tmp_path / "mixed.tar", [{"__key__": "a", "jpg": image, "cls": b"3"}, {"__key__": "b", "jpg": image, "cls": b"dog"}])
    with pytest.raises(ShardError, match="mix class names and numbers"):
        TarShardStorage(mixed)


def test_text_labels_use_the_manifest_class_list(tmp_path: Path) -> None:
    image = _image(50, "jpg")
    folder = tmp_path / "dataset"
    folder.mkdir()
    _write(folder / "shard-000000.tar", [{"__key__": "a", "jpg": image, "cls": b"zebra"}, {"__key__": "b", "jpg": image, "cls": b"ant"}])
    (folder / "dataset.json").write_text(
        json.dumps({"format": "stoker.shards", "version": 1, "shards": [{"name": "shard-000000.tar"}], "classes": ["zebra", "ant"]})
    )
    with TarShardStorage(folder) as storage:
        assert storage.classes == ["zebra", "ant"] and list(storage.labels) == [0, 1]


def test_image_text_samples_through_the_loader(tmp_path: Path) -> None:
    # LAION-style: an image, its caption and its metadata per sample.
    samples = [
        {
            "__key__": f"{index:05d}",
            "jpg": _image(index * 20, "jpg"),
            "txt": f"caption {index} ünïcode".encode(),
            "json": json.dumps({"width": index}).encode(),
        }
        for index in range(10)
    ]
    shard = _write(tmp_path / "laion.tar", samples)
    with TarShardStorage(shard) as storage:
        loader = Loader(storage, batch_size=4, transform=ImageTransform(resize=(16, 12)), extra=("txt", "json"), sampling=Sampling(seed=3))
        seen = {}
        for batch in loader:
            assert batch.extra is not None and len(batch.extra) == len(batch)
            for key, pixels, extra in zip(batch.keys, batch.data, batch.extra):
                seen[key] = (float(pixels.mean()), extra)
    assert sorted(seen) == [sample["__key__"] for sample in samples]
    for index in range(10):
        mean, extra = seen[f"{index:05d}"]
        assert abs(mean - index * 20) <= 2, "each caption stays with its own image"
        assert extra == {"txt": f"caption {index} ünïcode", "json": {"width": index}}


def test_a_sample_missing_an_extra_member_is_a_bad_sample(tmp_path: Path) -> None:
    samples = [{"__key__": f"{index}", "jpg": _image(index, "jpg"), "txt": b"caption"} for index in range(6)]
    del samples[2]["txt"]
    shard = _write(tmp_path / "gap.tar", samples)
    with TarShardStorage(shard) as storage:
        with pytest.raises(Exception, match=r"'2'.*no 'txt' member"):
            list(Loader(storage, batch_size=3, extra=("txt",), sampling=Sampling(shuffle="none")))
        loader = Loader(
            storage,
            batch_size=3,
            extra=("txt",),
            sampling=Sampling(shuffle="none"),
            failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
        )
        batches = list(loader)
    assert [failure.sample for failure in loader.failures] == ["2"]
    assert all(extra == {"txt": "caption"} for batch in batches for extra in batch.extra)
    (tmp_path / "folder" / "a").mkdir(parents=True)
    (tmp_path / "folder" / "a" / "x.jpg").write_bytes(_image(1, "jpg"))
    with FileStorage(tmp_path / "folder") as files, pytest.raises(StorageError, match="extra members"):
        Loader(files, batch_size=2, extra=("txt",))


def test_keys_with_dots_folders_and_long_names_both_ways(tmp_path: Path) -> None:
    long_folder = "/".join(["deep" * 10] * 4)
    samples = {
        f"{long_folder}/img.v2.final.jpg": (_image(1, "jpg"), 0),
        "cats/tabby.one.png": (_image(2, "png"), 1),
        "cats/plain.JPEG": (_image(3, "jpg"), 1),
    }
    root = tmp_path / "source"
    for key, (data, _) in samples.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    manifest = root / "list.csv"
    manifest.write_text("".join(f"{key},{label}\n" for key, (_, label) in samples.items()))
    destination = tmp_path / "shards"
    with FileStorage(manifest) as source:
        convert_storage(source, destination, progress=False, decode_check=False)
    with TarShardStorage(destination) as storage:
        assert sorted(storage.read_many(storage.keys)) == sorted(data for data, _ in samples.values())
    read_back = {}
    for sample in webdataset.WebDataset(str(destination / "shard-000000.tar"), shardshuffle=False):
        payload = next(name for name in sample if name in ("jpg", "png", "jpeg"))
        read_back[sample["__key__"]] = (sample[payload], int(sample["cls"]))
    assert sorted(read_back.values()) == sorted(samples.values())
    assert f"{long_folder}/img_v2_final" in read_back, "WebDataset sees the same key as stoker"


def test_converting_a_folder_of_mixed_extensions(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "photos"
    samples = {}
    for index, extension in enumerate(["jpg", "jpeg", "JPEG", "png", "webp", "PNG"]):
        key = f"class_{index % 2}/image{index}.{extension}"
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        samples[key] = _image(index * 30, extension)
        (root / key).write_bytes(samples[key])
    destination = tmp_path / "shards"
    result = subprocess.run(
        [sys.executable, "-m", "stoker.cli", "convert", str(root), str(destination), "--quiet", "--no-decode-check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    with TarShardStorage(destination) as storage:
        assert sorted(storage.read_many(storage.keys)) == sorted(samples.values())
        assert storage.catalog.payload_counts() == {"jpg": 1, "jpeg": 2, "png": 2, "webp": 1}


def test_a_dataset_megatron_energon_prepared_reads_with_its_index_left_alone(tmp_path: Path) -> None:
    """``energon prepare`` writes a binary ``shard.tar.idx`` of its own under the name of stoker's
    index: stoker indexes the shard in memory and leaves Energon's file as it was."""
    shard = _write(tmp_path / "shard-000000.tar", [{"__key__": f"{index:03d}", "jpg": _image(index, "jpg")} for index in range(12)])
    theirs = np.arange(0, 12 * 1536, 1536, dtype="<u8").tobytes()  # sample offsets, as Energon's index holds them
    (tmp_path / "shard-000000.tar.idx").write_bytes(theirs)
    storage = TarShardStorage(shard, missing_index="write")
    assert storage.read_many(storage.keys) == [_image(index, "jpg") for index in range(12)]
    assert (tmp_path / "shard-000000.tar.idx").read_bytes() == theirs
