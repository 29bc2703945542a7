"""Datasets written by the peers' own libraries, for the differential tests and
`benchmarks/storage/formats.py`: MDS by MosaicML Streaming's ``MDSWriter``, TFRecord by the
``tfrecord`` package's writer (gzip: the whole file compressed, as TensorFlow writes it), Hugging
Face ``datasets`` folders by ``save_to_disk``, LitData chunks by ``optimize``,
ArrayRecord files by Google's ``ArrayRecordWriter``, tar shards by WebDataset's ``ShardWriter``.

Each sample is ``(payload, label)``; the writers store the payload under ``image`` (MDS: a
``bytes`` column, or ``jpeg`` where asked) or ``image/encoded`` (TFRecord), the label under
``label`` or ``image/class/label``, and the sample's position under ``index``, beside a few other
columns of the kinds these formats have (text, floats, integers as text) that a read must step
over.
"""

from __future__ import annotations

import gzip
import io
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .images import jpeg

Sample = tuple[bytes, int]


def jpeg_samples(count: int, classes: int = 10, size: int = 64, seed: int = 0) -> list[Sample]:
    """``count`` small JPEG images, each with its label (``position % classes``)."""
    return [(jpeg(size + index % 5, size, seed=seed + index, quality=85), index % classes) for index in range(count)]


def random_samples(count: int, classes: int = 10, seed: int = 0) -> list[Sample]:
    """``count`` payloads of random bytes (10 B to 4 KB), each with its label."""
    generator = np.random.default_rng(seed)
    return [(generator.bytes(int(generator.integers(10, 4096))), index % classes) for index in range(count)]


def write_mds(
    folder: Path, samples: Sequence[Sample], *, compression: str | None = None, size_limit: int = 1 << 20, payload_encoding: str = "bytes"
) -> Path:
    """MDS shards of ``samples`` by ``streaming.MDSWriter``.

    Args:
        payload_encoding: ``"bytes"`` (stored as given) or ``"jpeg"`` (given to the writer as a
            PIL image opened from the bytes, which MDS stores as the file's own bytes).
    """
    from PIL import Image
    from streaming import MDSWriter

    columns = {"image": payload_encoding, "label": "int", "index": "int", "caption": "str", "score": "float32", "rank": "str_int"}
    with MDSWriter(out=str(folder), columns=columns, compression=compression, size_limit=size_limit, progress_bar=False) as writer:
        for index, (payload, label) in enumerate(samples):
            image: object = Image.open(io.BytesIO(payload)) if payload_encoding == "jpeg" else payload
            writer.write(
                {
                    "image": image,
                    "label": label,
                    "index": index,
                    "caption": f"sample {index} " * (index % 4),
                    "score": index / 8,
                    "rank": -index,
                }
            )
    return folder


