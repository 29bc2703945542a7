"""Tar shards of millions of members made in seconds, for the epoch-scale tests and
`benchmarks/storage/tar_index_scale.py`: each shard a sparse file of the size a real one has, with real
tar headers where an index is checked against its shard (the first and last members) and the end
marker, and a real version 3 index of every member written by stoker's own writer.

Member ``i`` of shard ``s`` is ``SSSSS/IIIIIIII.jpg``: a 512-byte header then 16 bytes of data
(zeros: the file is sparse), its label ``i % 1000``. Reads return zeros, so a test decodes nothing.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np

from stoker.storage.local import ShardIndex, write_index

__all__ = ["make_sparse_shards"]

MEMBER_BYTES = 16
_STRIDE = 1024  # a header block and a data block per member


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """Each value as ``width`` ASCII decimal digits, one row per value."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((values[:, None] // powers) % 10 + ord("0")).astype(np.uint8)


def _header(name: str) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = MEMBER_BYTES
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def make_sparse_shards(folder: Path, samples: int, per_shard: int) -> Path:
    """``samples`` members in shards of ``per_shard``, with ``dataset.json``. Returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    shards = []
    for number, first in enumerate(range(0, samples, per_shard)):
        count = min(per_shard, samples - first)
        shard = folder / f"shard-{number:06d}.tar"
        size = count * _STRIDE + 1024
        with open(shard, "wb") as file:
            file.truncate(size)  # sparse: only the headers below take space
            for position in {0, count - 1}:
                file.seek(position * _STRIDE)
                file.write(_header(f"{number:05d}/{position:08d}.jpg"))
        positions = np.arange(count, dtype=np.int64)
        keys = np.concatenate([np.tile(np.frombuffer(f"{number:05d}/".encode(), np.uint8), (count, 1)), _digits(positions, 8)], axis=1)
        index = ShardIndex(
            shard=shard,
            size=size,
            key_ends=np.arange(1, count + 1, dtype=np.int64) * keys.shape[1],
            key_bytes=keys.tobytes(),
            patterns=[("jpg",)],
            sample_pattern=np.zeros(count, np.int32),
            member_offsets=positions * _STRIDE + 512,
            member_sizes=np.full(count, MEMBER_BYTES, np.int64),
            label_kind="int",
            labels=positions % 1000,
        )
        write_index(index)
        shards.append({"name": shard.name, "samples": count, "bytes": size})
    (folder / "dataset.json").write_text(json.dumps({"format": "stoker.shards", "version": 1, "shards": shards, "samples": samples}))
    return folder
