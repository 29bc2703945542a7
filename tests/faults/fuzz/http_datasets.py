"""The datasets the hostile HTTP server holds for the HTTP fuzz target and fault tests, small and
made without the peers' own writers: one object per sample, a tar shard with its sidecar, an MDS
shard compressed with zstd, a metrics page, and one object per sample under an S3 bucket's path
(the server answers path-style S3 GETs as it answers any GET)."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import zstandard

from stoker.ingest import convert_storage
from stoker.storage.remote import OBJECTS_FORMAT
from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.hostile_http import HostileHttpServer

__all__ = ["datasets", "publish"]


def publish(server: HostileHttpServer, folder: Path) -> None:
    """Put every dataset's honest files on ``server`` (``folder``: scratch space)."""
    for number in range(3):
        server.files[f"objects/s-{number}.jpg"] = hashlib.sha256(bytes([number])).digest() * (40 + 30 * number)
    convert_storage(dataset(6), folder / "shards", shard_size=1 << 20, progress=False, decode_check=False)
    for path in sorted((folder / "shards").iterdir()):
        server.files[f"shards/{path.name}"] = path.read_bytes()
    server.files.update(_mds([(hashlib.sha256(bytes([number])).digest() * number, number % 3) for number in range(6)]))
    objects = {f"bucket/data/{name}": data for name, data in server.files.items() if name.startswith("objects/")}
    manifest = {"format": OBJECTS_FORMAT, "samples": [[name.split("/", 2)[2], 0] for name in objects]}
    server.files.update({**objects, "bucket/data/dataset.json": json.dumps(manifest).encode()})
    server.files["metrics"] = b'# TYPE stoker_run_seconds_total counter\nstoker_run_seconds_total{rank="0"} 1.0\n'


def _mds(samples: list[tuple[bytes, int]]) -> dict[str, bytes]:
    """An MDS dataset of one zstd shard (columns ``image``: bytes, ``label``: int), as
    MosaicML's writer lays it out: its ``index.json`` and shard, by name under ``mds/``."""
    encoded = [struct.pack("<I", len(payload)) + payload + struct.pack("<q", label) for payload, label in samples]
    offsets = [4 + 4 * (len(encoded) + 1)]
    for sample in encoded:
        offsets.append(offsets[-1] + len(sample))
    raw = struct.pack(f"<I{len(offsets)}I", len(encoded), *offsets) + b"".join(encoded)
    zipped = zstandard.ZstdCompressor().compress(raw)
    shard = {
        "column_encodings": ["bytes", "int"],
        "column_names": ["image", "label"],
        "column_sizes": [None, 8],
        "compression": "zstd",
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": "shard.00000.mds", "bytes": len(raw), "hashes": {}},
        "samples": len(samples),
        "size_limit": 1 << 20,
        "version": 2,
        "zip_data": {"basename": "shard.00000.mds.zstd", "bytes": len(zipped), "hashes": {}},
    }
    return {"mds/index.json": json.dumps({"shards": [shard], "version": 2}).encode(), "mds/shard.00000.mds.zstd": zipped}


def datasets(server: HostileHttpServer) -> dict[str, tuple[str, list[str], dict[str, bytes]]]:
    """Each dataset's URL, what its errors may name, and the files its open and reads request
    (the plans' targets), by the name the HTTP worker knows it by."""
    files = server.files
    shard = next(name for name in files if name.startswith("shards/") and name.endswith(".tar"))

    def under(folder: str) -> dict[str, bytes]:
        return {name: data for name, data in files.items() if name.startswith(folder)}

    home = [server.home]
    return {
        "objects": (server.url("objects/s-{0..2}.jpg"), home, under("objects/")),
        "shards": (server.url(shard), home, {shard: files[shard], shard + ".idx": files[shard + ".idx"]}),
        "mds": (server.url("mds/"), home, {**under("mds/"), "mds/dataset.json": b"{}"}),
        "page": (server.url("metrics"), home, {"metrics": files["metrics"]}),
        # The S3 endpoint is the first name (the worker opens the store there).
        "s3": ("s3://bucket/data", [server.home, "s3://bucket/data"], under("bucket/data/")),
    }
