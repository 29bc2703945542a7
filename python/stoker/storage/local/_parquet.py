"""Parquet files (the layout of Hugging Face datasets): random access by row, row groups as blocks.

A Parquet file is read a row group at a time, and only the columns needed: each file's footer is
read once when the storage opens and handed to every later read, the labels (one small column)
are read then too, and a read of some samples fetches the payload column of each row group they
fall in, once, into a cache bounded in bytes, from which every other sample of that row group is
served. With ``Loader(shuffle="block")`` the row groups are the blocks, so a row group is fetched
about once per epoch; under a uniform shuffle a dataset larger than the cache re-reads row groups,
and `stats` shows it (``row_groups_read`` against ``row_groups``).

Pages that carry a CRC-32 (Parquet's optional page checksum; `stoker convert --to parquet` writes
them) are verified, so a corrupt page fails the samples of its row group by name instead of
delivering wrong bytes. A row group is the unit that fails: Parquet cannot read past a bad page.
A dataset without them is noted (at INFO, once per dataset; `stoker inspect` shows it), and files
that disagree on the kind of label are refused (`_parquet_checks`). Other columns are read for a
filter and beside each sample (``extra=``) as a ``save_to_disk`` folder's are (`_arrow_columns`).

The Parquet library is pyarrow (Arrow C++: reads release the GIL, so many row groups are read at
once from the pipeline's threads).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..._bounded import matching_files, open_regular, walk_files
from ...errors import StorageError
from .._arrow_columns import filter_values, member_columns
from .._protocol import Storage
from ..policies import BlockCache
from ._parquet_checks import check_label_kinds, checksum_note, say_notes, unread_columns_note
from ._parquet_layout import ParquetLayout, class_columns, find_layout, payload_values

__all__ = ["ParquetStorage", "import_pyarrow", "parquet_files"]


def import_pyarrow() -> Any:
    """pyarrow's Parquet module.

    Raises:
        StorageError: pyarrow is not installed (the message says how to install it).
    """
    try:
        import pyarrow.parquet as parquet
    except ImportError as error:
        raise StorageError("Parquet needs pyarrow: pip install 'stoker[parquet]'") from error
    return parquet


def parquet_files(path: str | os.PathLike[str]) -> list[Path]:
    """The Parquet files at ``path``: the file itself, every ``*.parquet`` under a folder, or a
    glob pattern's matches; sorted.

    Raises:
        FileNotFoundError: Nothing there, or no Parquet file.
    """
    text = str(path)
    if any(character in text for character in "*?["):
        found = matching_files(text)
    elif Path(text).is_dir():
        found = walk_files(text, lambda name: name.endswith(".parquet"))
    elif Path(text).exists():
        found = [Path(text)]
    else:
        raise FileNotFoundError(f"{text}: no such file or folder")
    if not found:
        raise FileNotFoundError(f"{text}: no Parquet files")
    return found


def _open_native(name: str) -> Any:
    """A local Parquet file as pyarrow's own file (``pyarrow.OSFile``), not a Python file object.

    A Python file makes each read a Python object: with ``pre_buffer`` pyarrow reads on its I/O
    threads, and one of them may drop such a buffer after the interpreter began to exit, when a
    thread can no longer take the GIL; C++ then ends the process ("terminate called without an
    active exception", SIGABRT, about one short ``stoker inspect`` in 40). pyarrow's own file
    needs no GIL. The file is checked first (`open_regular`: never a FIFO or a device) and the
    same file reopened through its descriptor where the system names one (``/proc/self/fd``), so
    nothing can be swapped in between.
    """
    import pyarrow

    with open_regular(name, "a Parquet file") as checked:
        same_file = f"/proc/self/fd/{checked.fileno()}"
        return pyarrow.OSFile(same_file if os.path.exists(same_file) else name, "rb")


class ParquetStorage(Storage):
    """Samples as rows of Parquet files: ``ParquetStorage("data/")`` (every ``*.parquet`` under
    it), a file, or a glob.

    Args:
        path: A file, folder or glob pattern (local; see `open_storage` for ``s3://``).
        image_column: The column of sample bytes (binary, or Hugging Face's ``Image`` struct),
            or of text (a string column, such as FineWeb's ``text``: read as UTF-8 bytes).
            None: from the Hugging Face features, else the one column of bytes.
        label_column: The label column; None: the ``ClassLabel`` feature or a column named
            ``label``/``labels``/``cls``...; ``""``: no labels.
        key_column: A column of sample keys; None: keys are ``<file>#<row>``.
        cache_bytes: Bytes of row-group payloads kept in memory.
        max_concurrent_reads: See `Storage`.
        opener: Opens a file by name for reading (None: the local file system). Network stores
            pass theirs.
        names: The files' names when ``opener`` is given (``path`` is then only a description).

    Raises:
        FileNotFoundError: No Parquet files at ``path``.
        StorageError: A file whose footer cannot be read, columns missing or of the wrong type,
            files that disagree on the columns, or no rows; the message names the file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        image_column: str | None = None,
        label_column: str | None = None,
        key_column: str | None = None,
        cache_bytes: int = 512 << 20,
        max_concurrent_reads: int = 16,
        opener: Callable[[str], IO[bytes] | io.RawIOBase] | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(max_concurrent_reads)
        self.parquet = import_pyarrow()
        self.path = str(path)
        if opener is None:
            self.names = [str(file) for file in parquet_files(path)]
            self._open: Callable[[str], Any] = _open_native
        else:
            self.names, self._open = list(names or ()), opener
        self._cache = BlockCache(cache_bytes, size_of=lambda values: int(values.nbytes))
        # Other columns (`try_read_members`: captions beside images) by row group, held apart from
        # the image bytes so a batch's captions do not read their row groups' columns again.
        self._member_cache = BlockCache(max(1, cache_bytes // 4), size_of=lambda table: int(table.nbytes))
        self.metadata = [self._read_footer(name) for name in self.names]
        self.layout = self._common_layout(image_column, label_column, key_column)
        check_label_kinds(self.names, self.metadata, self.layout)
        notes = (
            [
                unread_columns_note(self.names[0], self.metadata[0], self.layout),
                checksum_note(self.names[0], self.metadata[0], self.layout, self._open),
            ]
            if self.names
            else []
        )
        self.notes = [note for note in notes if note is not None]
        """How the files were written that a user may want to know (columns left unread, pages
        without checksums): said at INFO once per dataset in a process, shown by `stoker inspect`."""
        say_notes(self.path, self.notes)
        self._group_rows: list[np.ndarray] = []  # per file: row where each row group starts, and the total
        self._file_starts = np.zeros(len(self.names) + 1, np.int64)
        for number, metadata in enumerate(self.metadata):
            rows = [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]
            self._group_rows.append(np.concatenate([[0], np.cumsum(rows, dtype=np.int64)]))
            self._file_starts[number + 1] = self._file_starts[number] + metadata.num_rows
        if self._file_starts[-1] == 0:
            raise StorageError(f"{self.path}: the Parquet files hold no rows")
        self._keys, self._labels, self.classes = self._read_keys_and_labels()

    def describe(self) -> str:
        return self.path

    def sample_name(self, index: int) -> str:
        """``<file> row <n>``: where sample ``index`` is."""
        number, row = self._locate(index)
        return f"{self.names[number]} row {row}"

    # ---- opening --------------------------------------------------------------------------

    def _read_footer(self, name: str) -> Any:
        try:
            with self._open(name) as file:
                return self.parquet.ParquetFile(file).metadata
        except StorageError:
            raise
        except Exception as error:  # pyarrow raises ArrowInvalid / OSError for a bad footer
            raise StorageError(f"{name}: not a readable Parquet file ({type(error).__name__}: {error})") from error

    def _common_layout(self, payload: str | None, label: str | None, key: str | None) -> ParquetLayout:
        layouts = [
            find_layout(metadata.schema.to_arrow_schema(), name, payload=payload, label=label, key=key)
            for name, metadata in zip(self.names, self.metadata)
        ]
        for name, layout in zip(self.names[1:], layouts[1:]):
            if layout != layouts[0]:
                raise StorageError(f"{name}: its columns ({layout}) differ from {self.names[0]}'s ({layouts[0]})")
        return layouts[0]

    def _read_columns(self, number: int, columns: list[str]) -> Any:
        """``columns`` of file ``number``, in one read (one open, one request per column chunk)."""
        try:
            with self._open(self.names[number]) as file:
                return self.parquet.ParquetFile(file, metadata=self.metadata[number]).read(columns=columns, use_threads=False)
        except Exception as error:
            raise StorageError(f"{self.names[number]}: cannot read columns {columns} ({type(error).__name__}: {error})") from error

    def _read_keys_and_labels(self) -> tuple[list[str], list[int | float | None], list[str] | None]:
        keys: list[str] = []
        raw: list[Any] = []
        wanted = [column for column in (self.layout.key, self.layout.label) if column]
        for number, name in enumerate(self.names):
            rows = int(self.metadata[number].num_rows)
            table: Any = self._read_columns(number, wanted) if wanted else None
            try:
                if self.layout.key is not None:
                    keys.extend(str(value) for value in table.column(self.layout.key).to_pylist())
                else:
                    keys.extend(f"{Path(name).name}#{row}" for row in range(rows))
                raw.extend(table.column(self.layout.label).to_pylist() if self.layout.label else [None] * rows)
            except (UnicodeDecodeError, ValueError, TypeError) as error:  # pyarrow does not check UTF-8 as it reads
                raise StorageError(f"{name}: its {wanted} columns do not read back ({type(error).__name__}: {error})") from error
        classes = self.layout.classes
        if any(isinstance(value, str) for value in raw):
            classes = sorted({value for value in raw if value is not None})
            position = {name: index for index, name in enumerate(classes)}
            return keys, [None if value is None else position[value] for value in raw], classes
        return keys, raw, classes

    def read_column(self, name: str) -> np.ndarray:
        """Every row's value in the numeric column ``name`` (float64, NaN where null), one column
        chunk per row group read (`ColumnStorage`): sizes or durations for buckets, no payload.

        Raises:
            StorageError: No such column, or one that is not numeric.
        """
        schema = self.metadata[0].schema.to_arrow_schema()
        if name not in schema.names:
            raise StorageError(f"{self.path}: no column {name!r} (columns: {', '.join(schema.names)})")
        import pyarrow  # installed with the Parquet reader (import_pyarrow said so when it opened)

        if not (pyarrow.types.is_integer(schema.field(name).type) or pyarrow.types.is_floating(schema.field(name).type)):
            raise StorageError(f"{self.path}: column {name!r} holds {schema.field(name).type}, not numbers")
        parts = []
        for number in range(len(self.names)):
            parts.append(filter_values(self._read_columns(number, [name]).column(name)))
        return np.concatenate(parts) if parts else np.zeros(0)

    def read_values(self, name: str) -> np.ndarray:
        """Every row's value in the column ``name``, for a filter (`Sampling(where=...)`): numbers
        as float64 (NaN where null), text, true/false and the rest as an object array (None where
        null). One column chunk per row group read, no payload.

        Raises:
            StorageError: No such column.
        """
        schema = self.metadata[0].schema.to_arrow_schema()
        if name not in schema.names:
            raise StorageError(f"{self.path}: no column {name!r} (columns: {', '.join(schema.names)})")
        return np.concatenate([filter_values(self._read_columns(number, [name]).column(name)) for number in range(len(self.names))])

    def column_classes(self, name: str) -> list[str] | None:
        """The class names of column ``name`` where it is a ``ClassLabel`` (from the Hugging
        Face features in the schema's metadata), so a filter may name a class: ``label == 'cat'``."""
        return class_columns(self.metadata[0].schema.to_arrow_schema()).get(name)

    # ---- reads ----------------------------------------------------------------------------

    def _locate(self, index: int) -> tuple[int, int]:
        number = int(np.searchsorted(self._file_starts, index, side="right")) - 1
        return number, int(index - self._file_starts[number])

    def block_sizes(self) -> list[int]:
        """Rows per row group, over all files (empty row groups left out): the blocks of
        ``Loader(shuffle="block")``."""
        return [int(size) for rows in self._group_rows for size in np.diff(rows) if size > 0]

    def max_open_blocks(self) -> int:
        """Row groups the block shuffle may mix: half of what the cache holds (``cache_bytes``
        over the mean row group's payload bytes; half, as the next window's row groups are read
        while the last one's are still in use), at least 2. Hugging Face writes row groups of
        100 MB and more, and a shuffle mixing more than fit would read each many times an epoch."""
        sizes = [
            sum(
                group.column(column).total_uncompressed_size
                for column in range(group.num_columns)
                if group.column(column).path_in_schema.split(".")[0] == self.layout.payload
            )
            for metadata in self.metadata
            for group in (metadata.row_group(number) for number in range(metadata.num_row_groups))
            if group.num_rows > 0
        ]
        return max(2, self._cache.capacity // (2 * max(1, int(np.mean(sizes))))) if sizes else 2

    def stream_blocks(self) -> None:
        """Nothing: row groups are always read whole (`BlockStorage`)."""

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """Nothing: a row group is read when its first row is asked for (`BlockStorage`)."""

    def _load_group(self, number: int, group: int) -> Any:
        with self._open(self.names[number]) as file:
            reader = self.parquet.ParquetFile(file, metadata=self.metadata[number], pre_buffer=True, page_checksum_verification=True)
            table = reader.read_row_group(group, columns=[self.layout.payload], use_threads=False)
        return payload_values(table.column(self.layout.payload))

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception] = [b""] * len(indices)
        by_group: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for slot, index in enumerate(indices):
            number, row = self._locate(index)
            starts = self._group_rows[number]
            group = int(np.searchsorted(starts, row, side="right")) - 1
            by_group.setdefault((number, group), []).append((slot, row - int(starts[group])))
        for (number, group), wanted in by_group.items():
            first = int(self._group_rows[number][group])
            try:
                rows = int(self._group_rows[number][group + 1]) - first
                values = self._cache.get((number, group), lambda: self._load_group(number, group), samples=rows)  # noqa: B023 - called at once
            except Exception as error:
                for slot, offset in wanted:
                    results[slot] = StorageError(
                        f"{self.names[number]} row {first + offset}: row group {group} cannot be read ({type(error).__name__}: {error})"
                    )
                continue
            self._cache.served((number, group), len(wanted))
            for slot, offset in wanted:
                try:
                    value = values[offset].as_py()
                except UnicodeDecodeError as error:  # a string payload column that is not UTF-8
                    results[slot] = StorageError(f"{self.names[number]} row {first + offset}: column {self.layout.payload!r}: {error}")
                    continue
                if value is None:
                    results[slot] = StorageError(
                        f"{self.names[number]} row {first + offset}: column {self.layout.payload!r} is empty (null)"
                    )
                else:
                    results[slot] = value
        return results

    def try_read_members(self, indices: Sequence[int], extensions: Sequence[str]) -> list[dict[str, Any] | Exception]:
        """Other columns of each row at ``indices`` (`MemberStorage`: a column is a row's member,
        as ``txt`` is a WebDataset sample's): ``{column: value}`` (text as str, binary as
        bytes, a struct as a dict), read a row group at a time; an exception in place of a row
        whose column is null, or for every row where a column does not exist (`member_columns`).
        """

        def locate(index: int) -> tuple[tuple[int, int], int]:
            number, row = self._locate(index)
            group = int(np.searchsorted(self._group_rows[number], row, side="right")) - 1
            return (number, group), row - int(self._group_rows[number][group])

        def row_name(block: Any, offset: int) -> str:
            number, group = block
            return f"{self.names[number]} row {int(self._group_rows[number][group]) + offset}"

        return member_columns(
            indices,
            extensions,
            available=self.metadata[0].schema.to_arrow_schema().names,
            where=self.path,
            locate=locate,
            load=lambda block, columns: self._load_members(block[0], block[1], columns),
            cache=self._member_cache,
            row_name=row_name,
            block_name=lambda block: f"{self.names[block[0]]} row group {block[1]}",
        )

    def _load_members(self, number: int, group: int, columns: Sequence[str]) -> Any:
        with self._open(self.names[number]) as file:
            reader = self.parquet.ParquetFile(file, metadata=self.metadata[number], page_checksum_verification=True)
            return reader.read_row_group(group, columns=list(columns), use_threads=False)

    def stats(self) -> dict[str, int]:
        """``row_groups`` in the files, ``row_groups_read`` so far (more reads than row groups
        per epoch means the cache is too small for the shuffle), and ``member_row_groups_read``:
        row groups whose other columns `try_read_members` read."""
        return {
            "row_groups": sum(metadata.num_row_groups for metadata in self.metadata),
            "row_groups_read": self._cache.reads,
            "member_row_groups_read": self._member_cache.reads,
        }
