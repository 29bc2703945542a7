"""`stoker convert --to parquet`: any storage into Parquet files that Hugging Face ``datasets``
(and `ParquetStorage`) read as they are.

Images go into an ``image`` column of Hugging Face's ``Image`` struct (``bytes``, ``path``), other
payloads into a binary ``data`` column; labels into ``label`` (a ``ClassLabel`` with the class
names where there are classes); keys into ``key``. The features are written into the schema
metadata as ``datasets`` does. Row groups hold about ``row_group_bytes`` of payload (the block a
read fetches), files about ``file_bytes``.

The files are written into ``<destination>.part`` and every sample is read back and checked
against the source's CRC-32 before the folder is renamed, so a folder of that name is complete.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

from ..errors import StorageError
from ..storage import Storage
from ..storage.local import IMAGE_EXTENSIONS

__all__ = ["write_parquet"]


def _schema_and_features(source: Storage, images: bool) -> tuple[Any, dict[str, Any]]:
    import pyarrow as pa

    labels = source.labels
    float_labels = any(isinstance(label, float) for label in labels)
    has_labels = any(label is not None for label in labels)
    fields = [pa.field("key", pa.string())]
    features: dict[str, Any] = {"key": {"dtype": "string", "_type": "Value"}}
    if images:
        fields.append(pa.field("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])))
        features["image"] = {"_type": "Image"}
    else:
        fields.append(pa.field("data", pa.binary()))
        features["data"] = {"dtype": "binary", "_type": "Value"}
    if has_labels:
        fields.append(pa.field("label", pa.float64() if float_labels else pa.int64()))
        if source.classes is not None and not float_labels:
            features["label"] = {"names": list(source.classes), "_type": "ClassLabel"}
        else:
            features["label"] = {"dtype": "float64" if float_labels else "int64", "_type": "Value"}
    metadata = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    return pa.schema(fields, metadata=metadata), features


def write_parquet(
    source: Storage, destination: Path, *, file_bytes: int, row_group_bytes: int, progress_bar: Any
) -> tuple[int, int, int, dict[str, tuple[int, int | float | None]]]:
    """Write every sample of ``source`` as Parquet files into a new folder ``destination``.

    Returns:
        (samples, payload bytes, files, expected) where ``expected`` maps each key to its CRC-32
        and label, for verification.

    Raises:
        StorageError: ``destination`` exists, or two samples share a key.
    """
    import pyarrow as pa
    import pyarrow.parquet as parquet

    if destination.exists():
        raise StorageError(f"{destination} already exists; Parquet files are written to a new folder")
    part = destination.with_name(destination.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    images = all(key.lower().endswith(IMAGE_EXTENSIONS) for key in source.keys)
    schema, _ = _schema_and_features(source, images)
    has_labels = "label" in schema.names
    expected: dict[str, tuple[int, int | float | None]] = {}
    total = files = 0
    rows: dict[str, list[Any]] = {name: [] for name in schema.names}
    pending = written_in_file = 0
    writer: Any = None

    def flush() -> None:
        nonlocal pending, written_in_file, writer, files
        if not rows["key"]:
            return
        if writer is None:
            writer = parquet.ParquetWriter(str(part / f"part-{files:05d}.parquet"), schema, compression="none", write_page_checksum=True)
            files += 1
        writer.write_table(pa.table(rows, schema=schema), row_group_size=len(rows["key"]))
        written_in_file += pending
        for column in rows.values():
            column.clear()
        pending = 0
        if written_in_file >= file_bytes:
            writer.close()
            writer, written_in_file = None, 0

    try:
        for (key, data), label in zip(source.iter_sequential(), source.labels):
            if key in expected:
                raise StorageError(f"two source samples have the key {key!r}")
            expected[key] = (zlib.crc32(data), label)
            total += len(data)
            rows["key"].append(key)
            rows["image" if images else "data"].append({"bytes": data, "path": key} if images else data)
            if has_labels:
                rows["label"].append(label)
            pending += len(data)
            progress_bar.update()
            if pending >= row_group_bytes:
                flush()
        flush()
    finally:
        if writer is not None:
            writer.close()
    return len(expected), total, files, expected


def finish_parquet(destination: Path) -> None:
    """Move the verified ``<destination>.part`` into place."""
    destination.with_name(destination.name + ".part").replace(destination)
