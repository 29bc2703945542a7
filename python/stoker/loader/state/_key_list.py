"""A dataset's keys, in storage order, as a file: what a resume after the dataset changed needs
to know which saved position was which sample.

A Loader state holds positions (constant size at any scale), not keys. When the dataset gains or
loses samples between a checkpoint and its resume, the positions are translated by key, and that
takes the key list of the dataset the state was saved over. The Loader writes it beside its
provenance ledger (``keys-<dataset digest>.parquet``, once per dataset) and on request
(`Loader.save_keys`); `load_state_dict(keys_before=...)` reads it back. It is a Parquet file
(a ``key`` column, written a million keys at a time, and a ``checksum`` column, each sample's
CRC-32 where the storage's index records it without a read, as indexed tar shards do) with its
dataset digest, sample count and block sizes in the schema's metadata; read back, it is untrusted
input, checked field by field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..._bounded import MAX_METADATA_BYTES, parse_json
from ...errors import ConfigurationError, ProvenanceError

__all__ = ["KeyList", "key_list_name", "write_key_list"]

_METADATA = b"stoker.key_list"
_CHUNK = 1 << 20  # keys written and converted at once


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.compute  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError as error:  # pragma: no cover - the parquet extra is installed in tests
        raise ConfigurationError("key lists are Parquet files: pip install 'stoker[parquet]'") from error
    return pyarrow


def key_list_name(dataset: str) -> str:
    """The file name of the key list of the dataset with digest ``dataset``."""
    safe = "".join(character if character.isalnum() or character in "-_+:" else "_" for character in dataset)
    return f"keys-{safe.replace(':', '_')[:200]}.parquet"


def key_chunks_of(keys: Sequence[str]) -> Iterator[Any]:
    """``keys`` as pyarrow large string arrays of at most a million, in order."""
    pyarrow = _pyarrow()
    for start in range(0, len(keys), _CHUNK):
        yield pyarrow.array(list(keys[start : start + _CHUNK]), pyarrow.large_string())


def key_array(keys: Sequence[str]) -> Any:
    """``keys`` as one pyarrow string array, built a chunk at a time."""
    pyarrow = _pyarrow()
    chunks = list(key_chunks_of(keys))
    return pyarrow.concat_arrays(chunks) if chunks else pyarrow.array([], pyarrow.large_string())


def write_key_list(
    path: str | os.PathLike[str], keys: Sequence[str], *, dataset: str, blocks: Sequence[int] | None, checksums: np.ndarray | None = None
) -> Path:
    """Write ``keys`` (every sample's, in storage order) to ``path`` (atomically: a reader never
    sees half a file), with the dataset's digest, block sizes and, where known, each sample's
    checksum (-1: unknown). Returns the path."""
    pyarrow = _pyarrow()
    target = Path(path)
    metadata = {
        "version": 1,
        "dataset": dataset,
        "samples": len(keys),
        "blocks": None if blocks is None else [int(size) for size in blocks],
    }
    fields = [("key", pyarrow.large_string()), *([("checksum", pyarrow.int64())] if checksums is not None else [])]
    schema = pyarrow.schema(fields, metadata={_METADATA: json.dumps(metadata).encode()})
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    with pyarrow.parquet.ParquetWriter(partial, schema) as writer:
        for start, keys_chunk in zip(range(0, len(keys), _CHUNK), key_chunks_of(keys)):
            chunk = [keys_chunk]
            if checksums is not None:
                chunk.append(pyarrow.array(checksums[start : start + _CHUNK], pyarrow.int64()))
            writer.write_table(pyarrow.Table.from_arrays(chunk, schema=schema))
    os.replace(partial, target)
    return target


class KeyList:
    """A key list read back: the ``dataset`` digest, its ``samples``, ``blocks`` (or None) and
    ``checksums`` (or None). The keys stay in the file, read a chunk at a time
    (`key_chunks`) or a few by index (`keys_at`): at 10^8 keys the whole column is gigabytes.

    Args:
        where: The file, or a directory holding ``keys-<dataset>.parquet`` (a ledger's).
        dataset: The digest of the dataset the list must be of (the state's fingerprint's).
        samples: The samples that dataset held (the state's).

    Raises:
        ProvenanceError: No such file, not a key list, or the list of another dataset (named).
    """

    def __init__(self, where: str | os.PathLike[str], *, dataset: str, samples: int) -> None:
        pyarrow = _pyarrow()
        path = Path(where)
        if path.is_dir():
            path = path / key_list_name(dataset)
        if not path.is_file():
            raise ProvenanceError(
                f"no key list of dataset {dataset} at {path}: the run that saved the state writes one beside its "
                "provenance ledger, or with Loader.save_keys"
            )
        try:
            file = pyarrow.parquet.ParquetFile(path)
            raw = (file.schema_arrow.metadata or {}).get(_METADATA)
            metadata = parse_json(raw, f"{path}: its metadata", max_bytes=MAX_METADATA_BYTES) if raw is not None else None
        except (OSError, ValueError, pyarrow.ArrowException) as error:
            raise ProvenanceError(f"{path} is not a key list: {error}") from error
        names = file.schema_arrow.names
        if not isinstance(metadata, dict) or metadata.get("version") != 1 or names not in (["key"], ["key", "checksum"]):
            raise ProvenanceError(f"{path} is not a stoker key list (version 1, a 'key' column and maybe a 'checksum' column)")
        blocks = metadata.get("blocks")
        if metadata.get("dataset") != dataset or metadata.get("samples") != samples or file.metadata.num_rows != samples:
            raise ProvenanceError(
                f"{path} lists dataset {str(metadata.get('dataset'))[:80]!r} of {file.metadata.num_rows} keys; "
                f"the state was saved over dataset {dataset!r} of {samples}"
            )
        if blocks is not None and not (
            isinstance(blocks, list)
            and all(isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in blocks)
            and sum(blocks) == samples
        ):
            raise ProvenanceError(f"{path}: its block sizes do not cover its {samples} keys")
        key_type = file.schema_arrow.field("key").type
        if not (pyarrow.types.is_large_string(key_type) or pyarrow.types.is_string(key_type)):
            raise ProvenanceError(f"{path}: its 'key' column holds {key_type}, not text")
        try:
            checksums = file.read(columns=["checksum"]).column("checksum").to_numpy().astype(np.int64) if "checksum" in names else None
        except (OSError, ValueError, pyarrow.ArrowException) as error:
            raise ProvenanceError(f"{path} cannot be read: {error}") from error
        self.path = path
        self.dataset: str = dataset
        self.samples = samples
        self.blocks: list[int] | None = blocks
        self._file = file
        self.checksums: np.ndarray | None = checksums  # each sample's CRC-32 (-1: unknown), or None

    def key_chunks(self) -> Iterator[Any]:
        """The keys in storage order, as pyarrow large string arrays of at most a million.

        Raises:
            ProvenanceError: The file cannot be read, holds a null key (named with its
                position), or holds another number of keys than it said.
        """
        pyarrow = _pyarrow()
        read = 0
        try:
            for batch in self._file.iter_batches(batch_size=_CHUNK, columns=["key"]):
                column = batch.column(0)
                if column.null_count:  # a null names no sample: its sample would be taken as removed
                    position = read + pyarrow.compute.index(column.is_null(), True).as_py()
                    raise ProvenanceError(f"{self.path}: key {position} is null; a key list holds every sample's key (text)")
                yield column if pyarrow.types.is_large_string(column.type) else column.cast(pyarrow.large_string())
                read += len(column)
        except ProvenanceError:
            raise
        except (OSError, ValueError, pyarrow.ArrowException) as error:
            raise ProvenanceError(f"{self.path} cannot be read: {error}") from error
        if read != self.samples:
            raise ProvenanceError(f"{self.path} holds {read} keys, its header says {self.samples}")

    def keys_at(self, indices: Sequence[int] | np.ndarray) -> list[str]:
        """The keys at storage ``indices`` (a few: for naming samples), reading only the row
        groups that hold them.

        Raises:
            ProvenanceError: The file cannot be read.
        """
        pyarrow = _pyarrow()
        metadata = self._file.metadata
        starts = np.cumsum([0] + [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)])
        wanted = np.asarray(indices, dtype=np.int64)
        groups = np.searchsorted(starts, wanted, side="right") - 1
        found: dict[int, str] = {}
        try:
            for group in sorted({int(group) for group in groups if 0 <= group < metadata.num_row_groups}):
                column = self._file.read_row_group(group, columns=["key"]).column(0)
                for index in wanted[groups == group]:
                    if int(index) - int(starts[group]) < len(column):
                        found[int(index)] = str(column[int(index) - int(starts[group])].as_py())
        except (OSError, ValueError, pyarrow.ArrowException) as error:
            raise ProvenanceError(f"{self.path} cannot be read: {error}") from error
        return [found.get(int(index), f"#{int(index)}") for index in indices]
