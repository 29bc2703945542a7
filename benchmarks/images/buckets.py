"""Batching by aspect ratio, side by side in one run: a folder of JPEGs in 24 aspect ratios (from
4:1 tall to 4:1 wide) and sizes (the longer side 256 to 2048 px), into uint8 CHW batches of one
bucket each (SDXL's scheme at ``--pixels``, sides multiples of 64), each loader in a process of
its own (`stoker_testbed.peers.bucket_peers`):

- stoker: ``Loader(folder, transform=ImageTransform(layout="CHW"), sampling=Sampling(buckets=...))``;
- the hand-written bucket sampler of the diffusion trainers (diffusers, kohya-ss): sizes read by
  Pillow from the headers, a ``batch_sampler`` of per-bucket batches, Pillow decode, a bilinear
  resize to cover the bucket and a random crop, in a PyTorch DataLoader with 2 workers;
- Megatron-Energon (Megatron's multimodal loader), which reads WebDataset shards its own
  ``energon prepare`` has indexed: the same images written as shards, a task encoder doing the
  same Pillow decode, cover and crop, and Energon's grouping (``batch_group_criterion``) batching
  by bucket, with 2 workers; and stoker over those same shards.

Each times the epoch from building the loader (stoker's size scan included; ``energon prepare``,
a one-time step, not) to its last batch.
Reported: images/s and the ratio; the share of the pixels the crops keep (the same rule for
both); the share of batches that are full (a short batch is a different shape for the model and
a recompile for a compiled one); each rank's steps with 3 ranks (stoker's dealing against the
batches split ``batches[rank::3]``, as a hand-written sampler shards them); and, for stoker, an
epoch stopped after a third of its batches and resumed from ``state_dict``: samples repeated
and lost. Energon's steps per rank and resume are not measured here (its groups fill per worker
as samples stream in, so a rank's step count is what its stream gives).

Run:  python benchmarks/images/buckets.py [--count 480] [--pixels 262144] [--batch 8]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from stoker.bench import natural_image, require_optimized_core
from stoker.sampling import BucketOrder, Buckets, Sampler

RATIOS = np.exp(np.linspace(np.log(1 / 4), np.log(4), 24))


def write_images(folder: Path, count: int, seed: int = 0) -> list[tuple[int, int]]:
    """``count`` JPEGs of the 24 ratios, the longer side 256 to 2048 px, in one class folder (an
    ImageFolder); their (width, height)."""
    from PIL import Image

    generator = np.random.default_rng(seed)
    folder = folder / "photos"
    folder.mkdir(parents=True, exist_ok=True)
    sizes = []
    for index in range(count):
        ratio, longer = RATIOS[index % len(RATIOS)], int(generator.integers(256, 2049))
        width, height = (longer, max(16, round(longer / ratio))) if ratio >= 1 else (max(16, round(longer * ratio)), longer)
        Image.fromarray(natural_image(generator, width, height)).save(folder / f"{index:06d}.jpg", quality=85)
        sizes.append((width, height))
    return sizes


def write_shards(folder: Path, shards: Path) -> str | None:
    """The images as WebDataset shards indexed by ``energon prepare``; None, or why Energon cannot
    run here."""
    from stoker_testbed.data.peer_formats import write_webdataset

    paths = sorted((folder / "photos").glob("*.jpg"))
    write_webdataset(shards, [(path.read_bytes(), 0) for path in paths], shard_bytes=32 << 20)
    energon = Path(sys.executable).with_name("energon")
    if not energon.exists():
        return "Megatron-Energon is not installed (pip install megatron-energon)"
    command = [str(energon), "prepare", str(shards), "--non-interactive", "--split-ratio", "1,0,0", "--no-progress"]
    command += ["--sample-type", "ImageSample", "--field-map", '{"image": "jpg"}']
    prepared = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return None if prepared.returncode == 0 else f"energon prepare failed: {prepared.stderr.strip()[-300:]}"


def run(method: str, folder: Path, pixels: int, batch: int) -> dict[str, Any]:
    """One epoch of ``method`` in a process of its own: its JSON line, with ``cpu_seconds``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "stoker_testbed.peers.bucket_peers", method, str(folder), str(pixels), str(batch)]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=3600, env=os.environ.copy())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(finished.stderr[-2000:])
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    result["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def resume_check(folder: Path, buckets: Buckets, batch: int) -> tuple[int, int]:
    """stoker stopped after a third of an epoch and resumed from its state: (repeated, lost)."""
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.ops import ImageTransform

    options: dict[str, Any] = {"batch_size": batch, "transform": ImageTransform(), "sampling": Sampling(seed=3, buckets=buckets)}
    whole = Loader(str(folder), **options)
    expected = Counter(key for images in whole for key in images.keys)
    whole.close()
    first = Loader(str(folder), **options)
    seen: Counter[str] = Counter()
    for number, images in enumerate(first):
        seen.update(images.keys)
        if number + 1 >= sum(expected.values()) // batch // 3:
            break
    state = first.state_dict()
    first.close()
    resumed = Loader(str(folder), **options)
    resumed.load_state_dict(state)
    seen.update(key for images in resumed for key in images.keys)
    resumed.close()
    return sum(count - 1 for count in seen.values() if count > 1), sum(1 for key in expected if key not in seen)


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=480, help="images")
    parser.add_argument("--pixels", type=int, default=512 * 512, help="a bucket's pixel budget")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    buckets = Buckets.from_budget(args.pixels, crop="random")
    with tempfile.TemporaryDirectory(prefix="stoker-buckets-") as scratch:
        os.environ["STOKER_CACHE"] = str(Path(scratch) / "cache")
        folder = Path(scratch) / "images"
        sizes = write_images(folder, args.count)
        widths, heights = np.array([width for width, _ in sizes]), np.array([height for _, height in sizes])
        assigned = buckets.assign(widths, heights)
        kept = float(np.nanmean(buckets.kept_area(widths, heights, assigned)))
        square = float(np.nanmean(Buckets([(512, 512)]).kept_area(widths, heights, np.zeros(len(sizes), dtype=np.int16))))
        print(f"{args.count} JPEGs in {len(RATIOS)} aspect ratios written; {len(buckets)} buckets", file=sys.stderr, flush=True)
        ours, theirs = run("stoker", folder, args.pixels, args.batch), run("handwritten", folder, args.pixels, args.batch)
        shards = Path(scratch) / "shards"
        energon_missing = write_shards(folder, shards)
        ours_shards = run("stoker-shards", shards, args.pixels, args.batch)
        energon = run("energon", shards, args.pixels, args.batch) if energon_missing is None else None
        counts = np.bincount(assigned[assigned >= 0], minlength=len(buckets))
        their_batches = int(sum(-(-count // args.batch) for count in counts))
        their_full = int(sum(count // args.batch for count in counts))
        steps = []
        for rank in range(3):
            sampler = Sampler(args.count, seed=0, rank=rank, world_size=3, buckets=(assigned, len(buckets)), batch_size=args.batch)
            steps.append(sampler.plan_arrays().size // args.batch)
        their_steps = [len(range(rank, their_batches, 3)) for rank in range(3)]
        left_over = BucketOrder(assigned, len(buckets), batch_size=args.batch, seed=0, epoch=0, ranks=1).leftovers()
        repeated, lost = resume_check(folder, buckets, args.batch)
    rate, peer_rate = ours["samples"] / ours["seconds"], theirs["samples"] / theirs["seconds"]
    print(f"\n{'loader':<14} {'images/s':>9} {'CPU ms/image':>13} {'batches':>8} {'full batches':>13} {'steps per rank (3)':>19}")
    print(
        f"{'stoker':<14} {rate:9.1f} {1e3 * ours['cpu_seconds'] / ours['samples']:13.1f} {ours['batches']:8d} {'100%':>13} {str(steps):>19}"
    )
    print(
        f"{'hand-written':<14} {peer_rate:9.1f} {1e3 * theirs['cpu_seconds'] / theirs['samples']:13.1f} {theirs['batches']:8d} "
        f"{their_full / their_batches:13.0%} {str(their_steps):>19}"
    )
    shard_rate = ours_shards["samples"] / ours_shards["seconds"]
    print(
        f"{'stoker, shards':<14} {shard_rate:9.1f} {1e3 * ours_shards['cpu_seconds'] / ours_shards['samples']:13.1f} {ours_shards['batches']:8d} {'100%':>13}"
    )
    if energon is not None:
        energon_rate = energon["samples"] / energon["seconds"]
        print(
            f"{'Energon':<14} {energon_rate:9.1f} {1e3 * energon['cpu_seconds'] / energon['samples']:13.1f} {energon['batches']:8d} "
            f"{energon['full'] / energon['batches']:13.0%} {'not measured':>19}"
        )
    print(f"\nratio: {rate / peer_rate:.2f}x the hand-written sampler (both over the folder)", end="")
    print(
        f"; {shard_rate / energon_rate:.2f}x Energon (both over the shards)"
        if energon is not None
        else f"; Energon left out: {energon_missing}"
    )
    print(f"pixels kept by the bucket crops {kept:.1%} (a 512x512 centre crop would keep {square:.1%})")
    print(f"stoker stopped after a third of an epoch and resumed: {repeated} samples repeated, {lost} lost")
    print(f"bucket histogram (samples per bucket): {dict(zip([f'{h}x{w}' for h, w in buckets.shapes], counts.tolist()))}")
    print(f"stoker's leftovers this epoch (dropped and counted; leftovers='carry' reads them next epoch): {left_over.tolist()}")


if __name__ == "__main__":
    main()
