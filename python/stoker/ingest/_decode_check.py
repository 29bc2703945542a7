"""The decode check of `stoker convert`: what is packed must be what a Loader can use.

Before a dataset is written, every sample is read once: a file of zero bytes is left out, and an
image (``.jpg``, ``.jpeg``, ``.png``, ``.webp``) is decoded in full by the native core, on every
core (the decoder releases the GIL), and left out when it does not decode. Other files (audio,
video, text) are checked by their bytes only, and the report says so. What is left out is listed
with why, never packed and then counted as verified.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..storage import Storage

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")


@dataclass
class DecodeCheck:
    """What the check found.

    Attributes:
        good: The keys to pack, in source order.
        skipped: ``(key, why)`` for each sample left out.
        decoded: Images decoded in full.
        bytes_only: Samples of other kinds, checked only for being non-empty.
    """

    good: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    decoded: int = 0
    bytes_only: int = 0

    def describe(self) -> str:
        """One line for the CLI: what was checked how."""
        parts = [f"{self.decoded:,} images decoded"]
        if self.bytes_only:
            parts.append(f"{self.bytes_only:,} other files checked by their bytes only")
        return ", ".join(parts)


def _problem(key: str, data: bytes) -> str | None:
    """Why ``data`` cannot be packed, or None."""
    if not data:
        return "empty (0 bytes)"
    if key.lower().endswith(IMAGE_EXTENSIONS):
        from ..ops import ImageDecodeError, decode_image

        try:
            decode_image(data, name=key)
        except ImageDecodeError as error:
            return str(error)
    return None


def _batches(source: Storage, size: int) -> Iterator[list[tuple[str, bytes]]]:
    batch: list[tuple[str, bytes]] = []
    for item in source.iter_sequential():
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def check_decodes(source: Storage, threads: int | None = None) -> DecodeCheck:
    """Read every sample of ``source`` and decode its images (`DecodeCheck` says what)."""
    found = DecodeCheck()
    with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as pool:
        for batch in _batches(source, 64):
            for (key, _), problem in zip(batch, pool.map(lambda item: _problem(*item), batch)):
                if problem is not None:
                    found.skipped.append((key, problem))
                    continue
                found.good.append(key)
                if key.lower().endswith(IMAGE_EXTENSIONS):
                    found.decoded += 1
                else:
                    found.bytes_only += 1
    return found


def checked(source: Storage, decode_check: bool) -> tuple[Storage, DecodeCheck | None]:
    """``source`` with what fails the decode check left out (a `SubsetStorage` view; ``source``
    itself when nothing fails), and the check, or (``source``, None) without it: what every
    writer (convert, upload to S3 or Cassandra) packs.

    Raises:
        StorageError: Every sample fails the check: there is nothing to write.
    """
    if not decode_check:
        return source, None
    from ..errors import StorageError
    from ..storage.views import SubsetStorage

    check = check_decodes(source)
    if not check.skipped:
        return source, check
    if not check.good:
        listed = "; ".join(f"{key}: {why}" for key, why in check.skipped[:3])
        raise StorageError(
            f"nothing to convert: all {len(check.skipped)} samples of {source.describe()} fail the decode check ({listed}...)"
        )
    return SubsetStorage(source, check.good), check


def with_check(report: Any, check: DecodeCheck | None) -> Any:
    """A writer's `ConversionReport` with what the check left out and how it checked."""
    if check is None:
        return report
    return dataclasses.replace(report, skipped=check.skipped, checked=check.describe())
