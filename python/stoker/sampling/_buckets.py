"""`Buckets`: the shapes a variable-shape dataset is batched into, and which shape each sample
goes to.

Diffusion and vision-language models are trained on images of every aspect ratio; one fixed
shape crops away content (a 16:9 photo centre-cropped to a square loses 44% of its pixels). The
usual answer (SDXL's, kohya-ss's, diffusers') is a set of buckets of about the same pixel count,
sides multiples of 64, aspect ratios from tall to wide, and each image batched with others of the
bucket nearest its own aspect ratio, resized to cover that shape and cropped.

Assignment is array work over every sample's size (`assign`): the nearest bucket in log aspect
ratio (so 2:1 and 1:2 are as far from 1:1), by a sorted search, not a sample-by-bucket table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigurationError
from ._bucket_order import check_leftovers

__all__ = ["MAX_BUCKETS", "Buckets"]

MAX_BUCKETS = 4096
"""More shapes than any scheme uses; bucket numbers fit an int16."""

_MAX_SIDE = 1 << 16


@dataclass(frozen=True)
class Buckets:
    """Target shapes ``(height, width)`` a batch takes; each sample goes to the one nearest its
    aspect ratio.

    Args:
        shapes: The shapes, each ``(height, width)`` in pixels; kept in the order given (a
            bucket's number is its place here).
        crop: Where the overhang of an image resized to cover its bucket is cropped:
            ``"center"``, or ``"random"`` (seeded per sample, as every augmentation).
        columns: The storage's ``(width, height)`` columns to take each sample's size from
            (Parquet, Lance: `ColumnStorage`) instead of reading every file's header; a Loader
            checks a sample of them against the files' headers.
        leftovers: What becomes of each epoch's leftovers (each bucket's last partial batch,
            and the batches past a multiple of the ranks): ``"drop"`` (counted; a later epoch's
            shuffle gives them their turn) or ``"carry"`` (the next epoch reads them first of
            their bucket: that bucket's first batches hold them, wherever the epoch's shuffle of
            batches puts those, not at the epoch's start; every sample is read once per pass of
            its bucket). See `BucketOrder`.

    Raises:
        ConfigurationError: No shapes, a side that is not a positive whole number under 65,536,
            a shape given twice, more than `MAX_BUCKETS`, another crop, columns that are not
            two names, or another leftover policy.
    """

    shapes: tuple[tuple[int, int], ...]
    crop: str = "center"
    columns: tuple[str, str] | None = None
    leftovers: str = "drop"

    def __init__(
        self, shapes: Sequence[tuple[int, int]], crop: str = "center", columns: tuple[str, str] | None = None, leftovers: str = "drop"
    ) -> None:
        object.__setattr__(self, "leftovers", check_leftovers(leftovers))
        if crop not in ("center", "random"):
            raise ConfigurationError(f'crop must be "center" or "random", got {crop!r}')
        object.__setattr__(self, "crop", crop)
        if columns is not None and (len(columns) != 2 or not all(isinstance(name, str) and name for name in columns)):
            raise ConfigurationError(f"columns are the (width, height) columns' names, got {columns!r}")
        object.__setattr__(self, "columns", None if columns is None else (columns[0], columns[1]))
        checked: list[tuple[int, int]] = []
        for shape in shapes:
            try:
                height, width = shape
            except (TypeError, ValueError):
                raise ConfigurationError(f"a bucket is a (height, width) pair, got {shape!r}") from None
            for side in (height, width):
                if isinstance(side, bool) or not isinstance(side, (int, np.integer)) or not 0 < side < _MAX_SIDE:
                    raise ConfigurationError(f"bucket {shape!r}: sides must be whole numbers of pixels from 1 to {_MAX_SIDE - 1}")
            checked.append((int(height), int(width)))
        if not checked:
            raise ConfigurationError("no buckets: give at least one (height, width) shape")
        if len(checked) > MAX_BUCKETS:
            raise ConfigurationError(f"{len(checked)} buckets: at most {MAX_BUCKETS}")
        if len(set(checked)) != len(checked):
            twice = next(shape for shape in checked if checked.count(shape) > 1)
            raise ConfigurationError(f"bucket {twice} is given twice")
        object.__setattr__(self, "shapes", tuple(checked))

    @classmethod
    def from_budget(
        cls,
        pixels: int = 1024 * 1024,
        *,
        multiple: int = 64,
        max_aspect: float = 4.0,
        crop: str = "center",
        columns: tuple[str, str] | None = None,
        leftovers: str = "drop",
    ) -> Buckets:
        """SDXL's scheme: for every width that is a multiple of ``multiple``, the tallest height
        (also a multiple) whose area stays within ``pixels``, and the same shape turned on its
        side, from tall (1:``max_aspect``) to wide (``max_aspect``:1).

        Args:
            pixels: The pixel budget of a bucket (1024 x 1024 for SDXL).
            multiple: Both sides are multiples of it (64: the latent's 8 x 8 of an 8x VAE).
            max_aspect: The widest and tallest ratio kept.
            crop: As `Buckets`'s.
            columns: As `Buckets`'s.
            leftovers: As `Buckets`'s.

        Raises:
            ConfigurationError: A budget, multiple or ratio that gives no bucket.
        """
        if multiple < 1 or max_aspect < 1 or pixels < multiple * multiple:
            raise ConfigurationError(f"no bucket fits {pixels} pixels in multiples of {multiple} with aspect ratios up to {max_aspect}")
        found: set[tuple[int, int]] = set()
        for width in range(multiple, _MAX_SIDE, multiple):
            height = pixels // width // multiple * multiple
            if height < multiple:
                break
            if max(width / height, height / width) <= max_aspect:
                found.update({(height, width), (width, height)})  # tall and wide alike
        shapes = sorted(found, key=lambda shape: (shape[1] / shape[0], -shape[0] * shape[1]))  # tall to wide
        if not shapes:
            raise ConfigurationError(f"no bucket fits {pixels} pixels in multiples of {multiple} with aspect ratios up to {max_aspect}")
        return cls(shapes, crop, columns, leftovers)

    def __len__(self) -> int:
        return len(self.shapes)

    def labels(self) -> list[list[int]]:
        """Each bucket's ``[height, width]``, for reports and the ledger."""
        return [list(shape) for shape in self.shapes]

    def aspect_ratios(self) -> np.ndarray:
        """Each bucket's width over height."""
        return np.array([width / height for height, width in self.shapes])

    def assign(self, widths: np.ndarray, heights: np.ndarray) -> np.ndarray:
        """The bucket of each sample from its size: the nearest aspect ratio on a log scale (among
        buckets of one ratio, the largest); -1 where a size is unknown (0 or less). A progressive
        run's phases at several resolutions each use their own `Buckets`.

        Args:
            widths: Each sample's width in pixels.
            heights: Each sample's height, aligned.

        Returns:
            int16 bucket numbers, aligned with the samples.
        """
        widths = np.asarray(widths, dtype=np.float64)
        heights = np.asarray(heights, dtype=np.float64)
        known = (widths > 0) & (heights > 0)
        ratios = np.zeros(len(widths))
        ratios[known] = np.log(widths[known] / heights[known])
        buckets = np.log(self.aspect_ratios())
        areas = np.array([height * width for height, width in self.shapes], dtype=np.float64)
        # Buckets by log ratio, the larger first among equal ratios (several resolutions): the
        # nearest ratio is one of the two neighbours of a sample's place in that order.
        order = np.lexsort((-areas, buckets))
        sorted_ratios = buckets[order]
        place = np.searchsorted(sorted_ratios, ratios)
        below = np.clip(place - 1, 0, len(order) - 1)
        above = np.clip(place, 0, len(order) - 1)
        nearer_above = np.abs(sorted_ratios[above] - ratios) < np.abs(ratios - sorted_ratios[below])
        chosen = np.where(nearer_above, above, below)
        # Among buckets of the same ratio (several resolutions), the first (largest) of the run.
        chosen = np.searchsorted(sorted_ratios, sorted_ratios[chosen], side="left")
        result = order[chosen].astype(np.int16)
        result[~known] = -1
        return result

    def kept_area(self, widths: np.ndarray, heights: np.ndarray, assigned: np.ndarray) -> np.ndarray:
        """The share of each image's area a resize-to-cover and crop into its bucket keeps (1.0:
        nothing cropped away), NaN where unassigned."""
        widths = np.asarray(widths, dtype=np.float64)
        heights = np.asarray(heights, dtype=np.float64)
        shapes = np.array(self.shapes, dtype=np.float64).reshape(-1, 2)
        kept = np.full(len(widths), np.nan)
        valid = np.asarray(assigned) >= 0
        target_height, target_width = shapes[assigned[valid], 0], shapes[assigned[valid], 1]
        scale = np.maximum(target_width / widths[valid], target_height / heights[valid])  # cover the bucket
        kept[valid] = (target_width * target_height) / (widths[valid] * scale * heights[valid] * scale)
        return kept