def write_tfrecords(folder: Path, samples: Sequence[Sample], *, files: int = 3, compress: bool = False) -> list[Path]:
    """``samples`` in ``files`` TFRecord files of ``tf.train.Example`` records by the ``tfrecord``
    package's writer (in order, split evenly); gzip-compressed whole where ``compress``."""
    from tfrecord import TFRecordWriter

    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    per_file = -(-len(samples) // files)
    for number in range(files):
        path = folder / f"train.tfrecord-{number:05d}-of-{files:05d}"
        writer = TFRecordWriter(str(path))
        for index in range(number * per_file, min(len(samples), (number + 1) * per_file)):
            payload, label = samples[index]
            writer.write(
                {
                    "image/height": (64, "int"),
                    "image/encoded": (payload, "byte"),
                    "image/format": (b"jpeg", "byte"),
                    "image/class/label": (label, "int"),
                    "index": (index, "int"),
                    "weight": ([0.5, float(index)], "float"),
                }
            )
        writer.close()
        if compress:
            packed = path.with_name(path.name + ".gz")
            with path.open("rb") as plain, gzip.open(packed, "wb") as out:
                shutil.copyfileobj(plain, out)
            path.unlink()
            path = packed
        paths.append(path)
    return paths


def write_hf_disk(folder: Path, samples: Sequence[Sample], *, shards: int = 3, classes: int = 10) -> Path:
    """``samples`` as a Hugging Face ``datasets`` folder by ``save_to_disk``: an ``Image``
    feature (the JPEG's own bytes), a ``ClassLabel`` (classes ``c0``, ``c1``...), the position and
    a caption."""
    from datasets import ClassLabel, Dataset, Features, Image, Value

    features = Features(
        {
            "image": Image(),
            "label": ClassLabel(names=[f"c{number}" for number in range(classes)]),
            "index": Value("int64"),
            "caption": Value("string"),
        }
    )
    columns = {
        "image": [{"bytes": payload, "path": None} for payload, _ in samples],
        "label": [label for _, label in samples],
        "index": list(range(len(samples))),
        "caption": [f"sample {index}" for index in range(len(samples))],
    }
    Dataset.from_dict(columns, features=features).save_to_disk(str(folder), num_shards=shards)
    return folder


def litdata_row(item: tuple[int, bytes, int, bool]) -> dict[str, Any]:
    """LitData's ``optimize`` function (importable: its workers are processes): one sample as
    the dict its chunks store; with an array leaf, LitData writes items, else Arrow rows."""
    index, payload, label, with_array = item
    row: dict[str, Any] = {"image": payload, "label": label, "index": index}
    if with_array:
        row["thumb"] = np.full((2, 2), index % 256, dtype=np.uint8)
    return row


def litdata_optimize(**arguments: Any) -> None:
    """``litdata.optimize(**arguments)``, leaving the process as it was.

    `optimize` changes the process for good: it sets the start method to "spawn" (force=True),
    so every later DataLoader spawns and pickles what it never had to, and it installs a SIGINT
    handler that calls ``os._exit(0)``, so a later Ctrl-C (or a test of one) ends the process
    silently, with success. Both are put back.
    """
    import multiprocessing
    import signal

    from litdata import optimize

    start_method = multiprocessing.get_start_method(allow_none=True)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        optimize(**arguments)
    finally:
        multiprocessing.set_start_method(start_method, force=True)
        for number, handler in handlers.items():
            signal.signal(number, handler)


def write_litdata(folder: Path, samples: Sequence[Sample], *, chunk_bytes: str = "256KB", items: bool = True) -> Path:
    """``samples`` as LitData chunks by ``litdata.optimize``: with ``items``, each sample also
    holds a small array (LitData then writes its item layout); without, only bytes and numbers
    (Arrow rows at the end of each chunk, as LitData 0.2.7x writes them)."""
    inputs = [(index, payload, label, items) for index, (payload, label) in enumerate(samples)]
    litdata_optimize(
        fn=litdata_row, inputs=inputs, output_dir=str(folder), chunk_bytes=chunk_bytes, num_workers=1, mode="overwrite", verbose=False
    )
    return folder


def write_array_record(folder: Path, samples: Sequence[Sample], *, files: int = 2, examples: bool = True) -> list[Path]:
    """``samples`` in ``files`` ArrayRecord files by Google's ``ArrayRecordWriter``: each record
    a serialized ``tf.train.Example`` (``image/encoded``, ``image/class/label``, ``index``), as a
    TFRecord dataset converted for Grain has, or (``examples=False``) the payload bytes alone."""
    from array_record.python.array_record_module import ArrayRecordWriter
    from tfrecord import example_pb2

    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-len(samples) // files)
    paths = []
    for number in range(files):
        path = folder / f"train.array_record-{number:05d}-of-{files:05d}"
        writer = ArrayRecordWriter(str(path), "group_size:16")
        for index in range(number * per_file, min(len(samples), (number + 1) * per_file)):
            payload, label = samples[index]
            if not examples:
                writer.write(payload)
                continue
            example = example_pb2.Example()
            example.features.feature["image/encoded"].bytes_list.value.append(payload)
            example.features.feature["image/class/label"].int64_list.value.append(label)
            example.features.feature["index"].int64_list.value.append(index)
            writer.write(example.SerializeToString())
        writer.close()
        paths.append(path)
    return paths


def write_lance(uri: Path, samples: Sequence[Sample], *, blob: bool = False, rows_per_file: int = 100) -> Path:
    """``samples`` as a Lance dataset by ``lance.write_dataset``: ``image`` (a blob column where
    ``blob``, Lance's encoding for large binaries), ``label``, ``index``."""
    import lance
    import pyarrow as pa

    image = pa.field("image", pa.large_binary(), metadata={"lance-encoding:blob": "true"} if blob else None)
    schema = pa.schema([image, pa.field("label", pa.int64()), pa.field("index", pa.int64())])
    table = pa.table(
        {"image": [payload for payload, _ in samples], "label": [label for _, label in samples], "index": list(range(len(samples)))},
        schema=schema,
    )
    lance.write_dataset(table, str(uri), max_rows_per_file=rows_per_file)
    return uri


def write_webdataset(folder: Path, samples: Sequence[Sample], *, shard_bytes: int = 64 << 20) -> list[Path]:
    """``samples`` as tar shards by WebDataset's ``ShardWriter`` (``shard-000000.tar``, ...),
    each sample a ``jpg`` and a ``cls`` member, with no index beside them (as WebDataset writes
    and most public datasets publish them)."""
    import webdataset

    folder.mkdir(parents=True, exist_ok=True)
    with webdataset.ShardWriter(str(folder / "shard-%06d.tar"), maxsize=shard_bytes, maxcount=10**9, verbose=0) as writer:
        for index, (payload, label) in enumerate(samples):
            writer.write({"__key__": f"{index:09d}", "jpg": payload, "cls": str(label).encode()})
    return sorted(folder.glob("shard-*.tar"))


def brace_url(base: str, shards: Sequence[Path]) -> str:
    """WebDataset's brace form of ``shards`` (named ``shard-NNNNNN.tar``) under URL ``base``."""
    return f"{base.rstrip('/')}/shard-{{000000..{len(shards) - 1:06d}}}.tar"
