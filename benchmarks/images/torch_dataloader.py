"""`stoker.torch.DataLoader` against torch's DataLoader on the datasets torch users write: the same
script, the import line changed. Map-style datasets, 4 workers (``--workers``), shuffle, one epoch each.

Rows (issue 38's table):
- cheap: 3M items (index -> int), batch 1024;
- python: 20k items of ~100 us pure Python (holds the GIL), batch 64;
- latency: 1,280 items of 20 ms latency (a remote read), batch 32;
- memory: 3M Python strings read by the workers: summed PSS of the loader's processes over the
  dataset's own size (torch's copy-on-read growth, its issue #13246);
- images: 3,000 JPEGs through torchvision's ImageFolder with RandomResizedCrop, flip and
  normalize, batch 64.

Loaders: torch (its defaults: fork worker processes), stoker (its defaults), stoker with
``worker_kind="threads"`` (the documented choice for a large in-memory dataset). Each measurement
runs in a process of its own (so memory is the loader's alone), the loaders take turns each
round, and the median of the rounds is reported with its ratio to torch.

Targets: stoker's default >= 0.95x torch on every speed row, >= 5x on latency; memory: threads
within 1.3x of the dataset's own size, the default never above torch.

``--against REF`` pairs the working tree with an earlier commit in the same run: stoker's Python
package at REF (``git archive``, this checkout's history) runs over this build's native modules
as ``stoker@REF`` and ``stoker threads@REF``, taking turns with the others, so a regression of the
drop-in shows as a ratio before it lands. (The drop-in is Python; a REF whose Python calls a native
function this build lacks fails by name in its cells.) ``--loaders`` picks which loaders run.

Run:  python benchmarks/images/torch_dataloader.py [--rounds 3] [--rows cheap,python,latency,memory,images] [--quick]
      [--against REF] [--loaders torch,stoker,"stoker threads"] [--workers 4]

``--quick`` (what the tests run) is a 1/100 scale, one round, with 2 workers: it checks that every
row runs, and measures nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROWS = ("cheap", "python", "latency", "memory", "images")
LOADERS = ("torch", "stoker", "stoker threads")
WORKERS = 4  # the default; --quick runs 2


class Cheap:
    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index


class PurePython(Cheap):
    """About 100 us of pure-Python work an item (it holds the GIL throughout)."""

    def __getitem__(self, index: int) -> int:
        total = index
        for step in range(700):
            total = (total * 31 + step) % 1_000_003
        return total


class Remote(Cheap):
    """20 ms of latency an item, as a read from object storage."""

    def __getitem__(self, index: int) -> int:
        time.sleep(0.02)
        return index


class Strings(Cheap):
    """3M Python strings held in a list, as a tokenized corpus or a file list often is."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.strings = [f"sample-{index:09d}" for index in range(size)]

    def __getitem__(self, index: int) -> int:
        return len(self.strings[index])


def _pss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        return next(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))


def _loader(name: str, dataset: Any, batch_size: int, workers: int, **options: Any) -> Any:
    if name == "torch":
        from torch.utils.data import DataLoader

        return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, **options)
    from stoker.torch import DataLoader as StokerDataLoader

    kind = "threads" if name == "stoker threads" else "processes"
    return StokerDataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, worker_kind=kind, **options)  # type: ignore[arg-type]


