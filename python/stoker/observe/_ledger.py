"""The provenance ledger: for every batch a rank delivered, what was in it and where it came from.

One row per sample: the rank's step (its batch number since the run began, carried across
resumes), epoch, batch number in the epoch, slot, key, storage index, where the bytes are (file,
shard or object, and offset), their length and CRC-32, the sample's position in the epoch, its
augmentation seed, and whether the slot pads the rank, was replaced or zero-filled. With it,
`replay` rebuilds any batch bit for bit and names a sample whose bytes changed since.

The format is Arrow's IPC stream, one stream per rank and run (``rank-00000-0000.arrows``, the
next run of that rank appends ``-0001``...). Each batch is one record batch, written and flushed to
the operating system before the batch reaches the training loop, so a killed job leaves a ledger
readable up to its last delivered batch (`read_ledger` stops at a torn tail). Arrow IPC is
Parquet's in-memory sibling: ``pyarrow.parquet.write_table(read_ledger(dir), "ledger.parquet")``
compacts a finished run for long-term keeping (about 60 bytes a sample after compression, see
``benchmarks/loader/provenance.py``).
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._bounded import MAX_METADATA_BYTES, open_regular, parse_json, require_regular, shown_logger
from ..errors import ConfigurationError, StorageError
from ..storage import Storage, sample_locations

if TYPE_CHECKING:
    import pyarrow

__all__ = ["LEDGER_VERSION", "ProvenanceLedger", "ledger_metadata", "read_ledger"]

_logger = shown_logger("stoker.observe")

LEDGER_VERSION = 1
_SEGMENT = re.compile(r"rank-(\d{5})-(\d{4})\.arrows$")


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.ipc  # noqa: F401
    except ImportError as error:
        raise ConfigurationError("the provenance ledger is written with pyarrow: pip install 'stoker[parquet]'") from error
    return pyarrow


def _schema(metadata: dict[str, Any]) -> pyarrow.Schema:
    pa = _pyarrow()
    return pa.schema(
        [
            ("step", pa.int64()),
            ("epoch", pa.int32()),
            ("batch", pa.int32()),
            ("rank", pa.int32()),
            ("slot", pa.int32()),
            ("key", pa.string()),
            ("index", pa.int64()),
            ("location", pa.string()),
            ("offset", pa.int64()),
            ("length", pa.int64()),
            ("checksum", pa.uint32()),
            ("position", pa.int64()),
            ("seed", pa.uint64()),
            ("padding", pa.bool_()),
            ("replaced", pa.bool_()),
            ("valid", pa.bool_()),
        ],
        metadata={"stoker": json.dumps(metadata)},
    )


class ProvenanceLedger:
    """Writes one rank's ledger (see the module notes). The Loader makes one with
    ``loader.record_provenance(DIRECTORY)``.

    Args:
        directory: Where every rank writes its files.
        rank: This rank.
        storage: The samples' storage (where each sample lives is asked of it).
        metadata: What replay needs to build the batches again (source, transform, seed...).

    Raises:
        ConfigurationError: pyarrow is not installed.
        StorageError: The directory cannot be written.
    """

    def __init__(self, directory: str | os.PathLike[str], *, rank: int, storage: Storage, metadata: dict[str, Any]) -> None:
        pa = _pyarrow()
        self.directory = Path(directory)
        self.rank = rank
        self.storage = storage
        self.index_map: np.ndarray | None = None  # batch indices -> the storage's, while reading through a view
        self._lock = threading.Lock()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            taken = [
                int(match.group(2))
                for path in self.directory.iterdir()
                if (match := _SEGMENT.search(path.name)) and int(match.group(1)) == rank
            ]
            self.path = self.directory / f"rank-{rank:05d}-{max(taken, default=-1) + 1:04d}.arrows"
            self._file = open(self.path, "xb")  # noqa: SIM115 - kept open for the run; closed by close()
        except OSError as error:
            raise StorageError(f"cannot write the provenance ledger in {self.directory}: {error}") from error
        self._schema = _schema({"version": LEDGER_VERSION, **metadata})
        self._writer = pa.ipc.new_stream(self._file, self._schema)
        self._file.flush()
        self.rows = 0

    def record(self, *, step: int, epoch: int, batch: Any, seeds: Sequence[int]) -> None:
        """Append one delivered batch (a `stoker.Batch` with ``indices``, ``checksums`` and
        ``lengths``) and flush it to the operating system."""
        self.write(self.prepare(epoch=epoch, batch=batch, seeds=seeds), step=step)

    def prepare(self, *, epoch: int, batch: Any, seeds: Sequence[int]) -> Any:
        """A batch's rows, all but their step (known only at delivery): built by the thread that
        decoded the batch, so the training loop's thread only stamps and writes them."""
        pa = _pyarrow()
        count = len(batch.keys)
        # Indices in the storage the ledger names: a view's (an epoch continued over a changed
        # dataset reads through one) are mapped to it, so replay reads the same samples.
        # `index_map` is read once: the Loader's thread may set or clear it while a decode
        # thread prepares rows, and two reads could see an array, then None.
        index_map = self.index_map
        indices = (batch.indices if index_map is None else index_map[np.asarray(batch.indices, np.int64)]).tolist()
        places, offsets = sample_locations(self.storage, indices)
        # Typed conversions throughout: an untyped pa.array of a NumPy array costs six times more,
        # and this runs on the training loop's thread for every batch.
        columns = [
            pa.array(np.zeros(count, dtype=np.int64), type=pa.int64()),  # the step, stamped by write
            pa.array(np.full(count, epoch, dtype=np.int32), type=pa.int32()),
            pa.array(np.full(count, batch.index, dtype=np.int32), type=pa.int32()),
            pa.array(np.full(count, self.rank, dtype=np.int32), type=pa.int32()),
            pa.array(np.arange(count, dtype=np.int32), type=pa.int32()),
            pa.array(batch.keys, type=pa.string()),
            pa.array(np.asarray(indices, dtype=np.int64), type=pa.int64()),
            pa.array(places, type=pa.string()),
            pa.array(np.asarray(offsets, dtype=np.int64), type=pa.int64()),
            pa.array(np.asarray(batch.lengths, dtype=np.int64), type=pa.int64()),
            pa.array(np.asarray(batch.checksums, dtype=np.uint32), type=pa.uint32()),
            pa.array(np.asarray(batch.positions, dtype=np.int64), type=pa.int64()),
            pa.array(np.asarray(seeds, dtype=np.uint64), type=pa.uint64()),
            pa.array(np.asarray(batch.padding, dtype=bool), type=pa.bool_()),
            pa.array(np.asarray(batch.replaced, dtype=bool) if len(batch.replaced) else np.zeros(count, dtype=bool), type=pa.bool_()),
            pa.array(np.asarray(batch.valid, dtype=bool), type=pa.bool_()),
        ]
        return pa.record_batch(columns, schema=self._schema)

    def write(self, rows: Any, *, step: int) -> None:
        """Append prepared ``rows`` as step ``step`` and flush them to the operating system."""
        pa = _pyarrow()
        stamped = rows.set_column(0, self._schema.field(0), pa.array(np.full(rows.num_rows, step, dtype=np.int64), type=pa.int64()))
        with self._lock:
            try:
                self._writer.write_batch(stamped)
                self._file.flush()
            except (OSError, pa.ArrowException) as error:
                raise StorageError(
                    f"cannot write the provenance ledger {self.path} (step {step}): {error}; that batch was not delivered "
                    "(a resume from the last state reads it again)"
                ) from error
            self.rows += rows.num_rows

    def close(self) -> None:
        """Finish the stream (a reader needs no end marker: a killed run's ledger reads too)."""
        with self._lock:
            if not self._file.closed:
                self._writer.close()
                self._file.close()


