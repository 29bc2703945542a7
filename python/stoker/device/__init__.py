"""Device transfer: pinned batch buffers, side-stream host-to-device copies, JAX placement."""

from ._buffers import BufferPool, pinned_allocator
from ._transfer import DeviceBatch, HostBatch, to_device, to_jax

__all__ = ["BufferPool", "DeviceBatch", "HostBatch", "pinned_allocator", "to_device", "to_jax"]
