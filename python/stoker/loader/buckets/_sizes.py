"""Each sample's bucket: its size or length read from its header once (`stoker.ops.image_sizes`,
`stoker.ops.media_lengths`: nothing decoded), a batch of samples at a time, and saved in
``$STOKER_CACHE`` under the storage's content digest where it has one, so a later run, and the
node's other ranks, read no payload to bucket the dataset; or read from a table's columns
(`ColumnStorage`), checked against a sample of headers. A sample whose header cannot be read
goes to no bucket: it is never read by a bucketed epoch, and the log names how many and the
first of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..._bounded import shown_logger
from ...errors import ConfigurationError
from ...observe import CpuLimits
from ...ops import VideoTransform, image_sizes, media_lengths
from ...ops.batch import Transform
from ...sampling import Buckets, LengthBuckets
from ...storage import ColumnStorage, Storage, cache_dir

__all__ = ["AnyBuckets", "assign_payloads", "bucket_numbers", "clip_capacities"]

AnyBuckets = Buckets | LengthBuckets

_logger = shown_logger("stoker.loader")

_SCAN_BATCH = 256
"""Payloads read at once to size them (one `try_read_indices`: coalesced on shards and LMDB)."""

_COLUMN_CHECKS = 32
"""Samples whose bucket from the storage's columns is checked against their own headers."""


def _scan(storage: Storage, measure: Callable[[list[Any]], tuple[np.ndarray, list[str | None]]], rows: int) -> np.ndarray:
    """``measure``'s rows for every sample (float64, ``(rows, len(storage))``), a batch of
    payloads at a time; zeros where a payload cannot be read or measured (named in the log)."""
    count = len(storage)
    values = np.zeros((rows, count), dtype=np.float64)
    unreadable: list[str] = []
    for start in range(0, count, _SCAN_BATCH):
        indices = list(range(start, min(count, start + _SCAN_BATCH)))
        payloads = storage.try_read_indices(indices)
        readable = [slot for slot, payload in enumerate(payloads) if not isinstance(payload, Exception)]
        measured, errors = measure([payloads[slot] for slot in readable])
        chosen = np.array(indices, dtype=np.int64)[readable]
        values[:, chosen] = measured
        failed = set(indices) - {int(index) for index, error in zip(chosen, errors) if error is None}
        unreadable.extend(str(storage.keys[index]) for index in sorted(failed))
    if unreadable:
        _logger.warning(
            "%s: %d sample(s) whose size or length cannot be read from the header go to no bucket and are not read (first: %s)",
            storage.describe(),
            len(unreadable),
            ", ".join(unreadable[:3]),
        )
    return values


def _measure_images(payloads: list[Any]) -> tuple[np.ndarray, list[str | None]]:
    sizes = image_sizes(payloads)
    return np.stack([sizes.widths, sizes.heights]).astype(np.float64), sizes.errors


def _media_measure(kind: str) -> Callable[[list[Any]], tuple[np.ndarray, list[str | None]]]:
    def measure(payloads: list[Any]) -> tuple[np.ndarray, list[str | None]]:
        lengths = media_lengths(payloads, kind, threads=CpuLimits.read().threads)
        rows = [lengths.seconds, lengths.frames, lengths.rates, lengths.widths, lengths.heights]
        return np.stack(rows).astype(np.float64), lengths.errors

    return measure


def _measured(storage: Storage, kind: str) -> np.ndarray:
    """Every sample's header facts (images: width, height; audio and video: seconds, frames,
    rate, width, height), saved under the storage's content digest where it has one."""
    digest = getattr(storage, "content_digest", None)
    rows = 2 if kind == "image" else 5
    saved = None
    if callable(digest):
        key = hashlib.sha256(f"{kind}:{digest()}".encode()).hexdigest()[:32]
        saved = cache_dir("image-sizes" if kind == "image" else "media-lengths") / (key + ".npy")
        try:
            loaded = np.load(saved, allow_pickle=False)  # untrusted input: plain numbers only
            if loaded.shape == (rows, len(storage)) and loaded.dtype == np.float64:
                return loaded
        except (OSError, ValueError):
            pass
    values = _scan(storage, _measure_images if kind == "image" else _media_measure(kind), rows)
    if saved is not None:
        np.save(saved, values)
    return values


def clip_capacities(frames: np.ndarray, rates: np.ndarray, transform: VideoTransform) -> np.ndarray:
    """The longest clip (in frames) each video gives at ``transform``'s stride or rate, as its
    decode picks them (`clip_frames` in the core): frame k of a clip is k * stride frames on, or
    at k * rate / fps; ``clip="uniform"`` spreads any count over the video."""
    _, options = transform.__getnewargs_ex__()
    frames = np.asarray(frames, dtype=np.float64)
    if options["clip"] == "uniform" and options.get("fps") is None:
        return frames
    if options.get("fps") is None:
        return np.floor(np.maximum(frames - 1, -1) / options["stride"]) + 1
    step = np.divide(rates, options["fps"], out=np.zeros_like(frames), where=rates > 0)
    # Clip frame k is at floor(k * step + 1e-6); the clip fits while that is below the count.
    longest = np.floor(np.divide(frames - 1, step, out=np.zeros_like(frames), where=step > 0)) + 1
    for _ in range(2):  # the floor's epsilon can make the last one step over the end
        over = np.floor((longest - 1) * step + 1e-6) + 1 > frames
        longest[over] -= 1
    return np.where(step > 0, longest, 0.0)


