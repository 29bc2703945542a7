"""Device transfer: pinned batch buffers, side-stream host-to-device copies, JAX placement."""

from ._transfer import DeviceBatch, pinned_allocator, to_device, to_jax

__all__ = ["DeviceBatch", "pinned_allocator", "to_device", "to_jax"]
