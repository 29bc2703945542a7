"""`stoker convert`: a folder or manifest (or any storage) into indexed tar shards, LMDB or Parquet.

Nothing half-written ever looks complete: a shard is written as ``.part``, indexed, then renamed;
every output sample is read back and checked against the source's CRC-32, and only then is
``dataset.json`` (the list of shards) written. An LMDB is built in ``<dst>.part`` and renamed
once verified.

An interrupted conversion to shards resumes: the folder holds a ``.stoker-convert.json`` marker
naming the source, and running the same command again keeps the finished shards whose CRC-32s
check, drops the ``.part``, and writes the rest. Until it finishes, opening the folder is refused
with a message saying it is partial. A destination that is a file, or a non-empty folder that is
not such a partial conversion, is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .._bounded import MAX_METADATA_BYTES, read_json
from ..errors import ConfigurationError, StorageError
from ..storage import Storage
from ..storage.local import (
    CLASSES_FILE,
    DATASET_FORMAT,
    PARTIAL_MARKER,
    LmdbStorage,
    TarShardStorage,
    build_index,
    import_lmdb,
    write_index,
)
from ._caffe import encode_datum
from ._convert_parquet import finish_parquet, write_parquet
from ._decode_check import checked, with_check

__all__ = ["ConversionReport", "add_tar_member", "convert_storage", "shard_key"]


@dataclass(frozen=True)
class ConversionReport:
    """What a conversion wrote, and (with the decode check) what it left out.

    Attributes:
        skipped: ``(key, why)`` for each source sample left out (empty, or an image that does
            not decode); none are packed.
        checked: How the samples were checked before packing (``"1,000 images decoded"``), or
            ``"bytes only"`` without the decode check.
    """

    destination: Path | str
    format: str
    samples: int
    bytes: int
    shards: int
    skipped: list[tuple[str, str]] = field(default_factory=list)
    checked: str = "bytes only"


def shard_key(key: str) -> tuple[str, str]:
    """(WebDataset key, extension) for a source key such as ``"cat/img.v2.JPG"``: the last
    suffix is the extension; other dots become underscores (WebDataset splits at the first)."""
    folder, _, base = key.rpartition("/")
    stem, dot, extension = base.rpartition(".")
    if not dot:
        stem, extension = base, "bin"
    stem = stem.replace(".", "_")
    return (f"{folder}/{stem}" if folder else stem), extension.lower()


def _progress(total: int, description: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="sample", desc=description, disable=not enabled, file=sys.stderr, dynamic_ncols=True)


def add_tar_member(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    """Append ``data`` to ``archive`` as member ``name`` (read-only, no owner or time: the same
    bytes make the same shard), as every writer of stoker's tar shards does."""
    import io

    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o444
    archive.addfile(info, io.BytesIO(data))


def _conversion_marker(source: Storage, shard_size: int) -> dict:
    return {"format": "stoker.convert", "source": source.describe(), "samples": len(source), "shard_size": shard_size}


def _prepare_destination(source: Storage, destination: Path, shard_size: int) -> list[Path]:
    """Make ``destination`` ready for shards; returns the finished shards of an interrupted run of
    this same conversion (to keep), else []. Refuses anything else that is there."""
    if destination.exists() and not destination.is_dir():
        raise StorageError(f"{destination} is a file; shards go into a folder (give a new or empty folder)")
    if (destination / "dataset.json").exists():
        raise StorageError(f"{destination} already holds a converted dataset (dataset.json); choose a new or empty folder")
    marker_path = destination / PARTIAL_MARKER
    marker = _conversion_marker(source, shard_size)
    if marker_path.exists():
        try:
            earlier = read_json(marker_path, what="a conversion's marker", max_bytes=MAX_METADATA_BYTES)
        except ValueError:  # damaged, or past the reader's bounds (JsonError): not this conversion's
            earlier = None
        if earlier != marker:
            raise StorageError(
                f"{destination} holds an interrupted conversion of another source or shard size ({str(earlier)[:200]}); "
                f"run that conversion again to finish it, or choose another folder"
            )
        for part in destination.glob("*.part"):
            part.unlink()
        return sorted(destination.glob("shard-*.tar"))
    if destination.exists() and any(destination.iterdir()):
        found = sorted(item.name for item in destination.iterdir())
        raise StorageError(
            f"{destination} is not empty (it holds {', '.join(found[:5])}{', ...' if len(found) > 5 else ''}); choose a new or empty folder"
        )
    destination.mkdir(parents=True, exist_ok=True)
    temporary = destination / f".{PARTIAL_MARKER}.tmp"
    temporary.write_text(json.dumps(marker))
    temporary.replace(marker_path)
    return []