def measure(row: str, name: str, scale: float, images: str, workers: int = WORKERS) -> dict[str, Any]:
    """One epoch of one row by one loader, in this process: items/s, or the memory ratio."""
    import multiprocessing

    import torch

    import stoker
    import stoker.torch  # noqa: F401 - imported before any memory is measured, whichever loader runs

    sizes = {"cheap": 3_000_000, "python": 20_000, "latency": 1_280, "memory": 3_000_000}
    batch_sizes = {"cheap": 1024, "python": 64, "latency": 32, "memory": 1024, "images": 64}
    if row == "images":
        from torchvision import datasets, transforms

        augment = transforms.Compose(
            [
                transforms.RandomResizedCrop(224),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ]
        )
        dataset: Any = datasets.ImageFolder(images, augment)
    elif row == "memory":
        before = _pss_kib(os.getpid())
        dataset = Strings(int(sizes[row] * scale))
        dataset_kib = _pss_kib(os.getpid()) - before
    else:
        dataset = {"cheap": Cheap, "python": PurePython, "latency": Remote}[row](max(workers * 64, int(sizes[row] * scale)))
    persistent = {"persistent_workers": True} if row == "memory" else {}  # workers stay to be measured
    loader = _loader(name, dataset, batch_sizes[row], workers, **persistent)
    started = time.perf_counter()
    items = 0
    for batch in loader:
        items += len(batch[0]) if isinstance(batch, (list, tuple)) else len(batch)
    seconds = time.perf_counter() - started
    if row != "memory":
        return {"value": items / seconds, "stoker": stoker.__file__}
    pids = [os.getpid()] + [child.pid for child in multiprocessing.active_children() if child.pid is not None]
    summed = sum(_pss_kib(pid) for pid in pids) - before
    del loader, torch
    return {"value": summed / dataset_kib, "stoker": stoker.__file__}


def _run_one(row: str, name: str, scale: float, images: str, earlier: Path | None, workers: int) -> float | str:
    """One measurement in a process of its own; a ``name@REF`` loader imports stoker from ``earlier``."""
    loader, _, ref = name.partition("@")
    command = [sys.executable, __file__, "--one", row, loader, "--scale", str(scale), "--images", images, "--workers", str(workers)]
    environment = dict(os.environ)
    if ref:
        assert earlier is not None
        environment["PYTHONPATH"] = os.pathsep.join([str(earlier), *filter(None, [environment.get("PYTHONPATH")])])
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=environment)
    if done.returncode != 0:
        return f"failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if ref and earlier is not None and not Path(result["stoker"]).resolve().is_relative_to(earlier.resolve()):
        return f"failed: stoker came from {result['stoker']}, not {ref}"  # the pairing would compare a build with itself
    return float(result["value"])


def _earlier_package(ref: str, into: Path) -> Path:
    """stoker's Python package as it was at ``ref``, over this build's native modules: the folder
    to put first on PYTHONPATH.

    Raises:
        SystemExit: Not a git checkout, or ``ref`` is not a commit of it (git's words).
    """
    import stoker

    root = Path(__file__).resolve().parents[2]
    if ref.startswith("-"):  # git would read it as an option
        raise SystemExit(f"--against {ref}: not a commit (a commit, branch or tag name does not start with '-')")
    resolved = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], capture_output=True, text=True, timeout=60
    )
    if resolved.returncode != 0:
        raise SystemExit(f"--against {ref}: not a commit of {root}")
    commit = resolved.stdout.strip()
    done = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit, "python/stoker"], capture_output=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"--against {ref}: {done.stderr.decode(errors='replace').strip() or 'git archive failed'}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        # The "data" filter (no links out, no devices) where this Python has it (3.10.12+, 3.11.4+).
        if hasattr(tarfile, "data_filter"):
            archive.extractall(into, filter="data")
        else:  # the archive is this checkout's own files
            archive.extractall(into)
    package, built = into / "python" / "stoker", Path(stoker.__file__).parent
    for native in built.rglob("*.so"):  # the native modules the archive cannot hold
        target = package / native.relative_to(built)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(native, target)
    return into / "python"


