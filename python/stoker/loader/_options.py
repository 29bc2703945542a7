"""The Loader's options, grouped by concern: what order (`Sampling`), how remote reads are kept in
flight (`Reads`), what a bad sample does (`FailurePolicy`), and how much runs at once
(`Throughput`). Each is checked where it is built, so a wrong value fails on the line that wrote
it, and each prints as the call that would build it again.

The keywords they replace (``Loader(shuffle=..., on_error=...)``) still work for one release,
each with a `DeprecationWarning` naming the new spelling (`from_keywords`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Literal

from .._deprecation import warn_deprecated
from ..errors import ConfigurationError, check_on_error
from ..failures import OnError
from ..sampling import Buckets, LengthBuckets
from ..storage.policies import PRICE_TABLES, PriceTable
from ._arguments import check_integer, check_number
from .filters import Where

__all__ = ["SHUFFLES", "FailurePolicy", "Reads", "Sampling", "Shuffle", "Throughput", "from_keywords"]

Shuffle = Literal["uniform", "block", "none"]
SHUFFLES: tuple[Shuffle, ...] = ("uniform", "block", "none")


def _shuffle(value: Any) -> Shuffle:
    """``value`` as one of `SHUFFLES`; the old booleans (True: uniform, False: none) are taken with
    a deprecation warning."""
    if value is True or value is False:
        new: Shuffle = "uniform" if value else "none"
        warn_deprecated(f'shuffle={value} is now shuffle="{new}"', stacklevel=5)
        return new
    if value not in SHUFFLES:
        raise ConfigurationError(f'shuffle must be "uniform", "block" or "none" (as stoker bench --shuffle), got {value!r}')
    shuffle: Shuffle = value
    return shuffle


@dataclass(frozen=True)
class Sampling:
    """Which samples this rank gets, in what order.

    Args:
        shuffle: ``"uniform"``: a seeded shuffle per epoch; ``"block"``: the block shuffle (each
            rank reads a few of the storage's blocks at a time, shuffled together: for object
            stores and Parquet; see `stoker.sampling.block_order`), and the storage streams whole
            blocks; ``"none"``: storage order. The same words as ``stoker bench --shuffle``.
        shuffle_window: With ``"block"``, blocks per rank shuffled together (32: with 8 MB blocks,
            256 MB held per rank; wider mixes better, see `stoker.sampling.shuffle_quality`).
        seed: Seeds the shuffle and every sample's augmentation, with the epoch.
        rank: This process's rank. Left out, it is found (`stoker.distributed.discover_world`):
            from an initialized ``torch.distributed`` process group, else ``RANK`` (as
            ``torchrun`` sets it), else 0.
        world_size: How many ranks share the data; left out, found as ``rank`` is (else 1).
        pad: Pad ranks to equal counts by repeating samples (marked in ``batch.padding``);
            False drops the uneven tail instead.
        in_order: Deliver batches in the sampler's order (a slow batch then holds the others
            back); False (default) delivers each as it is ready, every sample keeping its identity.
        buckets: Batch images by shape (`stoker.sampling.Buckets`): each sample's size is read
            from its header once, it goes to the bucket nearest its aspect ratio, and every
            batch is one bucket's, decoded by the Loader's ``transform`` (an `ImageTransform`
            without a resize or crop of its own) resized to cover the bucket's shape and
            cropped. Every rank takes the same number of steps; a bucket's last partial batch
            waits for a later epoch (`Loader.bucket_counts` counts them). Batches are read whole
            (no per-sample prefetch); the shuffle is ``"uniform"`` within each bucket and across
            its batches. Audio and video by length (`stoker.sampling.LengthBuckets`): each file's
            duration or frame count is read from its container's header once, it goes to the
            longest bucket it fills, and every batch is one bucket's, decoded by the Loader's
            `AudioTransform` (the bucket's seconds as its window) or `VideoTransform` (the
            bucket's frames as its clip).
        where: Only the samples this filter keeps, worked out once over the storage's metadata
            columns (Parquet, Lance) or a side table keyed by sample key (`Where`), never per
            read: ``"aesthetic >= 5.5 and width >= 512"``, ``"language in ['en', 'de']"``
            (columns, constants: numbers, text, true/false; comparisons ``== != < <= > >=``,
            chained as in Python: ``"512 <= width < 4096"``; ``in`` and ``not in`` a list;
            ``and``, ``or``, ``not``, parentheses; parsed, never evaluated as Python). Ranks get equal counts of the kept samples; the filter is part
            of the fingerprint. One that keeps nothing, or names a column that is not there, is
            a `ConfigurationError` when the Loader is made.

    Raises:
        ConfigurationError: An unknown shuffle, or a number out of range.
        TypeError: A value of the wrong type.
    """

    shuffle: Shuffle = "uniform"
    shuffle_window: int = 32
    seed: int = 0
    rank: int | None = None
    world_size: int | None = None
    pad: bool = True
    in_order: bool = False
    buckets: Buckets | LengthBuckets | None = None
    where: str | Where | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shuffle", _shuffle(self.shuffle))
        if self.where is not None and not isinstance(self.where, (str, Where)):
            raise TypeError(f"where must be a filter expression (text) or a stoker.loader.Where, got {type(self.where).__name__}")
        if self.buckets is not None and not isinstance(self.buckets, (Buckets, LengthBuckets)):
            raise TypeError(f"buckets must be a stoker.sampling.Buckets or LengthBuckets, got {type(self.buckets).__name__}")
        check_integer("shuffle_window", self.shuffle_window)
        check_integer("seed", self.seed, minimum=0)
        check_integer("rank", self.rank, minimum=0, optional=True)
        check_integer("world_size", self.world_size, optional=True)


@dataclass(frozen=True)
class Reads:
    """How reads are kept in flight (most of it matters for network storage).

    Args:
        fetch_concurrency: Batches being read at once (default 4, or 8 for network storage, to
            start; the Loader tunes it live unless it is given here).
        sample_prefetch: Fetch per sample with out-of-order assembly and slow start, the
            Cassandra paper's incremental prefetch (default: on for network storage).
        ramp_every: With ``sample_prefetch``, consumed batches per extra batch in flight while
            ramping up (the Cassandra paper: 4).
        stall_patience: With ``sample_prefetch``, least seconds a batch waits on stalled requests
            before more are requested or they are sent again (see `OutOfOrderPrefetcher`).
        hedge: With ``sample_prefetch``, send stalled requests again when no more can be
            requested (at the cap, in order, at the end of an epoch); False waits for them.
        prices: What network storage's requests cost, for the estimate in ``stats().storage``
            and the end-of-epoch log: ``"store"`` (the default) for the store's own list prices
            (S3's for ``s3://`` and Cassandra, Google's for ``gs://``, Azure's for ``az://``), a
            name in `stoker.storage.PRICE_TABLES` (``"aws-s3-standard"``, ``"gcs-standard"``,
            ``"azure-blob-hot"``, ``"cloudflare-r2"``), your own `stoker.storage.PriceTable`, or
            None for no estimate.

    Raises:
        ConfigurationError: A number out of range.
        TypeError: A value of the wrong type.
    """

    fetch_concurrency: int | None = None
    sample_prefetch: bool | None = None
    ramp_every: int = 4
    stall_patience: float = 0.05
    hedge: bool = True
    prices: str | PriceTable | None = "store"

    def __post_init__(self) -> None:
        if isinstance(self.prices, str) and self.prices != "store" and self.prices not in PRICE_TABLES:
            raise ConfigurationError(f"prices must be 'store', one of {sorted(PRICE_TABLES)} or a PriceTable, got {self.prices!r}")
        check_integer("fetch_concurrency", self.fetch_concurrency, optional=True)
        check_integer("ramp_every", self.ramp_every)
        check_number("stall_patience", self.stall_patience)


@dataclass(frozen=True)
class FailurePolicy:
    """What a sample that cannot be read or decoded does (missing, corrupt, failing its checksum,
    over the pixel limit, the ``decode`` function raising). Whatever the policy, every bad sample
    is listed in ``Loader.failures``, counted in its stats, and summed up in one warning per
    epoch. An unreachable store is not a bad sample: it is retried to the storage's deadline,
    then `stoker.errors.StorageUnavailableError` is raised.

    Args:
        on_error: ``"raise"`` stops with `stoker.errors.SampleError` naming it; ``"skip"`` puts
            another sample in its slot, drawn from (seed, epoch, position) so a resumed run makes
            the same choice (``batch.replaced`` marks it); ``"zero"`` zero-fills the slot and
            marks it invalid.
        max_bad_samples: With ``"skip"`` or ``"zero"``: bad samples allowed per epoch, as a
            count, or as a fraction (below 1.0) of this rank's epoch, rounded up; past it the
            epoch stops with `stoker.errors.TooManyBadSamplesError`. None: no limit.
        quarantine: A file to append every bad sample to (JSON lines: key, stage, reason,
            epoch, position, action, source), to fix or drop them later.
        max_failures: Batches a stage may fail on (an error outside any one sample) before the
            epoch stops with an error.

    Raises:
        ConfigurationError: An unknown policy or a budget out of range.
    """

    on_error: OnError = "raise"
    max_bad_samples: int | float | None = 0.01
    quarantine: str | os.PathLike[str] | None = None
    max_failures: int | None = 0

    def __post_init__(self) -> None:
        check_on_error(self.on_error)
        budget = self.max_bad_samples
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget < 0 or (isinstance(budget, float) and budget >= 1.0)
        ):
            raise ConfigurationError(f"max_bad_samples must be a count >= 0 or a fraction below 1.0, got {budget!r}")
        check_integer("max_failures", self.max_failures, minimum=0, optional=True)


@dataclass(frozen=True)
class Throughput:
    """How much runs at once, and where batches are written.

    With ``autotune`` (the default), the Loader moves what is left unset while it runs: batches
    decoded at once, reads in flight, and finished batches kept ready, towards the training loop
    waiting for data at most ``wait_target`` of the time with the fewest threads, requests and
    bytes that achieve it (see `stoker.pipeline.Tuner`). A value given here pins that knob.

    Args:
        decode_concurrency: Batches being decoded at once (default: the number of cores to start).
        prefetch: Finished batches kept ready ahead of the training loop (default: 2 to start).
        pin_memory: Decode into page-locked host buffers when CUDA is available (``"auto"`` and
            True; False never pins), for asynchronous copies with `stoker.device.to_device`.
        stats_interval: Seconds between the timeline samples of each epoch's stats.
        autotune: Tune the unpinned knobs live; False keeps the starting values.
        wait_target: Share of the time the training loop may wait for data (the tuner's goal).
        memory_budget: Bytes the batches in flight and kept ready may hold at most, as the
            tuner counts them (default: a tenth of the machine's memory, at most 4 GiB).

    Raises:
        ConfigurationError: A number out of range, or an unknown ``pin_memory``.
        TypeError: A value of the wrong type.
    """

    decode_concurrency: int | None = None
    prefetch: int | None = None
    pin_memory: bool | Literal["auto"] = "auto"
    stats_interval: float = 0.25
    autotune: bool = True
    wait_target: float = 0.02
    memory_budget: int | None = None

    def __post_init__(self) -> None:
        check_integer("decode_concurrency", self.decode_concurrency, optional=True)
        check_integer("prefetch", self.prefetch, minimum=0, optional=True)
        check_number("stats_interval", self.stats_interval)
        check_number("wait_target", self.wait_target)
        check_integer("memory_budget", self.memory_budget, optional=True)
        if not isinstance(self.autotune, bool):
            raise TypeError(f"autotune must be True or False, got {type(self.autotune).__name__}")
        if self.wait_target >= 1:
            raise ConfigurationError(f"wait_target is a share of the time, below 1 (0.02 is 2%), got {self.wait_target!r}")
        if self.pin_memory not in (True, False, "auto"):
            raise ConfigurationError(f'pin_memory must be True, False or "auto", got {self.pin_memory!r}')


_GROUPS: dict[str, type] = {"sampling": Sampling, "reads": Reads, "failure_policy": FailurePolicy, "throughput": Throughput}
_OLD_KEYWORDS = {name.name: group for group, kind in _GROUPS.items() for name in fields(kind)}


def from_keywords(given: dict[str, Any], keywords: dict[str, Any]) -> dict[str, Any]:
    """The option objects a Loader runs with: those ``given`` (``{"sampling": Sampling(...) or
    None, ...}``), with the old keywords folded in, each with a warning naming its new spelling.

    Raises:
        TypeError: An unknown keyword, or an old keyword beside the option object it belongs to.
    """
    if "failures" in keywords:  # the group's old name: the records are `Loader.failures`
        if given["failure_policy"] is not None:
            raise TypeError("give failure_policy= only (failures= is its old name)")
        warn_deprecated("Loader(failures=...) is now Loader(failure_policy=...)", stacklevel=4)
        given = {**given, "failure_policy": keywords.pop("failures")}
    unknown = sorted(set(keywords) - set(_OLD_KEYWORDS))
    if unknown:
        raise TypeError(f"Loader() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
    result: dict[str, Any] = {}
    for group, kind in _GROUPS.items():
        mine = {name: value for name, value in keywords.items() if _OLD_KEYWORDS[name] == group}
        option = given[group]
        if option is not None and not isinstance(option, kind):
            raise TypeError(f"{group} must be a stoker.{kind.__name__}, got {type(option).__name__}")
        if mine and option is not None:
            raise TypeError(f"give {', '.join(sorted(mine))} inside {group}={kind.__name__}(...), not beside it")
        if mine:
            old = ", ".join(f"{name}={value!r}" for name, value in mine.items())
            if isinstance(mine.get("shuffle"), bool):
                mine["shuffle"] = "uniform" if mine["shuffle"] else "none"
            new = ", ".join(f"{name}={value!r}" for name, value in mine.items())
            warn_deprecated(f"Loader({old}) is now Loader({group}=stoker.{kind.__name__}({new}))", stacklevel=4)
            option = kind(**mine)
        result[group] = option if option is not None else kind()
    return result