class _FileOfKnownSize(io.RawIOBase):
    """A ledger file for Arrow's stream reader, whose reads never ask for more than the file holds.

    A record's header declares its body's size, and the reader asks for that many bytes at once:
    through a plain file object, a damaged header declaring 1 TB was a 1 TB allocation (a
    MemoryError, or an OverflowError). Here a read is cut at the file's end, so the reader gets
    what is there, sees it short, and calls the record damaged. (Not a memory map: a map of a file
    that shrinks under it, a ledger rewritten while a table read from it is alive, is a SIGBUS.)
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = open_regular(path, "a ledger file")
        self._size = os.fstat(self._file.fileno()).st_size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        left = max(0, self._size - self._file.tell())
        return self._file.read(left if size is None or size < 0 else min(size, left))

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()
        super().close()


def _segments(directory: Path, rank: int | None) -> list[Path]:
    """The ledger files of ``rank`` (or every rank), oldest first.

    Raises:
        StorageError: Something named like a ledger file that is not a regular file (a folder,
            a FIFO...), named: the ledger is input, and such a thing is not one.
    """
    found = []
    for path in sorted(directory.iterdir()):
        match = _SEGMENT.search(path.name)
        if match and (rank is None or int(match.group(1)) == rank):
            require_regular(path, "a ledger file")
            found.append(path)
    return found


def read_ledger(directory: str | os.PathLike[str], *, rank: int | None = None) -> pyarrow.Table:
    """Every row a run's ranks (or one ``rank``) recorded, oldest first per rank; a torn last
    record (the job was killed while writing it) is left out, and a damaged one ends its file's
    rows, with a warning.

    Raises:
        StorageError: No ledger there, or a file that is not one.
    """
    pa = _pyarrow()
    directory = Path(directory)
    paths = _segments(directory, rank) if directory.is_dir() else []
    if not paths:
        raise StorageError(f"{directory}: no provenance ledger (rank-NNNNN-NNNN.arrows files){'' if rank is None else f' for rank {rank}'}")
    expected = _schema({})
    tables = []
    for path in paths:
        records = _read_segment(pa, path)
        if not records:
            continue
        try:
            tables.append(pa.Table.from_batches(records).cast(expected))
        except (pa.ArrowException, ValueError) as error:
            raise StorageError(f"{path}: not a stoker provenance ledger (its columns differ: {error})") from error
    if not tables:
        return expected.empty_table()
    return pa.concat_tables(tables)


def _read_segment(pa: Any, path: Path) -> list[Any]:
    """The whole records of one ledger file, up to a torn or damaged one (said in a warning)."""
    records = []
    try:
        with _FileOfKnownSize(path) as file:
            reader = pa.ipc.open_stream(file)
            while True:
                record = reader.read_next_batch()
                # The IPC reader trusts the offsets and lengths in the file; a damaged record is
                # caught here, not by whatever reads its strings later.
                record.validate(full=True)
                records.append(record)
    except StopIteration:
        return records
    except (pa.ArrowException, OSError, ValueError) as error:
        _logger.warning(
            "%s: read %d record(s), then a torn or damaged one (%s); the rest of the file is left out "
            "(a killed job tears only its last record)",
            path,
            len(records),
            error,
        )
    return records


def ledger_metadata(directory: str | os.PathLike[str], *, rank: int = 0) -> dict[str, Any]:
    """What the rank's latest ledger file says of its run (source, transform, seed...).

    Raises:
        StorageError: No ledger there for ``rank``, or one whose header cannot be read.
    """
    pa = _pyarrow()
    directory = Path(directory)
    paths = _segments(directory, rank) if directory.is_dir() else []
    if not paths:
        raise StorageError(f"{directory}: no provenance ledger for rank {rank}")
    try:
        with _FileOfKnownSize(paths[-1]) as file:
            schema = pa.ipc.open_stream(file).schema
        metadata = parse_json(schema.metadata[b"stoker"], f"{paths[-1]}: its header", max_bytes=MAX_METADATA_BYTES)
        if not isinstance(metadata, dict):
            raise ValueError("its metadata is not a JSON object")
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
        raise StorageError(f"{paths[-1]}: not a readable stoker provenance ledger ({type(error).__name__}: {error})") from error
    return metadata