def _make_images(directory: Path, count: int) -> None:
    from stoker.bench import iter_jpegs

    for index, data in enumerate(iter_jpegs(count, 500, 375, 0)):
        folder = directory / f"class_{index % 10:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{index:07d}.jpg").write_bytes(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--quick", action="store_true", help="a 1/100 scale, one round, 2 workers: checks that it runs")
    parser.add_argument("--workers", type=int, help=f"worker processes or threads per loader (default {WORKERS}; 2 with --quick)")
    parser.add_argument("--against", metavar="REF", help="also run stoker's Python package as it was at this commit")
    parser.add_argument("--loaders", default=",".join(LOADERS), help="which of torch, stoker, 'stoker threads' run")
    parser.add_argument("--one", nargs=2, metavar=("ROW", "LOADER"), help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--images", default="", help="an ImageFolder to use (default: 3,000 JPEGs made here)")
    args = parser.parse_args()
    workers = args.workers if args.workers is not None else 2 if args.quick else WORKERS
    if not 1 <= workers <= 64:
        parser.error(f"--workers takes 1 to 64, got {workers}")
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1], args.scale, args.images, workers)))
        return
    scale, rounds = (0.01, 1) if args.quick else (1.0, args.rounds)
    rows = [row for row in args.rows.split(",") if row]
    loaders = [name for name in args.loaders.split(",") if name]
    unknown = sorted(set(rows) - set(ROWS)) + sorted(set(loaders) - set(LOADERS))
    if unknown or not rows or not loaders:
        parser.error(f"rows are among {', '.join(ROWS)}, loaders among {', '.join(LOADERS)}; got {unknown or 'none'}")
    if args.against is not None:
        if not 0 < len(args.against) <= 255:
            parser.error("--against takes a commit, branch or tag name (1 to 255 characters)")
        if loaders == ["torch"]:
            parser.error("--against pairs stoker's loaders with an earlier commit: give --loaders at least one of stoker's")
        loaders += [f"{name}@{args.against}" for name in loaders if name != "torch"]
    if "images" in rows and importlib.util.find_spec("torchvision") is None:
        rows.remove("images")
        print("images: left out (it reads through torchvision's ImageFolder: pip install torchvision)")
    with tempfile.TemporaryDirectory(prefix="stoker-torch-bench-") as scratch:
        earlier = _earlier_package(args.against, Path(scratch) / "earlier") if args.against is not None else None
        images = args.images
        if "images" in rows and not images:
            images = str(Path(scratch) / "images")
            _make_images(Path(images), max(workers * 64, int(3000 * scale)))
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores), {rounds} round(s), {workers} workers a loader")
        results: dict[str, dict[str, list[float | str]]] = {row: {name: [] for name in loaders} for row in rows}
        for round_number in range(rounds):
            for row in rows:
                order = loaders if round_number % 2 == 0 else list(reversed(loaders))
                for name in order:
                    results[row][name].append(_run_one(row, name, scale, images, earlier, workers))
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    _report(results, loaders, args.against)


def _report(results: dict[str, dict[str, list[float | str]]], loaders: list[str], against: str | None) -> None:
    print(f"\n| row | {' | '.join(loaders)} |\n|---|{'---|' * len(loaders)}")
    pairs: list[str] = []
    for row, by_loader in results.items():
        medians: dict[str, float | str] = {}
        for name, values in by_loader.items():
            numbers = [value for value in values if isinstance(value, float)]
            medians[name] = statistics.median(numbers) if len(numbers) == len(values) else str(values[-1])
        cells = []
        for name in loaders:
            value, reference = medians[name], medians.get("torch")
            if isinstance(value, str):
                cells.append(value)
            elif row == "memory":
                cells.append(f"{value:.2f}x the dataset")
            elif isinstance(reference, float):
                cells.append(f"{value:,.0f}/s ({value / reference:.2f}x)")
            else:
                cells.append(f"{value:,.0f}/s")
            earlier = medians.get(f"{name}@{against}")
            if against and isinstance(value, float) and isinstance(earlier, float) and row != "memory":
                pairs.append(f"{row}, {name}: the working tree at {value / earlier:.2f}x {against}")
        print(f"| {row} | {' | '.join(cells)} |")
    for pair in pairs:
        print(pair)


if __name__ == "__main__":
    main()
