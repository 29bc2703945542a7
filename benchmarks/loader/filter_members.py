"""A filter over the fields of WebDataset ``json`` members (``Sampling(where=...)`` over tar
shards that keep each sample's metadata beside it, as LAION-style datasets do), side by side with
WebDataset's own way to filter: ``.select(predicate)`` on its pipeline.

stoker reads every sample's ``json`` member once, when the first Loader with the filter is made
(coalesced reads per shard; the payloads are not read), and keeps the fields in its cache folder:
a later Loader (the next run, a resume) reads no member. WebDataset evaluates its predicate per
sample as it streams each epoch, so its filter costs a pass over the shards every epoch (the
payloads here are 16 bytes, so that pass is mostly the members). Each side runs in a child
process of its own over the same shards; stoker's side also reports its index build (the first
open of the shards, once per dataset) apart from the filter.

Run:  python benchmarks/loader/filter_members.py [--samples 1e6] [--peers stoker,webdataset]
"""

from __future__ import annotations

import argparse
import io
import json
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from stoker_testbed.children import run_sides
from stoker_testbed.memory import peak_mib, resident_mib

EXPRESSION = "aesthetic >= 5.5 and meta.language == 'en'"
PER_SHARD = 100_000


def write_shards(folder: Path, samples: int) -> list[Path]:
    """Tar shards of ``samples`` samples: a 16-byte payload and a json member each."""
    generator = np.random.default_rng(0)
    scores = generator.uniform(0, 10, samples).round(2)
    languages = np.array(["en", "de", "fr", "ja"])[generator.integers(0, 4, samples)]
    paths = []
    for start in range(0, samples, PER_SHARD):
        path = folder / f"shard-{start // PER_SHARD:05d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for index in range(start, min(start + PER_SHARD, samples)):
                document = json.dumps({"aesthetic": float(scores[index]), "meta": {"language": str(languages[index])}}).encode()
                for extension, data in (("bin", index.to_bytes(16, "little")), ("json", document)):
                    info = tarfile.TarInfo(f"{index:09d}.{extension}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        paths.append(path)
    return paths


def run_stoker(paths: list[str]) -> dict[str, Any]:
    from stoker import Loader, Sampling
    from stoker.storage import TarShardStorage

    started = time.perf_counter()
    storage = TarShardStorage(paths)
    indexed = time.perf_counter() - started
    before = resident_mib()
    timings = []
    for _ in range(2):  # the first reads the members; the second finds the columns in the cache
        started = time.perf_counter()
        loader = Loader(storage, batch_size=256, decode=lambda data: data, sampling=Sampling(where=EXPRESSION))
        timings.append(time.perf_counter() - started)
    kept = len(loader.storage)
    storage.close()
    return {"kept": kept, "index": indexed, "first": timings[0], "cached": timings[1], "mib": peak_mib() - before}


def run_webdataset(paths: list[str]) -> dict[str, Any]:
    import webdataset

    def keep(sample: dict[str, Any]) -> bool:
        document = sample["json"]
        return bool(document["aesthetic"] >= 5.5 and document["meta"]["language"] == "en")

    before = resident_mib()
    started = time.perf_counter()
    kept = sum(1 for _ in webdataset.WebDataset(paths, shardshuffle=False, empty_check=False).decode().select(keep))
    return {"kept": kept, "index": None, "first": time.perf_counter() - started, "cached": None, "mib": peak_mib() - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=float, default=1e6)
    parser.add_argument("--peers", default="stoker,webdataset")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--paths", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        paths = json.loads(arguments.paths)
        print(json.dumps((run_stoker if arguments.child == "stoker" else run_webdataset)(paths)))
        return
    samples = int(arguments.samples)
    with tempfile.TemporaryDirectory() as folder:
        paths = [str(path) for path in write_shards(Path(folder), samples)]
        environment = {"STOKER_CACHE": str(Path(folder) / "cache")}  # a cold cache: the first filter reads the members
        results = run_sides(__file__, arguments.peers.split(","), ["--paths", json.dumps(paths)], environment)
    print(f"filter {EXPRESSION!r} over the json members of {samples:,} samples")
    print("| loader | kept | index s (once per dataset) | filter s, first | filter s, cached | peak memory added MiB |")
    print("|---|---|---|---|---|---|")
    for peer, result in results.items():
        index = f"{result['index']:.2f}" if result["index"] is not None else "n/a"
        cached = f"{result['cached']:.3f}" if result["cached"] is not None else "every epoch again"
        print(f"| {peer} | {result['kept']:,} | {index} | {result['first']:.2f} | {cached} | {result['mib']:.0f} |")
    if {"stoker", "webdataset"} <= results.keys():
        first = results["webdataset"]["first"] / results["stoker"]["first"]
        cached = results["webdataset"]["first"] / results["stoker"]["cached"]
        print(
            f"stoker's filter is {first:.1f}x as fast as webdataset's select on first use, {cached:.0f}x from the cache (one process run)"
        )


if __name__ == "__main__":
    main()
