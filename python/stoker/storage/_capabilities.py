"""What a storage may do beyond reading samples, each a protocol of its own that a backend opts into
by defining its members (no base class needed), and that the Loader checks for explicitly
(``isinstance(storage, BlockStorage)``) before it relies on it. A backend without one simply does not offer that
feature: a Loader over it refuses ``Sampling(shuffle="block")``, or ``extra=``, with a message
that names the capability.

- `BlockStorage`: samples lie in blocks that one large read serves (tar shards, Parquet row
  groups, shards on an object store): the block shuffle reads a few blocks at a time.
- `MemberStorage`: a sample has other members beside its payload (WebDataset's ``.txt``, ``.json``).
- `EpochStorage`: the samples change from one epoch to the next (a weighted mixture's draw).
- `ColumnStorage`: samples have columns beside the payload (Parquet, Lance) that can be read for
  every sample without the payloads: bucketing takes sizes and durations from them.
- `LatencyReporting`: the store reports how long its requests take (network storage), from which
  the Loader sets its first patience with a stalled batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["BlockStorage", "ColumnStorage", "EpochStorage", "LatencyReporting", "MemberStorage"]


@runtime_checkable
class BlockStorage(Protocol):
    """Samples stored in blocks: runs of consecutive samples that one large read serves."""

    def block_sizes(self) -> list[int] | None:
        """Samples in each block, in storage order (they cover every sample), or None where this
        storage happens to have no blocks (an object store holding one object per sample)."""
        ...

    def max_open_blocks(self) -> int | None:
        """How many blocks the storage keeps in memory at once (its block cache over a mean
        block's bytes), which bounds how many the block shuffle mixes; None: no bound."""
        ...

    def stream_blocks(self) -> None:
        """Read whole blocks from now on, where that pays: ``Sampling(shuffle="block")`` calls
        it, as its order reads a few blocks at a time."""
        ...

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """Start reading ``blocks`` (numbers in `block_sizes` order) without waiting: the block
        shuffle knows its next blocks before their first sample is asked for. A read that fails
        here is read again, and its error reported, when a sample of the block is asked for.
        Storage whose reads are fast may do nothing."""
        ...


@runtime_checkable
class MemberStorage(Protocol):
    """Samples with other members beside the payload (WebDataset's ``.txt``, ``.json``...)."""

    def try_read_members(self, indices: Sequence[int], extensions: Sequence[str]) -> list[dict[str, Any] | Exception]:
        """The members ``extensions`` of each sample at ``indices``, decoded (``txt`` as text,
        ``json`` parsed, others as bytes); an exception in place of a sample that lacks one."""
        ...


@runtime_checkable
class ColumnStorage(Protocol):
    """Samples in a table whose other columns can be read whole, without the payloads."""

    def read_column(self, name: str) -> Any:
        """Every sample's value in the numeric column ``name``, in storage order, as a float64
        array (NaN where null).

        Raises:
            StorageError: No such column, or one that is not numeric.
        """
        ...


@runtime_checkable
class EpochStorage(Protocol):
    """Samples that change per epoch: the Loader calls `set_epoch` and reads ``keys`` and
    ``labels`` again at every epoch."""

    epoch: int | None
    """The epoch `set_epoch` last started."""

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: its samples become ``keys`` and ``labels``."""
        ...


@runtime_checkable
class LatencyReporting(Protocol):
    """A store that times its requests."""

    def request_latencies(self) -> Sequence[float]:
        """Seconds taken by recent requests (opening included); empty: none yet."""
        ...


def has_blocks(storage: object) -> bool:
    """Whether ``storage`` is a `BlockStorage` that has blocks now."""
    return isinstance(storage, BlockStorage) and storage.block_sizes() is not None
