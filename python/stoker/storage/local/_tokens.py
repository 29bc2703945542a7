"""Tokenized documents on disk: flat ``.bin`` or ``.npy`` token files with an offsets array, and
tar shards with one ``.npy`` member per document (written by `write_token_shards`).

Every format answers the same questions: how many documents, one document's tokens, and a run
of consecutive documents as one flat array plus lengths (what the packer eats fastest). Reads
are explicit positional reads through the Rust core, coalesced, with the GIL released.

A flat file's offsets file is an ``.npy`` of ``n + 1`` non-decreasing token offsets (int64);
document ``i`` is ``tokens[offsets[i]:offsets[i + 1]]``. It is found beside the tokens as
``<tokens>.offsets.npy`` unless given.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ... import _native
from ...errors import StorageError
from .tar import TarShardStorage

__all__ = ["TOKEN_DTYPES", "TokenFile", "TokenShards", "open_tokens"]

TOKEN_DTYPES = (np.dtype(np.uint16), np.dtype(np.uint32))


class TokenFile:
    """Documents in one flat token file (``.bin`` or ``.npy``) plus an offsets file.

    Args:
        path: The token file.
        offsets: The offsets ``.npy`` (default ``<path>.offsets.npy``).
        dtype: Token type of a ``.bin`` file (``uint16`` or ``uint32``); ``.npy`` files say theirs.

    Raises:
        FileNotFoundError: The token or offsets file is missing.
        StorageError: Offsets that decrease (a negative length, naming the document), do not
            start at 0, or point past the end of the token file; an unsupported dtype.
    """

    def __init__(self, path: str | os.PathLike[str], offsets: str | os.PathLike[str] | None = None, *, dtype: str = "uint16") -> None:
        self.path = Path(path)
        self.offsets_path = Path(offsets) if offsets else self.path.with_name(self.path.name + ".offsets.npy")
        for required in (self.path, self.offsets_path):
            if not required.exists():
                raise FileNotFoundError(f"{required}: no such file")
        if self.path.suffix == ".npy":
            with open(self.path, "rb") as file:
                major, _ = np.lib.format.read_magic(file)
                read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, _, file_dtype = read_header(file)
                self._header = file.tell()
            if len(shape) != 1:
                raise StorageError(f"{self.path}: a token file holds a 1-D array, this one has shape {shape}")
            self.dtype = np.dtype(file_dtype)
            count = shape[0]
        else:
            self.dtype = np.dtype(dtype)
            self._header = 0
            count = (os.path.getsize(self.path)) // self.dtype.itemsize
        if self.dtype not in TOKEN_DTYPES:
            raise StorageError(f"{self.path}: tokens must be uint16 or uint32, not {self.dtype}")
        self.offsets = np.load(self.offsets_path).astype(np.int64)
        if self.offsets.ndim != 1 or len(self.offsets) < 1 or self.offsets[0] != 0:
            raise StorageError(f"{self.offsets_path}: offsets must be a 1-D array starting at 0")
        lengths = np.diff(self.offsets)
        if lengths.size and lengths.min() < 0:
            bad = int(np.argmax(lengths < 0))
            raise StorageError(f"{self.offsets_path}: document {bad} has a negative length ({int(lengths[bad])})")
        if self.offsets[-1] > count:
            raise StorageError(f"{self.offsets_path}: documents end at token {int(self.offsets[-1])}, {self.path} holds {count}")
        self.lengths = lengths

    def __len__(self) -> int:
        return len(self.lengths)

    def _range(self, first: int, end: int) -> tuple[int, int]:
        start, stop = int(self.offsets[first]), int(self.offsets[end])
        size = self.dtype.itemsize
        return self._header + start * size, (stop - start) * size

    def document(self, index: int) -> np.ndarray:
        """Tokens of document ``index``."""
        return self.documents([index])[0]

    def documents(self, indices: Sequence[int]) -> list[np.ndarray]:
        """Tokens of several documents, read with coalescing."""
        for index in indices:
            if not 0 <= index < len(self):
                raise IndexError(f"{self.path}: no document {index} (it has {len(self)})")
        data = _native.read_ranges(self.path, [self._range(index, index + 1) for index in indices])
        return [np.frombuffer(chunk, dtype=self.dtype) for chunk in data]

    def __iter__(self) -> Iterator[np.ndarray]:
        """Every document in order, read a chunk at a time (so `write_token_shards` takes it)."""
        for first in range(0, len(self), 1024):
            tokens, lengths = self.chunk(first, min(1024, len(self) - first))
            yield from np.split(tokens, np.cumsum(lengths)[:-1]) if len(lengths) else []

    def chunk(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Documents ``first .. first + count - 1`` as (tokens back to back, lengths): one read."""
        end = min(len(self), first + count)
        (data,) = _native.read_ranges(self.path, [self._range(first, end)])
        return np.frombuffer(data, dtype=self.dtype), self.lengths[first:end]


class TokenShards:
    """Documents as ``.npy`` members of indexed tar shards (see `write_token_shards`)."""

    def __init__(self, source: str | os.PathLike[str], **options: object) -> None:
        self.storage = TarShardStorage(source, payload="npy", **options)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self.storage)

    def document(self, index: int) -> np.ndarray:
        return self.documents([index])[0]

    def documents(self, indices: Sequence[int]) -> list[np.ndarray]:
        keys = [self.storage.keys[index] for index in indices]
        return [np.load(io.BytesIO(data), allow_pickle=False) for data in self.storage.read_many(keys)]  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[np.ndarray]:
        """Every document in order, read a chunk at a time (so `write_token_shards` takes it)."""
        for first in range(0, len(self), 1024):
            tokens, lengths = self.chunk(first, min(1024, len(self) - first))
            yield from np.split(tokens, np.cumsum(lengths)[:-1]) if len(lengths) else []

    def chunk(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        documents = self.documents(range(first, min(len(self), first + count)))
        lengths = np.array([len(document) for document in documents], dtype=np.int64)
        tokens = np.concatenate(documents) if documents else np.zeros(0, np.uint32)
        return tokens, lengths


def open_tokens(path: str | os.PathLike[str], **options: object) -> TokenFile | TokenShards:
    """A `TokenFile` for ``.bin``/``.npy`` files, `TokenShards` for a folder or ``.tar``."""
    location = Path(path)
    if location.is_dir() or location.suffix == ".tar":
        return TokenShards(location, **options)
    return TokenFile(location, **options)  # type: ignore[arg-type]