def _capacities(buckets: AnyBuckets, transform: Transform | None, facts: np.ndarray) -> np.ndarray:
    """Each sample's longest window in the buckets' unit, from its header facts (seconds,
    frames, rate)."""
    if isinstance(transform, VideoTransform):
        return clip_capacities(facts[1], facts[2], transform)
    return facts[0]


def _assign_from_headers(storage: Storage, buckets: AnyBuckets, transform: Transform | None, indices: np.ndarray) -> np.ndarray:
    """Buckets of the samples at ``indices`` from their own headers (a small set)."""
    payloads = storage.try_read_indices(indices.tolist())
    readable = [slot for slot, payload in enumerate(payloads) if not isinstance(payload, Exception)]
    assigned = np.full(len(indices), -1, dtype=np.int16)
    assigned[readable] = assign_payloads(buckets, transform, [payloads[slot] for slot in readable])
    return assigned


def assign_payloads(buckets: AnyBuckets, transform: Transform | None, payloads: list[Any]) -> np.ndarray:
    """The buckets of a few payloads, from their own headers."""
    if isinstance(buckets, Buckets) and not isinstance(transform, VideoTransform):
        facts, _ = _measure_images(payloads)
        return buckets.assign(facts[0], facts[1])
    facts, _ = _media_measure("video" if isinstance(transform, VideoTransform) else "audio")(payloads)
    if isinstance(buckets, Buckets):
        return buckets.assign(facts[3], facts[4])
    return buckets.assign(_capacities(buckets, transform, facts))


def _column_capacities(storage: Storage, buckets: AnyBuckets, transform: Transform | None) -> tuple[np.ndarray, ...]:
    """What the buckets' columns say: (widths, heights) for images, (longest windows,) else."""
    if not isinstance(storage, ColumnStorage):
        raise ConfigurationError(f"{storage.describe()} has no columns to read sizes or lengths from: leave out columns= to read headers")
    if isinstance(buckets, Buckets):
        assert buckets.columns is not None
        return storage.read_column(buckets.columns[0]), storage.read_column(buckets.columns[1])
    assert buckets.column is not None
    values = storage.read_column(buckets.column)
    if isinstance(transform, VideoTransform):
        _, options = transform.__getnewargs_ex__()
        if options.get("fps") is not None:
            raise ConfigurationError("a video clip at a frame rate needs each video's own rate: leave out column= to read headers")
        values = clip_capacities(values, np.zeros_like(values), transform)
    return (values,)


def _check_columns(storage: Storage, buckets: AnyBuckets, transform: Transform | None, assigned: np.ndarray) -> None:
    """Buckets from the columns checked on `_COLUMN_CHECKS` samples spread over the dataset
    against their own headers: columns of another size (the original before a resize, another
    rendition) put samples in the wrong bucket, and are refused, not trusted."""
    checked = np.unique(np.linspace(0, len(storage) - 1, num=min(len(storage), _COLUMN_CHECKS)).astype(np.int64))
    from_headers = _assign_from_headers(storage, buckets, transform, checked)
    disagree = checked[(from_headers != assigned[checked]) & (from_headers >= 0)]
    if len(disagree):
        names = ", ".join(str(storage.keys[int(index)]) for index in disagree[:3])
        raise ConfigurationError(
            f"{storage.describe()}: the columns put {len(disagree)} of {len(checked)} samples checked in another bucket than their "
            f"files' headers do (first: {names}): give the columns of the stored files' sizes or lengths, or leave out columns= "
            "to read the headers"
        )


def bucket_numbers(storage: Storage, buckets: AnyBuckets, transform: Transform | None) -> np.ndarray:
    """Each sample's bucket (-1: none) from its size or length: from the storage's columns where
    the buckets name them (checked against a sample of headers), else from the headers, read
    once and saved where the storage has a content digest."""
    from_columns = (buckets.columns if isinstance(buckets, Buckets) else buckets.column) is not None
    if isinstance(buckets, Buckets):
        if from_columns:
            widths, heights = _column_capacities(storage, buckets, transform)
        elif isinstance(transform, VideoTransform):
            widths, heights = _measured(storage, "video")[3:5]
        else:
            widths, heights = _measured(storage, "image")
        assigned = buckets.assign(widths, heights)
    else:
        if from_columns:
            (capacities,) = _column_capacities(storage, buckets, transform)
        else:
            capacities = _capacities(buckets, transform, _measured(storage, "video" if isinstance(transform, VideoTransform) else "audio"))
        assigned = buckets.assign(capacities)
        short = np.flatnonzero((assigned < 0) & (capacities > 0))
        if len(short):
            _logger.warning(
                "%s: %d sample(s) shorter than the shortest bucket (%g) go to no bucket and are not read (first: %s); "
                'LengthBuckets(shorter="pad") pads audio into it instead',
                storage.describe(),
                len(short),
                min(buckets.lengths),
                ", ".join(str(storage.keys[int(index)]) for index in short[:3]),
            )
    if from_columns:
        _check_columns(storage, buckets, transform, assigned)
        unknown = np.flatnonzero(assigned < 0)
        if isinstance(buckets, LengthBuckets):
            unknown = unknown[~(capacities[unknown] > 0)]  # the short ones are named above
        if len(unknown):
            _logger.warning(
                "%s: %d sample(s) with no value in the columns go to no bucket and are not read (first: %s)",
                storage.describe(),
                len(unknown),
                ", ".join(str(storage.keys[int(index)]) for index in unknown[:3]),
            )
    return assigned
