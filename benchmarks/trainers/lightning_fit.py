"""Lightning's ``Trainer.fit`` fed by its usual loader and by stoker, the same model, data and
output, one epoch each: what a Lightning user gains by changing the DataModule.

The image recipe: a folder of JPEGs (ImageFolder layout, 500x375), RandomResizedCrop(224) and a
horizontal flip, float32 CHW normalized with ImageNet's mean and std, batches of 64, shuffled.
The model is a small one (a 4x4 average pool and a linear layer) so that the loader, not the
model, sets the pace, as on an accelerator that waits for data. Loaders:

- **DataLoader**: a LightningDataModule returning torch's DataLoader over torchvision's
  ImageFolder and transforms, ``num_workers`` = the cores, persistent workers (what Lightning's
  own docs and warnings lead a user to);
- **stoker**: `stoker.lightning.StokerDataModule` over the same folder, its defaults.

Each fit runs in a process of its own; rounds alternate the loaders and each one's median
images/s (from ``fit``'s start to its end, Lightning's own overhead included) is reported with
the ratio.

Run:  python benchmarks/trainers/lightning_fit.py [--count 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LOADERS = ("DataLoader", "stoker")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH = 64


def fit_once(loader: str, root: Path) -> float:
    """One epoch of ``Trainer.fit`` over ``root`` with ``loader``: images/s."""
    import lightning as L
    import torch

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(3 * 56 * 56, 10)

        def training_step(self, batch: Any, batch_index: int) -> torch.Tensor:
            images, labels = (batch["data"], batch["labels"]) if isinstance(batch, dict) else batch
            pooled = torch.nn.functional.avg_pool2d(images, 4).flatten(1)
            return torch.nn.functional.cross_entropy(self.layer(pooled), labels)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data: Any
    if loader == "stoker":
        from stoker.lightning import StokerDataModule
        from stoker.loader import Sampling
        from stoker.ops import ImageTransform

        transform = ImageTransform(random_resized_crop=224, flip_probability=0.5, layout="CHW", dtype="float32", mean=MEAN, std=STD)
        data = StokerDataModule(root, batch_size=BATCH, transform=transform, sampling=Sampling(seed=0))
    else:
        from torchvision import datasets, transforms

        augment = transforms.Compose(
            [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
        )

        class Folder(L.LightningDataModule):
            def train_dataloader(self) -> Any:
                dataset = datasets.ImageFolder(str(root), augment)
                workers = len(os.sched_getaffinity(0))
                return torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=workers, persistent_workers=True)

        data = Folder()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    started = time.perf_counter()
    trainer.fit(Model(), datamodule=data)
    seconds = time.perf_counter() - started
    return sum(1 for _ in root.glob("*/*.jpg")) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000, help="JPEGs in the folder (made once, cached)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", nargs=2, metavar=("LOADER", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps({"images_per_second": fit_once(args.one[0], Path(args.one[1]))}))
        return
    from stoker.bench import image_folder

    root = image_folder(args.count, progress=True)
    rates: dict[str, list[float]] = {name: [] for name in LOADERS}
    for _ in range(args.rounds):
        for name in LOADERS:
            run = subprocess.run([sys.executable, __file__, "--one", name, str(root)], capture_output=True, text=True, timeout=1800)
            if run.returncode != 0:
                raise SystemExit(f"{name} failed:\n{run.stderr[-3000:]}")
            rates[name].append(json.loads(run.stdout.strip().splitlines()[-1])["images_per_second"])
    cores = len(os.sched_getaffinity(0))
    print(
        f"Lightning Trainer.fit, one epoch of {args.count:,} JPEGs (500x375 -> RandomResizedCrop 224, flip, float32), batch {BATCH}, {cores} cores"
    )
    print("| loader | images/s (median of rounds) | vs DataLoader |")
    print("|---|---:|---:|")
    base = statistics.median(rates["DataLoader"])
    for name in LOADERS:
        median = statistics.median(rates[name])
        print(f"| {name} | {median:,.0f} ({', '.join(f'{rate:,.0f}' for rate in rates[name])}) | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