def _kept_shards(finished: list[Path]) -> tuple[list[dict], list[str]]:
    """The shards an interrupted run finished, after each one's CRC-32s check: their manifest
    entries and their keys in order. A shard that fails is dropped with the ones after it."""
    shards: list[dict] = []
    keys: list[str] = []
    for number, path in enumerate(finished):
        if path.name != f"shard-{number:06d}.tar":
            break
        try:
            # Its own index (never one built now, which would hold no CRC-32s to check against).
            with TarShardStorage([path], verify=True, missing_index="error") as shard:
                for _ in shard.iter_sequential():
                    pass
                shard_keys = list(shard.keys)
        except (OSError, ValueError):
            break
        shards.append({"name": path.name, "samples": len(shard_keys), "bytes": path.stat().st_size})
        keys.extend(shard_keys)
    for stale in finished[len(shards) :]:
        stale.unlink()
        stale.with_name(stale.name + ".idx").unlink(missing_ok=True)
    return shards, keys


def _write_shards(source: Storage, destination: Path, shard_size: int, progress: bool) -> ConversionReport:
    shards, kept_keys = _kept_shards(_prepare_destination(source, destination, shard_size))
    if shards:
        print(f"resuming the conversion into {destination}: {len(shards)} finished shards ({len(kept_keys)} samples) kept", file=sys.stderr)
    expected: dict[str, tuple[int, int | float | None]] = {}
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

    with _progress(len(source), f"writing shards to {destination}", progress) as bar:
        for position, ((key, data), label) in enumerate(zip(source.iter_sequential(), source.labels)):
            member_key, extension = shard_key(key)
            if member_key in expected:
                raise StorageError(f"two source samples map to shard key {member_key!r} (the second is {key!r})")
            expected[member_key] = (zlib.crc32(data), label)
            total += len(data)
            bar.update()
            if position < len(kept_keys):
                if kept_keys[position] != member_key:
                    raise StorageError(
                        f"{destination}: the finished shards hold {kept_keys[position]!r} where the source now has {member_key!r}; the source changed, start again in a new folder"
                    )
                continue
            if archive is None:
                part = destination / f"shard-{len(shards):06d}.tar.part"
                archive = tarfile.open(part, mode="w", format=tarfile.PAX_FORMAT)
            add_tar_member(archive, f"{member_key}.{extension}", data)
            if label is not None:
                add_tar_member(archive, f"{member_key}.cls", str(label).encode())
            samples_in_shard += 1
            if archive.offset >= shard_size:
                finish()
    finish()
    with TarShardStorage([destination / shard["name"] for shard in shards], verify=True) as written:
        _verify(written, expected, lambda key: key, source.classes)
    manifest = {"format": DATASET_FORMAT, "version": 1, "shards": shards, "samples": len(expected), "classes": source.classes}
    temporary = destination / ".dataset.json.tmp"
    temporary.write_text(json.dumps(manifest, indent=1))
    temporary.replace(destination / "dataset.json")
    (destination / PARTIAL_MARKER).unlink()
    return ConversionReport(destination, "shards", len(expected), total, len(shards))


