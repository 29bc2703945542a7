"""Storage errors: each names the file (and the sample, where there is one)."""

from __future__ import annotations

__all__ = ["CorruptSampleError", "ShardError", "StaleIndexError", "StorageError"]


class StorageError(OSError):
    """A dataset cannot be opened or read."""


class ShardError(StorageError):
    """A tar shard is truncated, malformed, or does not match its index."""


class StaleIndexError(StorageError):
    """An index no longer matches the data it describes (the data changed after indexing)."""


class CorruptSampleError(StorageError):
    """A sample's bytes fail their checksum."""
