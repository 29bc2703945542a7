"""Storage errors: each names the file (and the sample, where there is one)."""

from __future__ import annotations

__all__ = ["CorruptSampleError", "ShardError", "StaleIndexError", "StorageError", "StorageUnavailableError"]


class StorageError(OSError):
    """A dataset cannot be opened or read."""


class ShardError(StorageError):
    """A tar shard is truncated, malformed, or does not match its index."""


class StaleIndexError(StorageError):
    """An index no longer matches the data it describes (the data changed after indexing)."""


class CorruptSampleError(StorageError):
    """A sample's bytes fail their checksum."""


class StorageUnavailableError(StorageError):
    """A store stayed unreachable (refused or lost connections, timeouts, 5xx, throttling) past
    the retry deadline. Never a per-sample failure to skip: the samples were not read, so nothing
    was delivered, and a resume reads them again.

    Attributes:
        store: The store, e.g. ``s3://bucket/prefix`` (never credentials).
        samples: The samples that could not be read (names or URLs).
        seconds: How long the reads kept trying.
    """

    def __init__(self, message: str, *, store: str = "", samples: tuple[str, ...] = (), seconds: float = 0.0) -> None:
        super().__init__(message)
        self.store = store
        self.samples = samples
        self.seconds = seconds

    def __reduce__(self) -> tuple[object, ...]:  # keeps the attributes across processes
        return (_rebuild_unavailable, (str(self), self.store, self.samples, self.seconds))


def _rebuild_unavailable(message: str, store: str, samples: tuple[str, ...], seconds: float) -> StorageUnavailableError:
    return StorageUnavailableError(message, store=store, samples=samples, seconds=seconds)


class StorageClosedError(StorageError):
    """The storage was closed while something (a Loader) still read from it: close a storage
    after the loop that reads it ends, or open it with ``with`` around that loop."""