def _write_lmdb(source: Storage, destination: Path, progress: bool) -> ConversionReport:
    lmdb = import_lmdb()

    if destination.exists():
        kind = "a file" if destination.is_file() else "a folder"
        raise StorageError(f"{destination} already exists ({kind}); an LMDB is written to a new path")
    part = destination.with_name(destination.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    destination.parent.mkdir(parents=True, exist_ok=True)  # as the shard and Parquet writers do
    estimate = sum(os.path.getsize(source.path_of(key)) for key in source.keys) if hasattr(source, "path_of") else 1 << 30
    environment = lmdb.open(str(part), map_size=int(estimate * 1.5) + (64 << 20), subdir=True, writemap=False)
    expected: dict[str, tuple[int, int | float | None]] = {}
    total = 0
    try:
        with _progress(len(source), f"writing LMDB {destination}", progress) as bar:
            transaction = environment.begin(write=True)
            for count, ((key, data), label) in enumerate(zip(source.iter_sequential(), source.labels), start=1):
                if isinstance(label, float):
                    raise StorageError(
                        f"{key}: label {label} is a float; an LMDB of Caffe Datums holds integer labels (convert to shards instead)"
                    )
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
    if source.classes is not None:
        (part / CLASSES_FILE).write_text(json.dumps({"format": "stoker.classes", "classes": source.classes}))
    with LmdbStorage(part, value_format="caffe", index_path=part / "stoker-index.json") as written:
        _verify(written, expected, lambda key: key, source.classes)
    part.replace(destination)
    return ConversionReport(destination, "lmdb", len(expected), total, 0)


def _verify(written: Storage, expected: dict[str, tuple[int, int | float | None]], key_of, classes: list[str] | None) -> None:
    """Every written sample reads back with the source's bytes and label (a label read back
    as a class name is compared by name)."""
    if len(written) != len(expected):
        raise StorageError(f"verification: wrote {len(expected)} samples, read back {len(written)}")
    for (key, data), label in zip(written.iter_sequential(), written.labels):
        crc, expected_label = expected[key_of(key)]
        found: object = label
        wanted: object = expected_label
        if written.classes is not None and classes is not None and isinstance(label, int) and isinstance(expected_label, int):
            found, wanted = written.classes[label], classes[expected_label]  # compared by name
        if zlib.crc32(data) != crc or found != wanted:
            raise StorageError(f"verification: sample {key!r} reads back different bytes or label")


def _write_parquet(source: Storage, destination: Path, file_bytes: int, row_group_bytes: int, progress: bool) -> ConversionReport:
    from ..storage.local import ParquetStorage, import_pyarrow

    import_pyarrow()
    with _progress(len(source), f"writing Parquet to {destination}", progress) as bar:
        samples, total, files, expected = write_parquet(
            source, destination, file_bytes=file_bytes, row_group_bytes=row_group_bytes, progress_bar=bar
        )
    part = destination.with_name(destination.name + ".part")
    with ParquetStorage(part, key_column="key") as written:
        _verify(written, expected, lambda key: key, source.classes)
    finish_parquet(destination)
    return ConversionReport(destination, "parquet", samples, total, files)


def convert_storage(
    source: Storage,
    destination: str | os.PathLike[str],
    *,
    to: str = "shards",
    shard_size: int = 256 << 20,
    row_group_size: int = 32 << 20,
    progress: bool = True,
    decode_check: bool = True,
) -> ConversionReport:
    """Write every sample of ``source`` to ``destination`` as tar shards, LMDB or Parquet, then
    verify it (every sample read back against the source's CRC-32).

    Args:
        source: Any storage (e.g. `FileStorage` over an ImageFolder).
        destination: A new or empty folder (shards), or a new path (LMDB, Parquet).
        to: ``"shards"``, ``"lmdb"`` (Caffe ``Datum`` values: encoded bytes plus label) or
            ``"parquet"`` (Hugging Face's layout: ``image``, ``label``, ``key`` columns).
        shard_size: Start a new shard (or Parquet file) past this many bytes.
        row_group_size: Parquet only: bytes of payload per row group (the block a read fetches).
        progress: Show a progress bar on stderr.
        decode_check: First read every sample and decode every image (`check_decodes`): empty
            files and images that do not decode are left out and listed in the report's
            ``skipped``, not packed. False packs every file as it is (checked by bytes only).

    An interrupted conversion to shards resumes when called again with the same source and
    destination (see the module notes).

    Raises:
        StorageError: The destination is a file, a non-empty folder that is not an interrupted
            run of this conversion, or an existing LMDB path; keys collide; or verification
            failed.
    """
    if to not in ("shards", "lmdb", "parquet"):
        raise ConfigurationError(f'to must be "shards", "lmdb" or "parquet", got {to!r}')
    target = Path(destination)
    packed, check = checked(source, decode_check)
    if to == "shards":
        report = _write_shards(packed, target, shard_size, progress)
    elif to == "lmdb":
        report = _write_lmdb(packed, target, progress)
    else:
        report = _write_parquet(packed, target, shard_size, row_group_size, progress)
    return with_check(report, check)
