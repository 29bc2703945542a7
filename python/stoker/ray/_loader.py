"""`RayLoader`: a Ray Data pipeline's output as stoker `Batch` objects, so training takes it through
the same batch memory, device transfer and data-wait meter as the `Loader`'s own batches.

Ray Data is where users preprocess at scale (``map_batches`` over many nodes); the training loop
still wants fixed-shape batches in reused, page-locked memory, copied to the accelerator one batch
ahead (`stoker.device.to_device`), each sample keeping its key and label, and a plain verdict on
what limits the loop (`stoker.observe.DataWaitMeter`). A thread of the loader's own pulls batches
from Ray's iterator and copies them into leased buffers (`BufferPool`) while the loop computes.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._bounded import shown_logger
from ..device import BufferPool, pinned_allocator
from ..errors import ConfigurationError, DecodeError, ProvenanceError
from ..loader import Batch
from ._cluster import check_keepalive
from ._loader_stats import RayLoaderStats

__all__ = ["RayLoader"]

_logger = shown_logger("stoker.ray")
# Seconds the loader waits for its thread when the loop stops early: Ray's iterator may be
# blocked waiting for a block, and the training script must not be held up by it.
_QUICK_STOP = 2.0
_DONE = object()


class RayLoader:
    """Batches from a Ray Data pipeline, as the `Loader` yields them.

    Args:
        data: A ``ray.data.Dataset`` (each iteration is one epoch: Ray runs the pipeline again),
            or a ``ray.data.DataIterator``: one rank's share from ``ray.train.get_dataset_shard``
            or ``dataset.streaming_split(world_size, equal=True)[rank]`` (equal shares: every
            rank takes the same number of steps, so DDP never waits on a missing one).
        batch_size: Rows per batch.
        data_column: The column that becomes `Batch.data`: fixed-shape rows (resize in
            ``map_batches``), copied into one ``(batch_size, *row_shape)`` array.
        label_column: The column of labels (`Batch.labels`, int64, or float64 for float
            targets); None or absent: -1 for every row.
        key_column: The column of sample names (`Batch.keys`; `StokerDatasource` gives
            ``key``); None or absent: ``row N`` by the row's place in the epoch.
        drop_last: Drop the last, short batch of each epoch.
        prefetch: Batches Ray prefetches, and batches the loader keeps copied ahead.
        pin_memory: Page-locked batch memory when CUDA is available (``"auto"``, True).
        local_shuffle_buffer_size: Passed to Ray's ``iter_batches``.
        local_shuffle_seed: Passed to Ray's ``iter_batches``.

    Each full iteration is one epoch. `state_dict` records the epoch and the rows delivered.
    Continuing mid-epoch (iterating again after a ``break``, or `load_state_dict`) skips that many
    rows (Ray still computes them), which is exact only when the order is deterministic: a
    ``data`` that is a Dataset, with Ray's ``DataContext.get_current().execution_options.
    preserve_order`` on, and a local shuffle, if any, seeded. Otherwise `load_state_dict`
    refuses a mid-epoch state, and iterating again after a ``break`` starts the epoch over, with
    a warning (logger ``stoker.ray``).

    Raises:
        TypeError: ``data`` is neither a Dataset nor a DataIterator.
        ValueError: A bad size.
    """

    def __init__(
        self,
        data: Any,
        *,
        batch_size: int,
        data_column: str = "image",
        label_column: str | None = "label",
        key_column: str | None = "key",
        drop_last: bool = False,
        prefetch: int = 2,
        pin_memory: bool | str = "auto",
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
    ) -> None:
        if not callable(getattr(data, "iter_batches", None)):
            raise TypeError(f"data must be a ray.data.Dataset or DataIterator, got {type(data).__name__}")
        if batch_size < 1 or prefetch < 1:
            raise ConfigurationError(f"batch_size and prefetch must be positive, got {batch_size} and {prefetch}")
        self.data = data
        self.batch_size = batch_size
        self.data_column = data_column
        self.label_column = label_column
        self.key_column = key_column
        self.drop_last = drop_last
        self.prefetch = prefetch
        self.pin_memory = pin_memory
        self._shuffle = {"local_shuffle_buffer_size": local_shuffle_buffer_size, "local_shuffle_seed": local_shuffle_seed}
        self.epoch = 0
        self._rows = 0  # delivered in this epoch
        self._pool: BufferPool | None = None
        self._row_layout: tuple[tuple[int, ...], np.dtype[Any]] | None = None
        self._totals = {"batches": 0, "rows": 0, "upstream": 0.0, "copy": 0.0, "elapsed": 0.0}

    # ---- resume ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The epoch and the rows delivered in it (delivered only: batches copied ahead are not)."""
        return {"version": 1, "epoch": self.epoch, "rows": self._rows, "batch_size": self.batch_size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict`: the next iteration starts after the rows it delivered.

        Raises:
            ValueError: Another version or batch size, or a mid-epoch state over a pipeline
                whose order Ray does not keep (skipping rows would lose or repeat samples).
        """
        if state.get("version") != 1:
            raise ProvenanceError(f"RayLoader state version {state.get('version')} is not 1")
        if state["batch_size"] != self.batch_size:
            raise ProvenanceError(f"the state was saved with batch_size {state['batch_size']}, this loader has {self.batch_size}")
        if state["rows"] and not self._order_is_kept():
            raise ConfigurationError(
                "a mid-epoch resume skips the rows already delivered, which is exact only over a ray.data.Dataset "
                "with ray.data.DataContext.get_current().execution_options.preserve_order = True "
                "(set it before building the dataset) and a local_shuffle_seed if there is a local shuffle, "
                "or resume at an epoch boundary"
            )
        self.epoch = int(state["epoch"])
        self._rows = int(state["rows"])

    def _order_is_kept(self) -> bool:
        """Whether Ray yields this epoch's rows in the same order again (so skipping is exact): a
        Dataset with ``preserve_order``, and no local shuffle, or one with a seed."""
        unseeded_shuffle = bool(self._shuffle["local_shuffle_buffer_size"]) and self._shuffle["local_shuffle_seed"] is None
        return _order_is_deterministic(self.data) and not unseeded_shuffle

    # ---- iteration ---------------------------------------------------------------------

    @property
    def stats(self) -> RayLoaderStats:
        """Totals of every epoch so far (see `RayLoaderStats.verdict`)."""
        totals = self._totals
        return RayLoaderStats(int(totals["batches"]), int(totals["rows"]), totals["upstream"], totals["copy"], totals["elapsed"])

    def __iter__(self) -> Iterator[Batch]:
        check_keepalive()
        ready: queue.Queue[Any] = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        skip = self._rows  # the rest of the epoch, after a break or a resume
        if skip and not self._order_is_kept():
            _logger.warning(
                "stoker: epoch %d starts over: %d rows were delivered before the loop stopped, and Ray cannot continue "
                "a stopped pipeline in the same order (set DataContext preserve_order to continue it exactly)",
                self.epoch,
                skip,
            )
            self._rows = skip = 0
        worker = threading.Thread(target=self._produce, args=(ready, stop, skip), name="stoker-ray-loader", daemon=True)
        worker.start()
        finished = False
        try:
            while True:
                item = ready.get()
                if item is _DONE:
                    finished = True
                    return
                if isinstance(item, BaseException):
                    raise item
                self._rows += len(item)
                yield item
        finally:
            stop.set()
            while worker.is_alive():  # unblock a put, then let the thread see `stop`
                try:
                    ready.get(timeout=0.05)
                except queue.Empty:
                    worker.join(_QUICK_STOP)
                    break
            if finished:
                self.epoch += 1
                self._rows = 0

    def _produce(self, ready: queue.Queue[Any], stop: threading.Event, skip: int) -> None:
        started = time.perf_counter()
        batches = iter(
            self.data.iter_batches(
                batch_size=self.batch_size,
                batch_format="numpy",
                drop_last=self.drop_last,
                prefetch_batches=self.prefetch,
                **self._shuffle,
            )
        )
        position = 0
        try:
            while not stop.is_set():
                asked = time.perf_counter()
                try:
                    columns = next(batches)
                except StopIteration:
                    break
                copying = time.perf_counter()
                self._totals["upstream"] += copying - asked
                rows = len(next(iter(columns.values())))
                if position + rows <= skip:  # delivered before the resume
                    position += rows
                    continue
                batch = self._batch(columns, position, skip)
                position += rows
                self._totals["copy"] += time.perf_counter() - copying
                self._totals["batches"] += 1
                self._totals["rows"] += len(batch)
                if not _put(ready, batch, stop):
                    return
            _put(ready, _DONE, stop)
        except BaseException as error:  # noqa: BLE001 - handed to the training loop's thread
            _put(ready, error, stop)
        finally:
            self._totals["elapsed"] += time.perf_counter() - started
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    def _batch(self, columns: dict[str, np.ndarray], position: int, skip: int) -> Batch:
        first = max(0, skip - position)  # rows of this Ray batch delivered before a resume
        count = len(next(iter(columns.values()))) - first
        if self.data_column not in columns:
            raise KeyError(f"the Ray pipeline's rows have no column {self.data_column!r} (they have {sorted(columns)}); set data_column")
        positions = np.arange(position + first, position + first + count, dtype=np.int64)
        keys = self._keys(columns, positions, first)
        data = self._copy(columns[self.data_column][first:], keys)
        labels = _labels(columns.get(self.label_column) if self.label_column else None, first, count)
        return Batch(
            data=data,
            labels=labels,
            keys=keys,
            valid=np.ones(count, dtype=bool),
            padding=np.zeros(count, dtype=bool),
            positions=positions,
            index=int(position + first) // self.batch_size,
            replaced=np.zeros(count, dtype=bool),
        )

    def _keys(self, columns: dict[str, np.ndarray], positions: np.ndarray, first: int) -> list[str]:
        if self.key_column and self.key_column in columns:
            return [str(key) for key in columns[self.key_column][first:]]
        return [f"row {position}" for position in positions.tolist()]

    def _copy(self, rows: np.ndarray, keys: list[str]) -> np.ndarray:
        """The rows in a leased batch buffer (one layout for the whole run)."""
        if rows.dtype == object:  # Ray gives ragged tensors as an array of arrays
            shapes = {np.shape(row) for row in rows}
            if len(shapes) > 1:
                raise DecodeError(
                    f"column {self.data_column!r} has rows of different shapes {sorted(shapes)[:4]} in the batch starting at "
                    f"{keys[0]!r}; give every row one shape in map_batches (resize or crop)"
                )
            rows = np.stack(list(rows))
        layout = (tuple(rows.shape[1:]), rows.dtype)
        if self._row_layout is None:
            shape = (self.batch_size, *layout[0])
            allocate = (
                pinned_allocator(shape, str(layout[1]))
                if self.pin_memory and str(layout[1]) in ("uint8", "int16", "float32", "float16")
                else lambda: np.empty(shape, dtype=layout[1])
            )
            self._pool = BufferPool(allocate, capacity=2 * self.prefetch + 4)
            self._row_layout = layout
        elif layout != self._row_layout:
            raise DecodeError(
                f"column {self.data_column!r} changed from rows of {self._row_layout[0]} {self._row_layout[1]} to "
                f"{layout[0]} {layout[1]} at {keys[0]!r}; batch memory is allocated once, so every row needs one shape and dtype"
            )
        assert self._pool is not None
        buffer = self._pool.acquire()
        np.copyto(buffer[: len(rows)], rows)
        return buffer[: len(rows)] if len(rows) < self.batch_size else buffer


def _labels(column: np.ndarray | None, first: int, count: int) -> np.ndarray:
    if column is None:
        return np.full(count, -1, dtype=np.int64)
    values = np.asarray(column[first:])
    return values.astype(np.float64 if values.dtype.kind == "f" else np.int64)


def _put(ready: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    """Put unless the loop has stopped; False when it has."""
    while not stop.is_set():
        try:
            ready.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _order_is_deterministic(data: Any) -> bool:
    import ray.data

    if not isinstance(data, ray.data.Dataset):
        return False
    return bool(ray.data.DataContext.get_current().execution_options.preserve_order)
