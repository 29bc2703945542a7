"""The loaders of `benchmarks/storage/formats.py`, each over a peer's format, for one epoch of
decoded uint8 image batches (shorter side to 160, centre crop 144 x 144, batches of 64), in a
process of its own, printing one JSON line (samples, seconds, time to first batch).

    python -m stoker_testbed.peers.format_peers METHOD DATASET [ENDPOINT CACHE]

- ``stoker``: `Loader` over `open_storage(DATASET)` (a folder, an ``s3://`` URL with ENDPOINT, or
  an ``http://`` brace URL list); ``stoker-block`` the same with the block shuffle (block
  streaming on a store: one ranged GET per block, the shuffle to set against WebDataset's shard
  shuffle and buffer):
  the MDS shards or TFRecord files read in place, decoded by the Loader's own stage.
- ``mosaicml``: MosaicML Streaming's `StreamingDataset` (shuffled, its defaults) over the MDS
  shards, ``local=`` the folder, or ``remote=`` the URL with a fresh CACHE, the decode in its
  ``__getitem__`` (the subclass its docs show), in a PyTorch DataLoader with 2 workers.
- ``tfrecord``: the ``tfrecord`` package's `MultiTFRecordDataset` over the files with the
  ``.idx`` indexes its ``tfrecord2idx`` writes (which it needs to split files among workers), a
  1,024-sample shuffle queue, the decode as its ``transform``, in a DataLoader with 2 workers.
  Local files only: it reads paths, not URLs.
- ``litdata``: LitData's `StreamingDataset` (shuffled) over chunks written by its ``optimize``,
  the decode in its ``__getitem__``, in its `StreamingDataLoader` with 2 workers; a local folder,
  or the URL with the endpoint in its ``storage_options`` and a fresh CACHE.
- ``grain``: Grain's ``ArrayRecordDataSource`` over ArrayRecord files of Examples, a
  ``MapDataset`` with its index shuffle, the parse and decode as a ``map``, ``batch``, and
  ``mp_prefetch`` with 2 worker processes. Local files only (its reader reads paths).
- ``lance``: a map-style dataset whose ``__getitems__`` is one Lance ``take`` of the batch's rows
  (Lance's random-access recipe), decoded there, in a DataLoader with 2 spawned workers (Lance's
  threads do not survive a fork), shuffled.
- ``webdataset``: WebDataset's own pipeline over its tar shards (a folder's shards, or the brace
  URL list, which it streams through ``curl``): shard shuffle, a 1,000-sample shuffle buffer, the
  decode as a ``map``, ``batched``, in its ``WebLoader`` with 2 workers (its docs' recipe).
- ``datasets``: Hugging Face's ``load_from_disk`` over its ``save_to_disk`` folder, the images
  undecoded by the feature and decoded by a ``with_transform`` (its docs' way), shuffled, in a
  DataLoader with 2 workers. Local folders only (``load_from_disk`` of a URL downloads it whole first).

The decode is the same for the peers: Pillow (with its ``draft`` mode off, full decode), a
bilinear resize, a centre crop, to a uint8 array.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

BATCH = 64
SHORTER = 160
CROP = 144


def pil_decode(data: bytes) -> np.ndarray:
    """A JPEG to the benchmark's uint8 crop, with Pillow."""
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    scale = SHORTER / min(image.size)
    image = image.resize((max(CROP, round(image.width * scale)), max(CROP, round(image.height * scale))), Image.BILINEAR)
    left, top = (image.width - CROP) // 2, (image.height - CROP) // 2
    return np.asarray(image.crop((left, top, left + CROP, top + CROP)))


