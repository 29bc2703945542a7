"""Replay: a batch a run delivered, built again from its provenance ledger and the storage.

The ledger holds, per sample, the storage index, the length and CRC-32 of the bytes that were
read, the augmentation seed and the slot's flags; the transform is in its metadata. Replay reads
the same samples, checks every one against the ledger (a changed sample is named, not silently
decoded), and decodes them with the same seeds into a fresh batch: the same crops and flips, the
same padding slots, zero-filled slots zero again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _native
from ..errors import ProvenanceError, StorageError
from ..observe import ledger_metadata, read_ledger
from ..ops import ImageTransform
from ..ops.batch import allocate_batch
from ..ops.media import AudioTransform, VideoTransform
from ..storage import Storage, label_array, open_storage
from ._batch import Batch
from ._decode import decode_payloads
from .buckets import batch_transform, buckets_from_description

__all__ = ["replay"]

_TRANSFORMS: dict[str, Any] = {kind.__name__: kind for kind in (ImageTransform, AudioTransform, VideoTransform)}


# A replayed batch larger than this is refused before its memory is allocated: the transform
# comes from the ledger, which is input like any other (`replay`'s ``max_batch_bytes``).
MAX_BATCH_BYTES = 1 << 30
_COLUMNS = ("key", "index", "location", "length", "checksum", "position", "seed", "padding", "replaced", "valid", "batch")


def _transform(described: Any, ledger: object) -> Any:
    """The run's transform, built again from the ledger's description of it."""
    if described is None:
        return None
    try:
        kind = _TRANSFORMS.get(described["type"])
        if kind is None:
            raise ProvenanceError(f"{described['type']!r} is not a transform this stoker knows")
        arguments = {name: tuple(value) if isinstance(value, list) else value for name, value in described["arguments"].items()}
        return kind(**arguments)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as error:
        raise ProvenanceError(f"{ledger}: the ledger's transform cannot be built again ({type(error).__name__}: {error})") from error


def replay(
    ledger: str | os.PathLike[str],
    step: int,
    *,
    rank: int = 0,
    storage: Storage | str | os.PathLike[str] | None = None,
    decode: Callable[[bytes], Any] | None = None,
    verify: bool = True,
    max_batch_bytes: int = MAX_BATCH_BYTES,
    trust_ledger_source: bool = False,
) -> Batch:
    """Batch ``step`` of ``rank``, built again as the run delivered it.

    Args:
        ledger: The run's ledger directory (``loader.record_provenance(...)``).
        step: The rank's batch number since the run began (the ledger's ``step``).
        rank: Which rank's batch.
        storage: Where to read the samples. Without it, replay refuses and names the path or URL
            the ledger says the run opened, unless ``trust_ledger_source`` is set.
        decode: The run's ``decode`` function, where it used one instead of a transform.
        verify: Check each sample's length and CRC-32 against the ledger.
        max_batch_bytes: Refuse, before allocating it, a batch whose transform's output is larger
            (the ledger is input: a damaged one must not ask for any amount of memory).
        trust_ledger_source: Open the storage the ledger names when ``storage`` is not given. A
            ledger is input like any file: one rewritten by someone else could name their own
            server, which would then be sent this machine's credentials for that kind of store.
            Leave this off for a ledger you did not write yourself.

    Returns:
        The batch: ``data`` as the run's training loop got it (a fresh array), ``keys``,
        ``positions``, ``padding``, ``valid`` and ``replaced`` from the ledger.

    Raises:
        ProvenanceError: No such step, a damaged row, a transform that cannot be built or whose
            batch is larger than ``max_batch_bytes``, or a sample's bytes changed since (each one
            is named).
        StorageError: No ledger there, or no storage to read from: ``storage`` not given and
            ``trust_ledger_source`` not set (the ledger's source is named), or one that cannot be
            opened.
    """
    table = read_ledger(ledger, rank=rank)
    rows = table.filter(table.column("step").to_numpy() == step).to_pydict()
    if not rows["step"]:
        steps = table.column("step").to_numpy()
        span = f"{int(steps.min())}..{int(steps.max())}" if len(steps) else "none"
        raise ProvenanceError(f"{ledger}: rank {rank} recorded no step {step} (steps recorded: {span})")
    metadata = ledger_metadata(ledger, rank=rank)
    opened = not isinstance(storage, Storage)  # ours to close: opened from the ledger's source or a path
    if storage is None:
        source = metadata.get("source")
        if source is not None and not isinstance(source, str):
            raise ProvenanceError(f"{ledger}: the ledger's source is not a path or URL: {source!r}")
        if source is None:
            raise StorageError(f"{ledger}: the run's storage was not a path or URL; pass storage= to replay")
        if not trust_ledger_source:
            raise StorageError(
                f"{ledger}: the ledger says the run read {source!r}; replay opens only a storage you name: pass it as "
                "storage= (--storage), or trust_ledger_source=True (--storage-from-ledger) if you wrote this ledger"
            )
        try:
            storage = open_storage(source)
        except (OSError, ValueError) as error:
            raise StorageError(f"{ledger}: the run's storage {source!r} cannot be opened ({error}); pass storage= to replay") from error
    elif not isinstance(storage, Storage):
        storage = open_storage(storage)
    try:
        return _rebuild(ledger, step, rank, rows, metadata, storage, decode=decode, verify=verify, max_batch_bytes=max_batch_bytes)
    finally:
        if opened:
            storage.close()


def _rebuild(
    ledger: object,
    step: int,
    rank: int,
    rows: dict[str, list[Any]],
    metadata: dict[str, Any],
    storage: Storage,
    *,
    decode: Callable[[bytes], Any] | None,
    verify: bool,
    max_batch_bytes: int,
) -> Batch:
    """`replay`'s work once the ledger's rows and the storage are in hand."""
    transform = _transform(metadata.get("transform"), ledger)
    buckets = None
    if metadata.get("buckets") is not None:
        try:
            buckets = buckets_from_description(metadata["buckets"])
        except (KeyError, TypeError, ValueError) as error:
            raise ProvenanceError(f"{ledger}: the ledger's buckets cannot be built again ({type(error).__name__}: {error})") from error
        if transform is None:
            raise ProvenanceError(f"{ledger}: the ledger records buckets but no transform")
    damaged = [name for name in _COLUMNS if any(value is None for value in rows[name])]
    if damaged:
        raise ProvenanceError(f"{ledger}: step {step} of rank {rank} has damaged rows (no {', '.join(damaged)})")
    outside = [index for index in rows["index"] if not 0 <= index < len(storage)]
    if outside:
        raise ProvenanceError(f"{ledger}: step {step} of rank {rank} names samples {outside[:5]} outside the storage's {len(storage)}")
    indices = rows["index"]
    valid = np.asarray(rows["valid"], dtype=bool)
    padding = np.asarray(rows["padding"], dtype=bool)
    filled = ~valid & ~padding  # zero-filled in the run (a bad sample under on_error="zero")
    payloads: list[bytes | Exception] = list(storage.try_read_indices(indices))
    changed = []
    for slot, payload in enumerate(payloads):
        if filled[slot]:
            continue
        if isinstance(payload, Exception):
            changed.append(f"{rows['key'][slot]} ({rows['location'][slot]}): cannot be read: {payload}")
        elif verify and (len(payload) != rows["length"][slot] or _native.crc32(payload) != rows["checksum"][slot]):
            changed.append(
                f"{rows['key'][slot]} ({rows['location'][slot]}): {len(payload)} bytes with CRC-32 {_native.crc32(payload):08x}, "
                f"the ledger has {rows['length'][slot]} bytes with {rows['checksum'][slot]:08x}"
            )
    if changed:
        raise ProvenanceError(
            f"{ledger}: step {step} of rank {rank} cannot be replayed as it was: {len(changed)} sample(s) changed: " + "; ".join(changed)
        )
    for zeroed in np.flatnonzero(filled).tolist():
        payloads[zeroed] = ProvenanceError("zero-filled in the run")
    if buckets is not None:
        # Each batch took its bucket's shape or length: found again from its own samples' headers
        # (a replacement for a bad sample may have come from another bucket).
        replaced = np.asarray(rows["replaced"], dtype=bool)
        readable = [payload for slot, payload in enumerate(payloads) if not isinstance(payload, Exception) and not replaced[slot]]
        try:
            transform, _ = batch_transform(buckets, transform, readable)
        except ValueError as error:
            raise ProvenanceError(f"{ledger}: step {step} of rank {rank}: {error}") from error
    keys = list(rows["key"])
    seeds = [int(seed) for seed in rows["seed"]]
    data: Any
    if transform is not None:
        try:
            shape = allocate_batch(transform, 0).shape  # no memory yet: the shape of one sample
        except ValueError as error:
            raise ProvenanceError(f"{ledger}: the ledger's transform makes no fixed-size batch ({error})") from error
        recorded = metadata.get("sample_shape")
        if recorded is not None and list(shape[1:]) != recorded:
            raise ProvenanceError(f"{ledger}: the ledger's transform makes samples of shape {list(shape[1:])}, but it records {recorded!r}")
        size = len(keys) * int(np.prod(shape[1:], dtype=np.float64)) * np.dtype(transform.dtype).itemsize
        if size > max_batch_bytes:
            raise ProvenanceError(f"{ledger}: step {step} would take {size:,.0f} bytes, over max_batch_bytes={max_batch_bytes:,}")
        out = allocate_batch(transform, len(keys))
        data, _ = decode_payloads(payloads, keys=keys, seeds=seeds, transform=transform, decode=None, out=out)
        data[filled] = 0
    else:
        data = [decode(payload) if decode is not None and not isinstance(payload, Exception) else payload for payload in payloads]
        data = [None if isinstance(item, Exception) else item for item in data]
    return Batch(
        data=data,
        labels=label_array([storage.labels[index] for index in indices]),
        keys=keys,
        valid=valid,
        padding=padding,
        positions=np.asarray(rows["position"], dtype=np.int64),
        index=int(rows["batch"][0]),
        replaced=np.asarray(rows["replaced"], dtype=bool),
    )
