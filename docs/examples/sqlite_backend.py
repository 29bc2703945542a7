"""A stoker storage backend in one file: samples in a SQLite table (the docs' "Add a backend").

A table ``samples(key TEXT, label INTEGER, data BLOB, caption TEXT)`` becomes a `Storage`: the
required part is the keys, the labels and one batched read; the caption is offered as a member
(``extra=("txt",)``) by implementing the optional `MemberStorage` capability. Run it to build a
small database and read it through a Loader::

    python docs/examples/sqlite_backend.py
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stoker import Loader, Sampling
from stoker.bench import iter_jpegs
from stoker.errors import StorageError
from stoker.ops import ImageTransform
from stoker.storage import MemberStorage, Storage


class SqliteStorage(Storage):
    """Samples in one SQLite table, read with one ``SELECT`` per batch.

    SQLite connections belong to the thread that opened them, and a Loader reads from many
    threads, so each thread opens its own (read-only) connection on first use.
    """

    def __init__(self, path: str | Path, table: str = "samples") -> None:
        super().__init__()
        self.path, self.table = Path(path), table
        self._local = threading.local()
        rows = self._connection().execute(f"SELECT key, label FROM {table} ORDER BY rowid").fetchall()
        self._keys = [key for key, _ in rows]  # the two things every backend sets when it opens
        self._labels = [label for _, label in rows]
        self._rowids = [rowid for (rowid,) in self._connection().execute(f"SELECT rowid FROM {table} ORDER BY rowid")]

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            try:
                connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            except sqlite3.Error as error:
                raise StorageError(f"{self.path}: cannot open the SQLite database: {error}") from error
            self._local.connection = connection
        return connection

    def _select(self, column: str, indices: Sequence[int]) -> dict[int, Any]:
        rowids = [self._rowids[index] for index in indices]
        marks = ",".join("?" * len(rowids))
        query = f"SELECT rowid, {column} FROM {self.table} WHERE rowid IN ({marks})"
        return dict(self._connection().execute(query, rowids).fetchall())

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        """The one read a backend must provide: each sample's bytes, or the error naming it."""
        try:
            found = self._select("data", indices)
        except sqlite3.Error as error:  # the whole read failed: say so for every sample
            return [StorageError(f"{self.path}: sample {self._keys[index]!r}: {error}") for index in indices]
        results: list[bytes | Exception] = []
        for index in indices:
            data = found.get(self._rowids[index])
            if isinstance(data, bytes):
                results.append(data)
            else:
                results.append(StorageError(f"{self.path}: sample {self._keys[index]!r} has no data"))
        return results

    # The optional MemberStorage capability: a caption per sample, as WebDataset's ".txt".
    def try_read_members(self, indices: Sequence[int], extensions: Sequence[str]) -> list[dict[str, Any] | Exception]:
        unknown = [extension for extension in extensions if extension != "txt"]
        if unknown:
            return [StorageError(f"{self.path}: no member {unknown[0]!r} (this table has 'txt')") for _ in indices]
        captions = self._select("caption", indices)
        return [{"txt": captions.get(self._rowids[index], "")} for index in indices]

    def describe(self) -> str:
        return f"SqliteStorage({self.path})"

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:  # other threads' connections close when their threads end
            connection.close()
            self._local.connection = None
        super().close()


def make_database(path: Path, count: int = 64) -> None:
    """A small table of generated JPEGs, two classes, a caption each."""
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE samples(key TEXT, label INTEGER, data BLOB, caption TEXT)")
        rows = [(f"img{number:03d}.jpg", number % 2, jpeg, f"picture {number}") for number, jpeg in enumerate(iter_jpegs(count, 96, 80))]
        connection.executemany("INSERT INTO samples VALUES (?, ?, ?, ?)", rows)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "images.sqlite"
        make_database(database)
        with SqliteStorage(database) as storage:
            assert isinstance(storage, MemberStorage)  # what the Loader checks before extra=
            loader = Loader(storage, batch_size=16, transform=ImageTransform(resize=(64, 64)), extra=("txt",), sampling=Sampling(seed=1))
            seen = [key for batch in loader for key in batch.keys]
            assert sorted(seen) == sorted(storage.keys)  # every sample once
            print(f"{len(seen)} samples from {storage.describe()}, e.g. {seen[0]!r}")


if __name__ == "__main__":
    main()
