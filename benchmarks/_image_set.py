"""A cached folder of generated JPEGs, shared by the benchmarks (generating 3000 takes minutes)."""

from __future__ import annotations

import os
from pathlib import Path

from stoker.bench import make_jpegs

CACHE = Path(os.environ.get("STOKER_CACHE", Path.home() / ".cache" / "stoker"))


def image_set(count: int, width: int = 500, height: int = 375, seed: int = 0) -> list[bytes]:
    """``count`` natural-looking JPEGs, generated once into the cache, then read back."""
    folder = CACHE / "bench-images" / f"{width}x{height}-seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{index:07d}.jpg" for index in range(count)]
    missing = [index for index, path in enumerate(paths) if not path.exists()]
    if missing:
        print(f"generating {len(missing)} JPEGs of {width}x{height} into {folder} ...", flush=True)
        # Generate from the first missing index so a partial cache is completed consistently.
        start = missing[0]
        for offset, data in enumerate(make_jpegs(count - start, width, height, seed + start)):
            temporary = paths[start + offset].with_suffix(".part")
            temporary.write_bytes(data)
            temporary.rename(paths[start + offset])
    return [path.read_bytes() for path in paths]
