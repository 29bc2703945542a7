"""The bounded JSON reader (`stoker._bounded.parse_json`) against the standard library's
``json.loads`` it wraps, and against orjson and msgspec where installed, on the largest JSON stoker
reads on a hot path: an MDS ``index.json`` and a LitData ``index.json`` of many shards, a tar
shard's index of JSON form (versions 1 and 2), an object store's ``dataset.json`` listing every
sample, a Loader state with mixture changes, and JSON Lines documents parsed one at a time (the
text path, per document).

Each is parsed ``--repeat`` times, the parsers taking turns; each one's best time is kept (the
machine is shared). Reported: MB/s of each parser and the ratio bounded / stdlib (1.00: no cost).

Run:  python benchmarks/storage/json_reader.py [--shards 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from typing import Any

from stoker._bounded import parse_json


def mds_index(shards: int) -> bytes:
    entry = {
        "column_encodings": ["jpeg", "int"],
        "column_names": ["image", "label"],
        "column_sizes": [None, 8],
        "compression": "zstd:7",
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": "", "bytes": 67108588, "hashes": {}},
        "samples": 1234,
        "size_limit": 67108864,
        "version": 2,
        "zip_data": {"basename": "", "bytes": 41234567, "hashes": {}},
    }
    listed = []
    for number in range(shards):
        entry["raw_data"] = {**entry["raw_data"], "basename": f"shard.{number:05d}.mds"}  # type: ignore[dict-item]
        entry["zip_data"] = {**entry["zip_data"], "basename": f"shard.{number:05d}.mds.zstd"}  # type: ignore[dict-item]
        listed.append(dict(entry))
    return json.dumps({"shards": listed, "version": 2}).encode()


def litdata_index(chunks: int) -> bytes:
    spec = json.dumps([1, {"type": "builtins.dict", "context": json.dumps(["image", "label"]), "children_spec": [{}, {}]}])
    listed = [{"chunk_bytes": 67108000, "chunk_size": 5000, "filename": f"chunk-0-{number}.bin", "dim": None} for number in range(chunks)]
    config = {"chunk_bytes": 67108864, "chunk_size": None, "compression": None, "data_format": ["jpeg", "int"], "data_spec": spec}
    return json.dumps({"chunks": listed, "config": config, "updated_at": "1700000000.0"}).encode()


def tar_index(samples: int) -> bytes:
    listed = [
        {
            "key": f"n01440764/img_{number:07d}",
            "members": {"jpg": [1536 + number * 112640, 110203], "cls": [112640 + number * 112640, 1]},
            "label": number % 1000,
            "crc32": {"jpg": 2914201913, "cls": 2212294583},
        }
        for number in range(samples)
    ]
    return json.dumps(
        {
            "format": "stoker.tar-index",
            "version": 2,
            "shard": {"name": "shard-000000.tar", "size": 1 << 40},
            "label_key": None,
            "samples": listed,
        }
    ).encode()


def object_manifest(samples: int) -> bytes:
    listed = [[f"train/n{number % 1000:08d}/img_{number:08d}.JPEG", number % 1000] for number in range(samples)]
    return json.dumps(
        {"format": "stoker.objects", "version": 1, "classes": [f"n{number:08d}" for number in range(1000)], "samples": listed}
    ).encode()


def loader_state(changes: int) -> bytes:
    change = {"weights": {"web": 0.7, "books": 0.2, "code": 0.1}, "delivered_record": [[0, 4096], [8192, 12288]]}
    return json.dumps(
        {"version": 1, "sampler": {"epoch": 3, "positions": [[0, 1 << 20]]}, "mixture": {"epoch": 3, "changes": [change] * changes}}
    ).encode()


def documents(count: int) -> list[bytes]:
    text = "The quick brown fox jumps over the lazy dog. " * 40
    return [json.dumps({"id": number, "text": text, "meta": {"source": "web", "score": 0.5}}).encode() for number in range(count)]


def best_of(parsers: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Each parser's best time over ``repeat`` rounds, the parsers taking turns within a round
    (a shared machine's load then weighs on all of them alike)."""
    times: dict[str, list[float]] = {name: [] for name in parsers}
    for _ in range(repeat):
        for name, function in parsers.items():
            gc.collect()
            gc.disable()  # as timeit: the collector's passes over millions of new objects are noise here
            started = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - started)
            gc.enable()
    return {name: min(found) for name, found in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    arguments = parser.parse_args()
    parsers: dict[str, Callable[[bytes], Any]] = {
        "json.loads": json.loads,
        "parse_json": lambda data: parse_json(data, "bench", max_bytes=1 << 31),
    }
    try:
        import orjson

        parsers["orjson"] = orjson.loads
    except ImportError:
        pass
    try:
        import msgspec

        parsers["msgspec"] = msgspec.json.decode
    except ImportError:
        pass
    inputs = {
        f"MDS index.json, {arguments.shards:,} shards": mds_index(arguments.shards),
        f"LitData index.json, {arguments.shards:,} chunks": litdata_index(arguments.shards),
        f"tar index (JSON, v2), {arguments.shards:,} samples": tar_index(arguments.shards),
        f"dataset.json, {10 * arguments.shards:,} objects": object_manifest(10 * arguments.shards),
        "Loader state, 10,000 mixture changes": loader_state(10_000),
    }
    names = list(parsers)
    print(f"{'input':48s} {'MB':>7s} " + " ".join(f"{name + ' MB/s':>16s}" for name in names) + f" {'bounded/stdlib':>15s}")
    for label, data in inputs.items():
        seconds = best_of({name: lambda parse=parse, data=data: parse(data) for name, parse in parsers.items()}, arguments.repeat)
        speeds = {name: len(data) / seconds[name] / 1e6 for name in parsers}
        print(
            f"{label:48s} {len(data) / 1e6:7.1f} "
            + " ".join(f"{speeds[name]:16.0f}" for name in names)
            + f" {speeds['parse_json'] / speeds['json.loads']:15.2f}"
        )
    docs = documents(20_000)
    total = sum(len(doc) for doc in docs)
    seconds = best_of({name: lambda parse=parse: [parse(doc) for doc in docs] for name, parse in parsers.items()}, arguments.repeat)
    speeds = {name: total / seconds[name] / 1e6 for name in parsers}
    label = f"JSON Lines, {len(docs):,} documents one at a time"
    print(
        f"{label:48s} {total / 1e6:7.1f} "
        + " ".join(f"{speeds[name]:16.0f}" for name in names)
        + f" {speeds['parse_json'] / speeds['json.loads']:15.2f}"
    )


if __name__ == "__main__":
    main()
