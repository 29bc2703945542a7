"""Batch memory by explicit leases: a buffer is never leased again while any array, tensor or
DLPack view made from it is alive, and it is reused once they are all gone."""

from __future__ import annotations

import contextlib
import gc
import io
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from PIL import Image

from stoker.device import BufferPool
from stoker.loader import Loader, Sampling, Throughput
from stoker.ops import ImageTransform
from stoker.storage import MemoryStorage


def test_a_lease_ends_only_when_every_view_is_gone() -> None:
    pool = BufferPool(lambda: np.zeros(8, np.uint8), capacity=2)
    first = pool.acquire()
    first[:] = 1
    derived = first[2:5]  # a view of a view: NumPy collapses its base to the memory's owner
    del first
    gc.collect()
    second = pool.acquire()
    assert pool.allocated == 2, "the first buffer is still read through a view"
    assert not np.shares_memory(derived, second)
    del derived
    gc.collect()
    assert pool.free == 1
    third = pool.acquire()
    assert pool.allocated == 2, "reused once nothing reads it"
    assert not np.shares_memory(second, third)


def test_a_lease_handed_over_returns_its_buffer_once_when_the_new_arrays_are_gone() -> None:
    pool = BufferPool(lambda: np.zeros(8, np.uint8), capacity=2)
    made: list[np.ndarray] = []
    maker = threading.Thread(target=lambda: made.append(pool.acquire()[1:7]))  # a decode thread's lease
    maker.start()
    maker.join()
    old = made.pop()
    old[:] = 7
    new = BufferPool.hand_over(old)
    assert new is not old and np.shares_memory(new, old) and new.shape == (6,) and (new == 7).all()
    assert BufferPool.hand_over(old) is old, "the old lease no longer owns the buffer"
    plain = np.zeros(3)
    assert BufferPool.hand_over(plain) is plain and BufferPool.hand_over([1, 2]) == [1, 2]
    del old
    gc.collect()
    assert pool.free == 0, "the old lease's death returns nothing: the new one still reads it"
    newer = BufferPool.hand_over(new[2:])  # handed over again, from a view
    del new
    gc.collect()
    assert pool.free == 0 and (newer == 7).all()
    del newer
    gc.collect()
    assert pool.free == 1, "back, once, when the last lease's arrays are gone"
    assert pool.acquire() is not None and pool.allocated == 1


def _storage(count: int) -> MemoryStorage:
    def png(value: int) -> bytes:
        buffer = io.BytesIO()
        Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(buffer, "PNG")
        return buffer.getvalue()

    return MemoryStorage({f"k{index:03d}": png(index) for index in range(count)})


@contextlib.contextmanager
def _collections_of_new_objects_only() -> Iterator[None]:
    """``gc.collect()`` inside scans only objects made inside: everything older is frozen. Late in
    a test run this process holds torch, jax, Ray and the rest, and a full collection took
    seconds; the batches' garbage is all new."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("kind", ["numpy view", "torch.from_numpy", "torch DLPack", "jax"])
def test_kept_tensors_stay_intact_across_many_batches(kind: str) -> None:
    if kind.startswith("torch"):
        torch = pytest.importorskip("torch")
    if kind == "jax":
        jax = pytest.importorskip("jax")
        jnp = pytest.importorskip("jax.numpy")
    transform = ImageTransform(resize=(8, 8))
    loader = Loader(
        _storage(96),
        batch_size=4,
        transform=transform,
        sampling=Sampling(shuffle="none", in_order=True),
        throughput=Throughput(pin_memory=False),
    )
    kept = []
    with _collections_of_new_objects_only():
        for batch in loader:
            with batch:
                data = batch.data
                if kind == "numpy view":
                    view = data[1:]
                elif kind == "torch.from_numpy":
                    view = torch.from_numpy(data)
                elif kind == "torch DLPack":
                    view = torch.from_dlpack(data)
                else:
                    view = jnp.from_dlpack(data) if jax.default_backend() == "cpu" else jnp.asarray(data)
                del data
                kept.append((batch.keys, view))
            gc.collect()  # every batch is released and collected; only the views remain
    for keys, view in kept:
        values = np.asarray(view)
        first = int(keys[1 if kind == "numpy view" else 0][1:])
        assert values.reshape(len(values), -1)[0].max() == first, f"batch {keys} was overwritten"
