"""Device transfer: pinned batch buffers, side-stream host-to-device copies, JAX placement."""

from ._buffers import BufferPool, pinned_allocator
from ._tensors import as_tensors
from ._transfer import DeviceBatch, HostBatch, to_device, to_jax

__all__ = ["BufferPool", "as_tensors", "DeviceBatch", "HostBatch", "pinned_allocator", "to_device", "to_jax"]
