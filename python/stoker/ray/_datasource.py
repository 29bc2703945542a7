"""`StokerDatasource`: any stoker storage as a Ray Data source, so users preprocess at scale with
``map_batches`` on Ray's workers.

The source is named by its path or URL (a local folder, tar shards, LMDB, Parquet, ``s3://``,
``cassandra://``) and opened again in each read task: a storage holds threads and connections
that do not travel between processes. Read tasks are contiguous index ranges, so a task over tar
shards or Parquet reads neighbouring bytes; rows keep their key and label, so nothing loses its
identity on the way through Ray.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._bounded import shown_logger
from ..errors import ConfigurationError, check_on_error
from ._cluster import check_keepalive

__all__ = ["StokerDatasource"]

COLUMNS = ("index", "key", "label", "bytes", "image")


class StokerDatasource:
    """A ``ray.data.Datasource`` over a stoker storage (use with ``ray.data.read_datasource``).

    Args:
        source: The dataset's path or URL (`stoker.storage.open_storage`).
        columns: Of ``index`` (the sample's place in the storage), ``key``, ``label``,
            ``bytes`` (the encoded sample) and ``image`` (decoded and resized by ``transform``
            into a fixed-shape uint8 or float tensor).
        transform: The `ImageTransform` for ``image`` (its geometry must give one shape).
        rows_per_block: Samples read per storage call and per Ray block.
        on_error: ``"raise"``: a sample that cannot be read or decoded fails its read task, with
            the sample's name in the error (Ray retries the task, then fails the dataset).
            ``"skip"``: its row is left out, and a warning naming the sample and why is logged
            on the worker (``stoker.ray``, forwarded to the driver's console by Ray); the other
            rows of its block are delivered. An unreachable store raises either way.
        storage_options: Passed to `open_storage` (credentials come from the environment of
            the Ray workers, never from here).

    Raises:
        ValueError: An unknown column or ``on_error``, or ``image`` without a ``transform``.
        StorageError: The source cannot be opened (on the driver, before any task runs).
    """

    count: int
    """Samples in the source."""
    classes: list[str] | None
    """The source's class names, where its labels are class indices."""

    def __new__(
        cls,
        source: str,
        *,
        columns: Sequence[str] = ("key", "label", "bytes"),
        transform: Any = None,
        rows_per_block: int = 1024,
        on_error: str = "raise",
        **storage_options: Any,
    ) -> Any:
        # Built on first use: `ray` is an optional extra, imported only by those who use it.
        return _datasource_class()(
            source, columns=columns, transform=transform, rows_per_block=rows_per_block, on_error=on_error, **storage_options
        )

    def __init__(
        self,
        source: str,
        *,
        columns: Sequence[str] = ("key", "label", "bytes"),
        transform: Any = None,
        rows_per_block: int = 1024,
        on_error: str = "raise",
        **storage_options: Any,
    ) -> None:
        """Never runs (`__new__` returns the Ray datasource's own instance): the signature, for
        readers and type checkers."""


def _log_skipped(name: str, reason: str) -> None:
    shown_logger("stoker.ray").warning("stoker: skipped sample %r (on_error='skip'): %s", name, reason)


def _datasource_class() -> type:
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class _StokerDatasource(Datasource):
        def __init__(
            self,
            source: str,
            *,
            columns: Sequence[str] = ("key", "label", "bytes"),
            transform: Any = None,
            rows_per_block: int = 1024,
            on_error: str = "raise",
            **storage_options: Any,
        ) -> None:
            from ..storage import open_storage

            unknown = [column for column in columns if column not in COLUMNS]
            if unknown:
                raise ConfigurationError(f"unknown column(s) {unknown}; choose from {list(COLUMNS)}")
            if "image" in columns and transform is None:
                raise ConfigurationError("the image column needs a transform (an ImageTransform with a fixed output size)")
            if rows_per_block < 1:
                raise ConfigurationError(f"rows_per_block must be positive, got {rows_per_block}")
            check_on_error(on_error, ("raise", "skip"), why="a row has no slot to zero")
            self.on_error = on_error
            self.source = str(source)
            self.columns = tuple(columns)
            self.transform = transform
            self.rows_per_block = rows_per_block
            self.storage_options = storage_options
            with open_storage(self.source, **storage_options) as storage:
                self.count = len(storage)
                self.describe = storage.describe()
                self.classes = storage.classes

        def get_name(self) -> str:
            return f"stoker({self.describe})"

        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None) -> list[Any]:
            check_keepalive()  # the driver plans the read: a lost host would stall it
            tasks = max(1, min(parallelism, self.count))
            bounds = np.linspace(0, self.count, tasks + 1).astype(np.int64)
            return [
                ReadTask(
                    functools.partial(self._read, int(start), int(stop)),
                    BlockMetadata(num_rows=int(stop - start), size_bytes=None, exec_stats=None, input_files=None),
                    per_task_row_limit=per_task_row_limit,
                )
                for start, stop in zip(bounds[:-1], bounds[1:])
                if stop > start
            ]

        def _read(self, start: int, stop: int) -> Iterator[Any]:
            from ..storage import open_storage

            with open_storage(self.source, **self.storage_options) as storage:
                for first in range(start, stop, self.rows_per_block):
                    yield self._block(storage, range(first, min(stop, first + self.rows_per_block)))

        def _block(self, storage: Any, indices: range) -> Any:
            import pyarrow

            wanted = list(indices)
            results = storage.try_read_indices(wanted)
            # Raises naming the sample under "raise" (and for an unreachable store under either).
            payloads = storage.apply_on_error(wanted, results, self.on_error)
            for index, result in zip(wanted, results):
                if isinstance(result, Exception):
                    _log_skipped(storage.keys[index], f"{type(result).__name__}: {result}")
            wanted = [index for index, payload in zip(wanted, payloads) if payload is not None]
            payloads = [payload for payload in payloads if payload is not None]
            images = None
            if "image" in self.columns:
                from ..ops.batch import decode_batch

                # Seeded by index, as the Loader seeds by position: the same crop on every run.
                names = [storage.keys[index] for index in wanted]
                decoded = decode_batch(
                    payloads, self.transform, seeds=wanted, names=names, on_error="skip" if self.on_error == "skip" else "raise"
                )
                for failure in decoded.failures:
                    _log_skipped(failure.sample, failure.error)
                kept = [position for position, valid in enumerate(decoded.valid) if valid]
                wanted, payloads, images = (
                    [wanted[position] for position in kept],
                    [payloads[position] for position in kept],
                    decoded.images,
                )
            table: dict[str, Any] = {}
            if "index" in self.columns:
                table["index"] = pyarrow.array(wanted, pyarrow.int64())
            if "key" in self.columns:
                table["key"] = pyarrow.array([storage.keys[index] for index in wanted], pyarrow.string())
            if "label" in self.columns:
                table["label"] = pyarrow.array([storage.labels[index] for index in wanted], pyarrow.int64())
            if "bytes" in self.columns:
                table["bytes"] = pyarrow.array(payloads, pyarrow.binary())
            if images is not None:
                from ray.data.extensions import ArrowTensorArray

                table["image"] = ArrowTensorArray.from_numpy(images)
            return pyarrow.table(table)

    return _StokerDatasource
