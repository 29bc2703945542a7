"""Batches onto the accelerator: page-locked host memory, copies on a side stream, overlap.

With CUDA, the Loader decodes straight into page-locked (pinned) buffers, so the host-to-device
copy is a DMA at full PCIe speed and can run asynchronously. `to_device` issues each batch's copy
on a dedicated stream one batch ahead of the training loop, records an event, and makes the
loop's stream wait on that event before the batch is used, so compute on batch i overlaps the
copy of batch i+1. The host buffer is held until its copy's event has completed, so the Loader's
buffer pool cannot hand it out again while the DMA still reads it (a buffer's lease ends only when
nothing made from it is left). Without CUDA everything stays on the CPU and the same code runs.

JAX: `to_jax` puts batches on a JAX device one batch ahead (``jax.device_put`` is asynchronous).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["DeviceBatch", "HostBatch", "to_device", "to_jax"]


class HostBatch(Protocol):
    """What the transfer reads of a batch in host memory (a `stoker.Batch` is one): the arrays
    to move, and its number for messages. This package sits below the Loader and never imports
    it."""

    data: Any
    labels: np.ndarray
    valid: np.ndarray
    index: int


@dataclass
class DeviceBatch:
    """A batch on the device, with the host batch it came from (keys, validity, positions)."""

    data: Any
    labels: Any
    valid: Any
    host: HostBatch


def to_device(batches: Iterable[HostBatch], device: str = "cuda", *, non_blocking: bool = True) -> Iterator[DeviceBatch]:
    """Yield batches as torch tensors on ``device``, each copied one batch ahead on a side stream.

    Args:
        batches: A `stoker.Loader` (or any iterable of `Batch` with array data).
        device: ``"cuda"``, ``"cuda:1"``, ``"cpu"``...
        non_blocking: Asynchronous copies (needs pinned memory to be truly asynchronous).
    """
    import torch

    target = torch.device(device)
    use_stream = target.type == "cuda"
    stream = torch.cuda.Stream(device=target) if use_stream else None
    pending: deque[tuple[DeviceBatch, Any]] = deque()

    def issue(batch: HostBatch) -> tuple[DeviceBatch, Any]:
        if not isinstance(batch.data, np.ndarray):
            raise TypeError(
                f"to_device moves batches whose data is one array (a Loader with a transform gives them); batch {batch.index} holds "
                f"a {type(batch.data).__name__} (a decode function gives a list per sample): give the Loader a transform, or stack "
                "the samples yourself"
            )
        host_data = torch.from_numpy(batch.data)
        host_labels = torch.from_numpy(batch.labels)
        host_valid = torch.from_numpy(batch.valid)
        if stream is None:
            return DeviceBatch(host_data.to(target), host_labels.to(target), host_valid.to(target), batch), None
        with torch.cuda.stream(stream):
            moved = DeviceBatch(
                host_data.to(target, non_blocking=non_blocking),
                host_labels.to(target, non_blocking=non_blocking),
                host_valid.to(target, non_blocking=non_blocking),
                batch,
            )
            done = torch.cuda.Event()
            done.record(stream)
        return moved, done

    with _held(batches, ahead=1) as release:
        for batch in batches:
            pending.append(issue(batch))
            if len(pending) < 2:
                continue
            moved, done = pending.popleft()
            release(moved.host)
            yield _ready(moved, done)
        while pending:
            moved, done = pending.popleft()
            release(moved.host)
            yield _ready(moved, done)


@contextlib.contextmanager
def _held(batches: Iterable[HostBatch], *, ahead: int) -> Iterator[Callable[[HostBatch], None]]:
    """While a wrapper reads ahead of the training loop, a `Loader` counts the batches it holds
    as not delivered (`Loader.hold_deliveries`): a checkpoint taken meanwhile resumes exactly.
    ``ahead``: the batches the wrapper holds while the loop runs a step. Gives the function that
    hands one on (a no-op for other iterables)."""
    hold = getattr(batches, "hold_deliveries", None)
    if hold is None:
        yield lambda batch: None
        return
    with hold(ahead=ahead):
        yield batches.release  # type: ignore[attr-defined]


def _ready(moved: DeviceBatch, done: Any) -> DeviceBatch:
    if done is not None:
        import torch

        # The loop's stream waits for the copy; the tensors are then safe to use on it.
        torch.cuda.current_stream(moved.data.device).wait_event(done)
        for tensor in (moved.data, moved.labels, moved.valid):
            tensor.record_stream(torch.cuda.current_stream(moved.data.device))
        # The host buffer (moved.host.data) is referenced until this batch is dropped by the
        # loop, after the copy completed: the pool cannot reuse it under the DMA.
        done.synchronize()
    return moved


def to_jax(batches: Iterable[HostBatch], device: Any = None, *, ahead: int = 2) -> Iterator[tuple[Any, Any, HostBatch]]:
    """Yield ``(data, labels, batch)`` as JAX arrays on ``device`` (default: JAX's first),
    transfers issued ``ahead`` batches early."""
    import jax

    target = device or jax.devices()[0]
    pending: deque[tuple[Any, Any, HostBatch]] = deque()
    with _held(batches, ahead=ahead) as release:
        for batch in batches:
            pending.append((jax.device_put(batch.data, target), jax.device_put(batch.labels, target), batch))
            if len(pending) > ahead:
                moved = pending.popleft()
                release(moved[2])
                yield moved
        while pending:
            moved = pending.popleft()
            release(moved[2])
            yield moved
