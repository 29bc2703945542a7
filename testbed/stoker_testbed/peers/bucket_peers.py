"""The loaders of `benchmarks/images/buckets.py`, each batching a folder of JPEGs of many aspect
ratios by bucket into uint8 CHW batches, in a process of its own, printing one JSON line.

    python -m stoker_testbed.peers.bucket_peers METHOD FOLDER PIXELS BATCH

- ``stoker``: `Loader` over the folder with ``Sampling(buckets=Buckets.from_budget(PIXELS))``
  and an `ImageTransform` in CHW: sizes from the headers, decode covering each bucket's shape.
- ``handwritten``: the bucket sampler diffusion trainers write (the diffusers / kohya-ss
  pattern): every image's size read with Pillow (``Image.open(path).size``, the header only),
  the nearest bucket by aspect ratio, each bucket shuffled and cut into batches (its last one
  short), the batches shuffled, a `batch_sampler` of a PyTorch DataLoader with 2 workers whose
  dataset decodes with Pillow, resizes to cover the bucket (bilinear) and crops at a random place.
- ``energon``: Megatron-Energon over the same images as WebDataset shards prepared by its own
  ``energon prepare`` (FOLDER is the shards' folder): a task encoder that decodes with Pillow
  (its ``SampleDecoder(image_decode="pil")``), resizes to cover the nearest bucket and crops at a
  random place, and groups samples into batches by bucket (``batch_group_criterion``, Energon's
  grouping), in its loader with 2 workers (``WorkerConfig(num_workers=2)``).
- ``stoker-shards``: `Loader` over those same shards, as ``stoker``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from stoker.sampling import Buckets


def stoker_batches(folder: str, buckets: Buckets, batch: int) -> Iterator[int]:
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.ops import ImageTransform

    loader = Loader(folder, batch_size=batch, transform=ImageTransform(layout="CHW"), sampling=Sampling(buckets=buckets))
    for images in loader:
        yield len(images.keys)


class AspectBuckets:
    """The hand-written bucket sampler: batches of indices, each from one bucket."""

    def __init__(self, sizes: list[tuple[int, int]], buckets: Buckets, batch: int, seed: int = 0) -> None:
        ratios = np.log(buckets.aspect_ratios())
        self.bucket_of = [int(np.argmin(np.abs(ratios - np.log(width / height)))) for width, height in sizes]
        self.batch, self.seed, self.epoch = batch, seed, 0

    def batches(self) -> list[list[int]]:
        generator = random.Random(self.seed * 1000 + self.epoch)
        members: dict[int, list[int]] = {}
        for index, bucket in enumerate(self.bucket_of):
            members.setdefault(bucket, []).append(index)
        batches = []
        for bucket in sorted(members):
            indices = members[bucket]
            generator.shuffle(indices)
            batches += [indices[start : start + self.batch] for start in range(0, len(indices), self.batch)]
        generator.shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.batches())


class CoverDataset:
    """Decodes with Pillow, resizes to cover the sample's bucket, crops at a random place."""

    def __init__(self, paths: list[Path], shapes: list[tuple[int, int]], bucket_of: list[int]) -> None:
        self.paths, self.shapes, self.bucket_of = paths, shapes, bucket_of

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> np.ndarray:
        from PIL import Image

        height, width = self.shapes[self.bucket_of[index]]
        image = Image.open(self.paths[index]).convert("RGB")
        scale = max(width / image.width, height / image.height)
        resized = image.resize((max(width, round(image.width * scale)), max(height, round(image.height * scale))), Image.BILINEAR)
        generator = random.Random(index)
        left, top = generator.randint(0, resized.width - width), generator.randint(0, resized.height - height)
        return np.asarray(resized.crop((left, top, left + width, top + height))).transpose(2, 0, 1)


def _stack(images: list[np.ndarray]) -> Any:
    import torch

    return torch.from_numpy(np.stack(images))


def handwritten_batches(folder: str, buckets: Buckets, batch: int) -> Iterator[int]:
    import torch
    from PIL import Image

    paths = sorted(Path(folder).rglob("*.jpg"))
    sizes = []
    for path in paths:
        with Image.open(path) as image:
            sizes.append(image.size)
    sampler = AspectBuckets(sizes, buckets, batch)
    dataset = CoverDataset(paths, list(buckets.shapes), sampler.bucket_of)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler, num_workers=2, collate_fn=_stack)  # type: ignore[arg-type]
    for images in loader:
        yield len(images)


def energon_batches(folder: str, buckets: Buckets, batch: int) -> Iterator[int]:
    import torch
    from megatron.energon import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset
    from megatron.energon.flavors.webdataset.sample_decoder import SampleDecoder
    from PIL import Image

    shapes = list(buckets.shapes)

    class CoverEncoder(DefaultTaskEncoder):  # type: ignore[misc]
        decoder = SampleDecoder(image_decode="pil")

        def encode_sample(self, sample: Any) -> dict[str, Any]:
            image = sample.image.convert("RGB")
            number = int(buckets.assign(np.array([image.width]), np.array([image.height]))[0])
            height, width = shapes[number]
            scale = max(width / image.width, height / image.height)
            resized = image.resize((max(width, round(image.width * scale)), max(height, round(image.height * scale))), Image.BILINEAR)
            generator = random.Random(sample.__key__)
            left, top = generator.randint(0, resized.width - width), generator.randint(0, resized.height - height)
            return {"image": np.asarray(resized.crop((left, top, left + width, top + height))).transpose(2, 0, 1), "bucket": number}

        def batch_group_criterion(self, sample: dict[str, Any]) -> tuple[int, int]:
            return sample["bucket"], batch

        def batch(self, samples: list[dict[str, Any]]) -> Any:
            return torch.from_numpy(np.stack([sample["image"] for sample in samples]))

        def encode_batch(self, images: Any) -> Any:
            return images

    dataset = get_train_dataset(
        folder,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=None,  # the groups' own batch size
        shuffle_buffer_size=100,
        max_samples_per_sequence=100,
        task_encoder=CoverEncoder(),
        repeat=False,  # one epoch
    )
    for images in get_loader(dataset):
        yield len(images)


def main() -> None:
    method, folder, pixels, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    buckets = Buckets.from_budget(pixels, crop="random")
    loaders = {"stoker": stoker_batches, "stoker-shards": stoker_batches, "handwritten": handwritten_batches, "energon": energon_batches}
    batches = loaders[method](folder, buckets, batch)
    started = time.perf_counter()
    samples = steps = full = 0
    for count in batches:
        samples += count
        steps += 1
        full += count == batch
    print(json.dumps({"samples": samples, "batches": steps, "full": full, "seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
