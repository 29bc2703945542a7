"""What the Loader asks of its storage's optional capabilities (`stoker.storage.BlockStorage`,
`MemberStorage`, `LatencyReporting`), each checked explicitly, with an error that names the
capability where a feature needs one the storage lacks."""

from __future__ import annotations

from collections.abc import Sequence

from .._bounded import shown_logger
from ..errors import ConfigurationError, StorageError
from ..ops import Captions
from ..storage import BlockStorage, EpochStorage, LatencyReporting, MemberStorage, Storage

__all__ = ["block_window", "check_extra", "request_latencies", "shuffle_blocks"]

_logger = shown_logger("stoker.loader")


def check_extra(extra: Sequence[str | Captions], storage: Storage) -> tuple[tuple[str, ...], Captions | None]:
    """``extra`` as member extensions and the `Captions` among them (whose member is read too),
    refused early when the storage has no members."""
    if isinstance(extra, (str, Captions)):
        extra = (extra,)
    captions = [item for item in extra if isinstance(item, Captions)]
    if len(captions) > 1:
        raise ConfigurationError("one Captions in extra: a batch has one caption per sample")
    names = [item for item in extra if not isinstance(item, Captions)]
    if not all(isinstance(extension, str) and extension for extension in names):
        raise TypeError(f"extra must be member extensions such as ('txt', 'json') and at most one Captions, got {extra!r}")
    members = tuple(dict.fromkeys([extension.lstrip(".") for extension in names] + [item.member.lstrip(".") for item in captions]))
    if not members:
        return members, (captions[0] if captions else None)
    if not isinstance(storage, MemberStorage):
        raise StorageError(
            f"{storage.describe()}: one payload per sample, no extra members beside it; extra= reads members of tar shards "
            "(WebDataset's .txt, .json...) and other columns of Parquet, Lance and save_to_disk datasets "
            "(a storage with members: stoker.storage.MemberStorage)"
        )
    # No sample is read: a storage whose kind of data has no members refuses now, saying why
    # (MDS or TFRecord records, of which stoker reads one field), not at the first batch.
    storage.try_read_members([], members)
    return members, (captions[0] if captions else None)


def block_window(storage: Storage, shuffle: str, window: int) -> int:
    """``window``, or fewer blocks where the storage cannot hold that many at once (then said
    in a warning: mixing fewer blocks lowers shuffle quality, and a bigger cache restores it)."""
    most = storage.max_open_blocks() if shuffle == "block" and isinstance(storage, BlockStorage) else None
    if most is None or most >= window:
        return window
    _logger.warning(
        "%s: the block shuffle mixes %d blocks, not shuffle_window=%d (of its Sampling): its block cache holds %d at once "
        "(a larger cache_bytes / block_cache_bytes mixes more)",
        storage.describe(),
        most,
        window,
        most,
    )
    return most


def shuffle_blocks(storage: Storage, shuffle: str) -> list[int] | None:
    """The block sizes a ``shuffle="block"`` Sampler needs, or None for the other shuffles.

    Raises:
        ConfigurationError: The storage has no blocks or changes its samples per epoch.
    """
    if shuffle != "block":
        return None
    blocks = storage.block_sizes() if isinstance(storage, BlockStorage) else None
    if blocks is None or isinstance(storage, EpochStorage):
        raise ConfigurationError(
            f'{storage.describe()} has no blocks to shuffle by (shuffle="block" needs shards, Parquet row groups or '
            'another storage with blocks: stoker.storage.BlockStorage); use shuffle="uniform"'
        )
    assert isinstance(storage, BlockStorage)
    storage.stream_blocks()
    return blocks


def request_latencies(storage: Storage) -> Sequence[float]:
    """What the store reports of its recent requests (`LatencyReporting`), or nothing."""
    return storage.request_latencies() if isinstance(storage, LatencyReporting) else ()
