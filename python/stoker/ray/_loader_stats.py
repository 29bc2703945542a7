"""`RayLoaderStats`: where a `RayLoader`'s thread spent its time, and the verdict it leads to."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RayLoaderStats"]


@dataclass(frozen=True)
class RayLoaderStats:
    """Where the loader's thread spent its time, since the loader was made.

    Attributes:
        batches, rows: Delivered so far.
        upstream_seconds: Waiting for Ray's iterator (the Ray pipeline producing blocks).
        copy_seconds: Copying rows into batch memory.
        elapsed_seconds: The thread's running time, waits for room in the queue included.
    """

    batches: int
    rows: int
    upstream_seconds: float
    copy_seconds: float
    elapsed_seconds: float

    @property
    def verdict(self) -> str:
        """One line: which side limits the batches the loop gets (pair it with the data-wait meter:
        a loop that does not wait is limited by its own compute, whatever this says)."""
        rate = self.rows / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0
        busy = self.upstream_seconds + self.copy_seconds
        if busy < 0.5 * self.elapsed_seconds:
            return f"the training loop sets the pace: batches were ready ahead of it ({rate:.0f} rows/s delivered)"
        if self.upstream_seconds >= self.copy_seconds:
            share = 100 * self.upstream_seconds / max(self.elapsed_seconds, 1e-9)
            return (
                f"the Ray Data pipeline is the limit: the loader waited on it {share:.0f}% of the time ({rate:.0f} rows/s); "
                "give its slowest map_batches more concurrency or the cluster more CPUs"
            )
        return f"copying rows into batch memory is the limit ({rate:.0f} rows/s); make the rows smaller (uint8, resized in Ray)"
