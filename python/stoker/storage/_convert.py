"""`stoker convert`: a folder or manifest (or any storage) into indexed tar shards or LMDB.

Nothing half-written ever looks complete: a shard is written as ``.part``, indexed, then renamed;
``dataset.json`` (the list of shards) is written last; an LMDB is built in ``<dst>.part`` and
renamed. Every output sample is read back and checked against the source's CRC-32.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from ._caffe import encode_datum
from ._errors import StorageError
from ._lmdb import LmdbStorage
from ._protocol import Storage
from ._tar import DATASET_FORMAT, TarShardStorage
from ._tar_index import build_index, write_index

__all__ = ["ConversionReport", "convert_storage", "shard_key"]


@dataclass(frozen=True)
class ConversionReport:
    """What a conversion wrote."""

    destination: Path | str
    format: str
    samples: int
    bytes: int
    shards: int


def shard_key(key: str) -> tuple[str, str]:
    """(WebDataset key, extension) for a source key such as ``"cat/img.v2.JPG"``: the last
    suffix is the extension; other dots become underscores (WebDataset splits at the first)."""
    folder, _, base = key.rpartition("/")
    stem, dot, extension = base.rpartition(".")
    if not dot:
        stem, extension = base, "bin"
    stem = stem.replace(".", "_")
    return (f"{folder}/{stem}" if folder else stem), extension.lower()


def _progress(total: int, description: str, enabled: bool):  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    return tqdm(total=total, unit="sample", desc=description, disable=not enabled, file=sys.stderr, dynamic_ncols=True)


def _add_member(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    import io

    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o444
    archive.addfile(info, io.BytesIO(data))


def _write_shards(source: Storage, destination: Path, shard_size: int, progress: bool) -> ConversionReport:
    destination.mkdir(parents=True, exist_ok=True)
    if (destination / "dataset.json").exists() or any(destination.glob("shard-*.tar")):
        raise StorageError(f"{destination} already holds shards; choose an empty folder")
    shards: list[dict] = []
    expected: dict[str, tuple[int, int | None]] = {}
    total = 0
    archive: tarfile.TarFile | None = None
    part: Path | None = None
    samples_in_shard = 0

    def finish() -> None:
        nonlocal archive, part, samples_in_shard
        if archive is None or part is None:
            return
        archive.close()
        final = part.with_suffix("")  # drop ".part"
        index = build_index(part, checksums=True)
        index.shard = final
        write_index(index)
        part.replace(final)
        shards.append({"name": final.name, "samples": samples_in_shard, "bytes": final.stat().st_size})
        archive, part, samples_in_shard = None, None, 0

    seen: set[str] = set()
    with _progress(len(source), f"shards -> {destination}", progress) as bar:
        for (key, data), label in zip(source.iter_sequential(), source.labels):
            member_key, extension = shard_key(key)
            if member_key in seen:
                raise StorageError(f"two source samples map to shard key {member_key!r} (the second is {key!r})")
            seen.add(member_key)
            if archive is None:
                part = destination / f"shard-{len(shards):06d}.tar.part"
                archive = tarfile.open(part, mode="w", format=tarfile.PAX_FORMAT)
            _add_member(archive, f"{member_key}.{extension}", data)
            if label is not None:
                _add_member(archive, f"{member_key}.cls", str(label).encode())
            expected[member_key] = (zlib.crc32(data), label)
            samples_in_shard += 1
            total += len(data)
            if archive.offset >= shard_size:
                finish()
            bar.update()
    finish()
    manifest = {"format": DATASET_FORMAT, "version": 1, "shards": shards, "samples": len(expected), "classes": source.classes}
    temporary = destination / ".dataset.json.tmp"
    temporary.write_text(json.dumps(manifest, indent=1))
    temporary.replace(destination / "dataset.json")
    with TarShardStorage(destination, verify=True) as written:
        _verify(written, expected, lambda key: key)
    return ConversionReport(destination, "shards", len(expected), total, len(shards))


def _write_lmdb(source: Storage, destination: Path, progress: bool) -> ConversionReport:
    import lmdb

    if destination.exists():
        raise StorageError(f"{destination} already exists; choose a new path")
    part = destination.with_name(destination.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    estimate = sum(os.path.getsize(source.path_of(key)) for key in source.keys) if hasattr(source, "path_of") else 1 << 30  # type: ignore[attr-defined]
    environment = lmdb.open(str(part), map_size=int(estimate * 1.5) + (64 << 20), subdir=True, writemap=False)
    expected: dict[str, tuple[int, int | None]] = {}
    total = 0
    try:
        with _progress(len(source), f"lmdb -> {destination}", progress) as bar:
            transaction = environment.begin(write=True)
            for count, ((key, data), label) in enumerate(zip(source.iter_sequential(), source.labels), start=1):
                transaction.put(key.encode("utf-8", "surrogateescape"), encode_datum(data, label))
                expected[key] = (zlib.crc32(data), label)
                total += len(data)
                if count % 1000 == 0:
                    transaction.commit()
                    transaction = environment.begin(write=True)
                bar.update()
            transaction.commit()
        environment.sync(True)
    finally:
        environment.close()
    part.replace(destination)
    with LmdbStorage(destination, value_format="caffe") as written:
        _verify(written, expected, lambda key: key)
    return ConversionReport(destination, "lmdb", len(expected), total, 0)


def _verify(written: Storage, expected: dict[str, tuple[int, int | None]], key_of) -> None:  # type: ignore[no-untyped-def]
    if len(written) != len(expected):
        raise StorageError(f"verification: wrote {len(expected)} samples, read back {len(written)}")
    for (key, data), label in zip(written.iter_sequential(), written.labels):
        crc, expected_label = expected[key_of(key)]
        if zlib.crc32(data) != crc or label != expected_label:
            raise StorageError(f"verification: sample {key!r} reads back different bytes or label")


def convert_storage(source: Storage, destination: str | os.PathLike[str], *, to: str = "shards", shard_size: int = 256 << 20, progress: bool = True) -> ConversionReport:
    """Write every sample of ``source`` to ``destination`` as tar shards or LMDB, then verify it.

    Args:
        source: Any storage (e.g. `FileStorage` over an ImageFolder).
        destination: A new or empty folder (shards), or a new path (LMDB).
        to: ``"shards"`` or ``"lmdb"`` (Caffe ``Datum`` values: encoded bytes plus label).
        shard_size: Start a new shard past this many bytes.
        progress: Show a progress bar on stderr.

    Raises:
        StorageError: The destination is not empty, keys collide, or verification failed.
    """
    target = Path(destination)
    if to == "shards":
        return _write_shards(source, target, shard_size, progress)
    if to == "lmdb":
        return _write_lmdb(source, target, progress)
    raise ValueError(f'to must be "shards" or "lmdb", got {to!r}')