def _stack(samples: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    return np.stack([image for image, _ in samples]), np.array([label for _, label in samples])


def stoker_batches(dataset: str, endpoint: str | None, shuffle: str = "uniform") -> Iterator[int]:
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.ops import ImageTransform
    from stoker.storage import open_storage

    options = {"endpoint": endpoint} if endpoint else {}
    loader = Loader(
        open_storage(dataset, **options),
        batch_size=BATCH,
        transform=ImageTransform(resize_shorter=SHORTER, center_crop=(CROP, CROP)),
        sampling=Sampling(shuffle=shuffle),  # type: ignore[arg-type]
    )
    for batch in loader:
        yield len(batch.labels)


def mosaicml_batches(dataset: str, cache: str | None) -> Iterator[int]:
    import torch
    from streaming import StreamingDataset

    class Decoded(StreamingDataset):
        def __getitem__(self, index: int) -> Any:
            sample = super().__getitem__(index)
            return pil_decode(sample["image"]), sample["label"]

    # MosaicML's remedy for shared memory a previous StreamingDataset left behind (its docs).
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    remote = "://" in dataset
    source = Decoded(remote=dataset if remote else None, local=cache if remote else dataset, shuffle=True, shuffle_seed=0, batch_size=BATCH)
    loader = torch.utils.data.DataLoader(source, batch_size=BATCH, num_workers=2, collate_fn=_stack)
    for images, _ in loader:
        yield len(images)


def _tfrecord_sample(record: dict[str, Any]) -> tuple[np.ndarray, int]:
    return pil_decode(bytes(record["image/encoded"])), int(record["image/class/label"][0])


def tfrecord_batches(dataset: str) -> Iterator[int]:
    import torch
    from tfrecord.torch.dataset import MultiTFRecordDataset

    folder = Path(dataset)
    names = sorted(path.name for path in folder.iterdir() if ".tfrecord" in path.name and not path.name.endswith(".idx"))
    source = MultiTFRecordDataset(
        str(folder / "{}"),
        str(folder / "{}.idx"),
        {name: 1.0 / len(names) for name in names},
        shuffle_queue_size=1024,
        description={"image/encoded": "byte", "image/class/label": "int"},
        transform=_tfrecord_sample,
        infinite=False,
    )
    loader = torch.utils.data.DataLoader(source, batch_size=BATCH, num_workers=2, collate_fn=_stack)
    for images, _ in loader:
        yield len(images)


def litdata_batches(dataset: str, endpoint: str | None, cache: str | None) -> Iterator[int]:
    import os

    from litdata import StreamingDataLoader, StreamingDataset
    from litdata.streaming import downloader

    class Decoded(StreamingDataset):
        def __getitem__(self, index: Any) -> Any:
            row = super().__getitem__(index)
            return pil_decode(row["image"]), row["label"]

    options: dict[str, Any] = {}
    if endpoint:
        # LitData 0.2.76's obstore client options lack allow_http, which our loopback s3proxy
        # (plain http) needs; an https endpoint would not.
        downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True  # type: ignore[index]
        options = {
            "endpoint_url": endpoint,
            "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
        }
    source = Decoded(dataset, cache_dir=cache if endpoint else None, shuffle=True, seed=0, storage_options=options)
    loader = StreamingDataLoader(source, batch_size=BATCH, num_workers=2, collate_fn=_stack)
    for images, _ in loader:
        yield len(images)


def _grain_sample(record: bytes) -> tuple[np.ndarray, int]:
    from tfrecord import example_pb2

    example = example_pb2.Example.FromString(record)
    features = example.features.feature
    return pil_decode(features["image/encoded"].bytes_list.value[0]), int(features["image/class/label"].int64_list.value[0])


def grain_batches(dataset: str) -> Iterator[int]:
    import grain
    from absl import flags

    flags.FLAGS(sys.argv[:1])  # Grain's workers read absl flags, which an absl app would have parsed
    paths = sorted(str(path) for path in Path(dataset).iterdir() if ".array_record" in path.name)
    source = grain.sources.ArrayRecordDataSource(paths)
    # Grain's recommended pipeline: an index shuffle, the parse and decode as a map, batches,
    # decoded in 2 worker processes (mp_prefetch), as its docs set it for CPU-bound maps.
    pipeline = grain.MapDataset.source(source).shuffle(seed=0).map(_grain_sample).batch(BATCH, batch_fn=_stack)
    iterator = pipeline.to_iter_dataset().mp_prefetch(grain.multiprocessing.MultiprocessingOptions(num_workers=2))
    for images, _ in iterator:
        yield len(images)


class _LanceRows:
    """A map-style PyTorch dataset over a Lance dataset, a batch one ``take`` (``__getitems__``),
    as Lance's docs show for random access; the dataset opened in each worker."""

    def __init__(self, uri: str) -> None:
        import lance

        self.uri = uri
        self.length = lance.dataset(uri).count_rows()
        self.dataset: Any = None

    def __len__(self) -> int:
        return self.length

    def __getitems__(self, indices: list[int]) -> list[tuple[np.ndarray, int]]:
        import lance

        if self.dataset is None:
            self.dataset = lance.dataset(self.uri)
        table = self.dataset.take(indices, columns=["image", "label"])
        return [(pil_decode(image), label) for image, label in zip(table.column(0).to_pylist(), table.column(1).to_pylist())]


def lance_batches(dataset: str) -> Iterator[int]:
    import torch

    # spawn, as Lance's docs ask: its reader's threads do not survive a fork.
    loader = torch.utils.data.DataLoader(
        _LanceRows(dataset),
        batch_size=BATCH,
        shuffle=True,
        num_workers=2,
        collate_fn=_stack,
        multiprocessing_context="spawn",  # type: ignore[arg-type]
    )
    for images, _ in loader:
        yield len(images)


def _webdataset_sample(sample: dict[str, Any]) -> tuple[np.ndarray, int]:
    return pil_decode(sample["jpg"]), int(sample["cls"])


def webdataset_batches(dataset: str) -> Iterator[int]:
    import webdataset

    urls = dataset if "://" in dataset else [str(path) for path in sorted(Path(dataset).glob("*.tar"))]
    pipeline = (
        webdataset.WebDataset(urls, shardshuffle=100, seed=0, empty_check=False)
        .shuffle(1000)
        .map(_webdataset_sample)
        .batched(BATCH, collation_fn=_stack, partial=True)
    )
    for images, _ in webdataset.WebLoader(pipeline, batch_size=None, num_workers=2):
        yield len(images)


def datasets_batches(dataset: str) -> Iterator[int]:
    import torch
    from datasets import Image, load_from_disk

    rows = load_from_disk(dataset).cast_column("image", Image(decode=False))

    def decode(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return {"image": [pil_decode(image["bytes"]) for image in batch["image"]], "label": batch["label"]}

    source = rows.with_transform(decode)  # its docs' way to decode on access
    loader = torch.utils.data.DataLoader(
        source,
        batch_size=BATCH,
        shuffle=True,
        num_workers=2,
        collate_fn=lambda samples: _stack([(row["image"], row["label"]) for row in samples]),
    )
    for images, _ in loader:
        yield len(images)


def main() -> None:
    method, dataset = sys.argv[1:3]
    endpoint = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
    cache = sys.argv[4] if len(sys.argv) > 4 else None
    if endpoint:
        import os

        os.environ["S3_ENDPOINT_URL"] = endpoint  # MosaicML's (boto3) endpoint override
    batches = {
        "stoker": lambda: stoker_batches(dataset, endpoint),
        "stoker-block": lambda: stoker_batches(dataset, endpoint, "block"),
        "mosaicml": lambda: mosaicml_batches(dataset, cache),
        "tfrecord": lambda: tfrecord_batches(dataset),
        "datasets": lambda: datasets_batches(dataset),
        "litdata": lambda: litdata_batches(dataset, endpoint, cache),
        "grain": lambda: grain_batches(dataset),
        "lance": lambda: lance_batches(dataset),
        "webdataset": lambda: webdataset_batches(dataset),
    }[method]()
    started = time.perf_counter()
    first = 0.0
    samples = 0
    for count in batches:
        first = first or time.perf_counter() - started
        samples += count
    print(json.dumps({"samples": samples, "seconds": time.perf_counter() - started, "first_batch_seconds": first}))


if __name__ == "__main__":
    main()
