"""`LengthBuckets`: the window lengths a dataset of varying duration is batched into (audio by
seconds, video by clip frames), and which one each sample goes to.

Speech and video models are trained on utterances and clips of every length. One fixed window
either crops long samples to the length of short ones or pads short ones with silence or black
frames that the model still pays for. Buckets of several lengths let each batch take the longest
window its samples can all fill: a sample goes to the longest bucket that is no longer than
itself, so it is cropped by less than the gap to the next bucket and never padded (unless it is
shorter than every bucket and ``shorter="pad"`` says to pad it to the shortest).

Assignment is array work over every sample's length (`assign`), from lengths read from the
files' headers (`stoker.ops.media_lengths`), nothing decoded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigurationError
from ._bucket_order import check_leftovers
from ._buckets import MAX_BUCKETS

__all__ = ["LengthBuckets"]

_SHORTER = ("skip", "pad")


@dataclass(frozen=True)
class LengthBuckets:
    """Window lengths a batch takes; each sample goes to the longest that it fills.

    Args:
        lengths: The lengths, in the transform's unit: seconds for an `AudioTransform`'s window,
            frames for a `VideoTransform`'s clip. Kept in the order given (a bucket's number is
            its place here).
        shorter: What becomes of a sample shorter than every bucket: ``"skip"`` (it goes to no
            bucket: counted, named in the log, never read) or ``"pad"`` (it goes to the shortest
            bucket and its window is zero-padded, as an `AudioTransform` pads; audio only).
        column: The storage's column to take each sample's length from (Parquet, Lance:
            `ColumnStorage`) instead of reading every file's header: an audio file's duration
            in seconds, a video's frame count. A Loader checks a sample of it against the files'
            headers.
        leftovers: As `Buckets`'s: ``"drop"`` or ``"carry"``.

    Raises:
        ConfigurationError: No lengths, a length that is not a positive finite number, one given
            twice, more than `MAX_BUCKETS`, another ``shorter``, or a column that is not a name.
    """

    lengths: tuple[float, ...]
    shorter: str = "skip"
    column: str | None = None
    leftovers: str = "drop"

    def __init__(self, lengths: Sequence[float], shorter: str = "skip", column: str | None = None, leftovers: str = "drop") -> None:
        object.__setattr__(self, "leftovers", check_leftovers(leftovers))
        if shorter not in _SHORTER:
            raise ConfigurationError(f'shorter must be "skip" or "pad", got {shorter!r}')
        if column is not None and not (isinstance(column, str) and column):
            raise ConfigurationError(f"column is a column's name, got {column!r}")
        object.__setattr__(self, "column", column)
        checked: list[float] = []
        for length in lengths:
            if isinstance(length, bool) or not isinstance(length, (int, float, np.integer, np.floating)):
                raise ConfigurationError(f"a bucket's length is a number, got {length!r}")
            if not (math.isfinite(length) and length > 0):
                raise ConfigurationError(f"a bucket's length must be positive and finite, got {length!r}")
            checked.append(float(length))
        if not checked:
            raise ConfigurationError("no buckets: give at least one length")
        if len(checked) > MAX_BUCKETS:
            raise ConfigurationError(f"{len(checked)} buckets: at most {MAX_BUCKETS}")
        if len(set(checked)) != len(checked):
            twice = next(length for length in checked if checked.count(length) > 1)
            raise ConfigurationError(f"bucket length {twice:g} is given twice")
        object.__setattr__(self, "lengths", tuple(checked))
        object.__setattr__(self, "shorter", shorter)

    @classmethod
    def geometric(
        cls,
        shortest: float,
        longest: float,
        count: int,
        *,
        whole: bool = False,
        shorter: str = "skip",
        column: str | None = None,
        leftovers: str = "drop",
    ) -> LengthBuckets:
        """``count`` lengths from ``shortest`` to ``longest``, each the same ratio longer than the
        one before: a sample is then cropped by at most that ratio's share, whatever its length.

        Args:
            shortest: The first length.
            longest: The last length.
            count: How many (at least 1; 1 gives ``shortest`` alone).
            whole: Round to whole numbers (a video clip's frames), dropping repeats.
            shorter: As `LengthBuckets`'s.
            column: As `LengthBuckets`'s.
            leftovers: As `LengthBuckets`'s.

        Raises:
            ConfigurationError: Lengths out of order or not positive, or a count under 1.
        """
        if count < 1 or not 0 < shortest <= longest:
            raise ConfigurationError(f"need 0 < shortest <= longest and count >= 1, got {shortest}, {longest}, {count}")
        lengths = np.geomspace(shortest, longest, count) if count > 1 else np.array([shortest], dtype=np.float64)
        if whole:
            lengths = np.unique(np.maximum(1, np.round(lengths)))
        return cls([float(length) for length in lengths], shorter, column, leftovers)

    def __len__(self) -> int:
        return len(self.lengths)

    def labels(self) -> list[float]:
        """Each bucket's length, for reports and the ledger."""
        return list(self.lengths)

    def assign(self, capacities: np.ndarray) -> np.ndarray:
        """Each sample's bucket from the longest window it can give (``capacities``, in the
        buckets' unit): the longest bucket no longer than it; shorter than all, the shortest
        bucket (``shorter="pad"``) or none; -1 where the length is unknown (0, negative or NaN).

        Args:
            capacities: Each sample's longest window (an audio file's duration; a video's
                longest clip at the transform's stride or rate).

        Returns:
            int16 bucket numbers, aligned with the samples.
        """
        capacities = np.asarray(capacities, dtype=np.float64)
        known = np.isfinite(capacities) & (capacities > 0)
        lengths = np.array(self.lengths)
        order = np.argsort(lengths, kind="stable")
        # The number of buckets no longer than each sample; the last of them is its bucket.
        fitting = np.searchsorted(lengths[order], np.where(known, capacities, 0.0) * (1 + 1e-9), side="right")
        result = np.where(fitting > 0, order[np.maximum(fitting - 1, 0)], order[0] if self.shorter == "pad" else -1)
        result[~known] = -1
        return result.astype(np.int16)

    def kept_share(self, capacities: np.ndarray, assigned: np.ndarray) -> np.ndarray:
        """The share of each sample's length its bucket's window keeps (1.0: all of it; a padded
        sample keeps all of itself), NaN where unassigned."""
        capacities = np.asarray(capacities, dtype=np.float64)
        assigned = np.asarray(assigned)
        kept = np.full(len(capacities), np.nan)
        valid = assigned >= 0
        windows = np.array(self.lengths)[assigned[valid]]
        with np.errstate(over="ignore"):  # a vanishing length padded: keeps all of itself
            kept[valid] = np.minimum(1.0, windows / capacities[valid])
        return kept
