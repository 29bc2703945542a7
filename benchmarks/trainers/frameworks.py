"""Each trainer fed by its usual loader and by stoker: the same model, data and output, one epoch
each, what a user of that framework gains by changing the loader's lines.

The image recipe: a folder of JPEGs (ImageFolder layout, 500x375), RandomResizedCrop(224) and a
horizontal flip, float32 normalized with ImageNet's mean and std, batches of 64, shuffled. The
model is small (a 4x4 average pool and a linear layer) so that the loader, not the model, sets
the pace, as on an accelerator that waits for data. Per framework:

- **lightning**: ``Trainer.fit`` with a LightningDataModule returning torch's DataLoader over
  torchvision's ImageFolder and transforms (workers = cores, persistent), against
  `stoker.lightning.StokerDataModule`;
- **accelerate**: an Accelerate loop over ``accelerator.prepare(DataLoader(...))`` (the same
  DataLoader), against `stoker.accelerate.AcceleratedLoader`;
- **jax**: a jitted step fed by Grain's DataLoader (a data source of the files, a MapTransform
  decoding with Pillow and cropping in NumPy, as Grain's examples do; worker processes = cores),
  against `stoker.jax.global_batches`.

Each run is a process of its own; rounds alternate the loaders and each one's median images/s
(from building the loader, or ``fit``'s call, to the epoch's end: imports left out, the
framework's own overhead and the loaders' start-up, workers included, counted) is reported with
the ratio.

Run:  python benchmarks/trainers/frameworks.py [--count 2000] [--rounds 3] [--frameworks lightning,accelerate,jax]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FRAMEWORKS = {"lightning": ("lightning",), "accelerate": ("accelerate",), "jax": ("jax", "grain")}
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH = 64


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def _stoker_transform() -> Any:
    from stoker.ops import ImageTransform

    return ImageTransform(random_resized_crop=224, flip_probability=0.5, layout="CHW", dtype="float32", mean=MEAN, std=STD)


def _torch_loader(root: Path) -> Any:
    import torch
    from torchvision import datasets, transforms

    augment = transforms.Compose(
        [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    )
    dataset = datasets.ImageFolder(str(root), augment)
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=_cores(), persistent_workers=True)


def _torch_model() -> Any:
    import torch

    return torch.nn.Linear(3 * 56 * 56, 10)


def _torch_loss(model: Any, images: Any, labels: Any) -> Any:
    import torch

    return torch.nn.functional.cross_entropy(model(torch.nn.functional.avg_pool2d(images, 4).flatten(1)), labels)


def run_lightning(loader: str, root: Path) -> float:
    import lightning as L
    import torch

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = _torch_model()

        def training_step(self, batch: Any, batch_index: int) -> torch.Tensor:
            images, labels = (batch["data"], batch["labels"]) if isinstance(batch, dict) else batch
            return _torch_loss(self.layer, images, labels)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data: Any
    if loader == "stoker":
        from stoker.lightning import StokerDataModule
        from stoker.loader import Sampling

        data = StokerDataModule(root, batch_size=BATCH, transform=_stoker_transform(), sampling=Sampling(seed=0))
    else:

        class Folder(L.LightningDataModule):
            def train_dataloader(self) -> Any:
                return _torch_loader(root)

        data = Folder()
    options = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False, "enable_model_summary": False}
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=1, **options)
    started = time.perf_counter()
    trainer.fit(Model(), datamodule=data)
    return time.perf_counter() - started


def run_accelerate(loader: str, root: Path) -> float:
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    model = _torch_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches: Any
    started = time.perf_counter()
    if loader == "stoker":
        from stoker import Loader
        from stoker.accelerate import AcceleratedLoader
        from stoker.loader import Sampling

        batches = AcceleratedLoader(Loader(root, batch_size=BATCH, transform=_stoker_transform(), sampling=Sampling(seed=0)), accelerator)
        model, optimizer = accelerator.prepare(model, optimizer)
    else:
        model, optimizer, batches = accelerator.prepare(model, optimizer, _torch_loader(root))
    for batch in batches:
        images, labels = (batch["data"], batch["labels"]) if isinstance(batch, dict) else batch
        accelerator.backward(_torch_loss(model, images, labels))
        optimizer.step()
        optimizer.zero_grad()
    return time.perf_counter() - started


def run_jax(loader: str, root: Path) -> float:
    import jax
    import jax.numpy as jnp
    import numpy as np

    weights = jnp.zeros((3 * 56 * 56, 10))

    @jax.jit
    def step(weights: Any, images: Any, labels: Any) -> Any:
        def loss(weights: Any) -> Any:
            pooled = images.reshape(images.shape[0], 3, 56, 4, 56, 4).mean(axis=(3, 5)).reshape(images.shape[0], -1)
            logits = pooled @ weights
            return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(labels.shape[0]), labels])

        return weights - 0.01 * jax.grad(loss)(weights)

    started = time.perf_counter()
    if loader == "stoker":
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        from stoker import Loader
        from stoker.jax import global_batches
        from stoker.loader import Sampling

        sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
        stoker_loader = Loader(root, batch_size=BATCH, transform=_stoker_transform(), sampling=Sampling(seed=0))
        for batch in global_batches(stoker_loader, sharding):
            weights = step(weights, batch.data, batch.labels)
    else:
        import grain

        for images, labels in _grain_batches(root, grain):
            weights = step(weights, images, labels)
    weights.block_until_ready()
    return time.perf_counter() - started


def _grain_batches(root: Path, grain: Any) -> Any:
    """Grain's DataLoader over the folder: decode with Pillow, RandomResizedCrop and flip in NumPy."""
    files = sorted(root.glob("*/*.jpg"))
    classes = {name: index for index, name in enumerate(sorted({path.parent.name for path in files}))}
    records = [(str(path), classes[path.parent.name]) for path in files]

    class Decode(grain.transforms.RandomMap):  # type: ignore[misc]
        def random_map(self, record: tuple[str, int], rng: Any) -> tuple[Any, int]:
            import numpy as np
            from PIL import Image

            path, label = record
            with Image.open(path) as image:
                width, height = image.size
                scale, ratio = rng.uniform(0.08, 1.0), np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
                area = scale * width * height
                crop_width = int(min(width, round(np.sqrt(area * ratio))))
                crop_height = int(min(height, round(np.sqrt(area / ratio))))
                left, top = rng.integers(0, width - crop_width + 1), rng.integers(0, height - crop_height + 1)
                crop = image.convert("RGB").resize((224, 224), Image.BILINEAR, box=(left, top, left + crop_width, top + crop_height))
                pixels = np.asarray(crop, np.float32) / 255.0
            if rng.random() < 0.5:
                pixels = pixels[:, ::-1]
            pixels = (pixels - np.asarray(MEAN, np.float32)) / np.asarray(STD, np.float32)
            return np.ascontiguousarray(pixels.transpose(2, 0, 1)), label

    from absl import flags

    flags.FLAGS(sys.argv[:1])  # Grain's worker processes read absl flags, parsed by absl.app.run in a Grain program
    sampler = grain.samplers.IndexSampler(len(records), shuffle=True, seed=0, num_epochs=1, shard_options=grain.sharding.NoSharding())
    loader = grain.DataLoader(
        data_source=records, sampler=sampler, operations=[Decode(), grain.transforms.Batch(BATCH)], worker_count=_cores()
    )
    yield from loader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000, help="JPEGs in the folder (made once, cached)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--one", nargs=3, metavar=("FRAMEWORK", "LOADER", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        framework, loader, root = args.one
        seconds = {"lightning": run_lightning, "accelerate": run_accelerate, "jax": run_jax}[framework](loader, Path(root))
        print(json.dumps({"images_per_second": sum(1 for _ in Path(root).glob("*/*.jpg")) / seconds}))
        return
    from stoker.bench import image_folder

    root = image_folder(args.count, progress=sys.stderr.isatty())
    print(f"One epoch of {args.count:,} JPEGs (500x375 -> RandomResizedCrop 224, flip, float32), batch {BATCH}, {_cores()} cores")
    print("| framework | its usual loader, images/s | stoker, images/s | stoker vs usual |")
    print("|---|---:|---:|---:|")
    for framework in args.frameworks.split(","):
        missing = [name for name in FRAMEWORKS[framework] if importlib.util.find_spec(name) is None]
        if missing:
            print(f"| {framework} | left out: {', '.join(missing)} not installed | | |")
            continue
        rates: dict[str, list[float]] = {"usual": [], "stoker": []}
        for _ in range(args.rounds):
            for loader in rates:
                command = [sys.executable, __file__, "--one", framework, loader, str(root)]
                run = subprocess.run(command, capture_output=True, text=True, timeout=1800)
                if run.returncode != 0:
                    raise SystemExit(f"{framework} with the {loader} loader failed:\n{run.stderr[-3000:]}")
                rates[loader].append(json.loads(run.stdout.strip().splitlines()[-1])["images_per_second"])
        usual, ours = statistics.median(rates["usual"]), statistics.median(rates["stoker"])
        spread = {name: ", ".join(f"{rate:,.0f}" for rate in values) for name, values in rates.items()}
        print(f"| {framework} | {usual:,.0f} ({spread['usual']}) | {ours:,.0f} ({spread['stoker']}) | {ours / usual:.2f}x |")


if __name__ == "__main__":
    main()
