"""A sampler state is input: checked part by part before anything is built from it.

A state comes from a file written by another run, another version, a damaged disk or someone
hostile. Each part is checked for its kind and its range here, and a wrong one is a ValueError
that names it, before a set, a plan or an array is made from the state: a span past the epoch or
reversed, a negative position (which once made positions 0-2 delivered twice), a seed that is
text, an absurd number of spans.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigurationError

__all__ = ["MAX_SPANS", "SAMPLER_STATE_VERSION", "check_seed", "check_state", "spans"]

SAMPLER_STATE_VERSION = 2
# A delivery record is a handful of spans (out-of-order delivery leaves a few holes); a state with
# more than this many is not one stoker wrote, and is refused before it is read.
MAX_SPANS = 1 << 22
_SCHEMES = ("sequential", "uniform", "block", "bucket")
_PARTS = (
    "version",
    "num_samples",
    "shuffle",
    "seed",
    "epoch",
    "rank",
    "world_size",
    "delivered",
    "padding_delivered",
    "excluded",
    "scheme",
    "window",
    "order_ranks",
    "blocks_crc",
)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fail(field: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"sampler state: {field!r} must be {expected}, got {str(value)[:80]!r}")


def check_seed(seed: Any) -> int:
    """``seed`` if it is a whole number in [0, 2**64).

    Raises:
        ValueError: Anything else (text, a float, a negative number), named.
    """
    if not _whole(seed) or not 0 <= seed < 1 << 64:
        raise ConfigurationError(f"seed must be a whole number from 0 to 2**64 - 1, got {str(seed)[:80]!r}")
    return int(seed)


def spans(value: Any, field: str, limit: int) -> np.ndarray:
    """``value`` as an (n, 2) int64 array of sorted, disjoint [start, end) spans inside
    [0, ``limit``).

    Raises:
        ValueError: Not a list of pairs of whole numbers, too many, or a span that is empty,
            reversed, negative, past ``limit`` or out of order (the first such one named).
    """
    if not isinstance(value, (list, tuple)):
        raise _fail(field, value, "a list of [start, end] spans")
    if len(value) > MAX_SPANS:
        raise _fail(field, f"{len(value):,} spans", f"at most {MAX_SPANS:,} spans")
    if not value:
        return np.zeros((0, 2), np.int64)
    try:
        array = np.array(value)
    except (ValueError, TypeError, OverflowError):
        raise _fail(field, value, "a list of [start, end] spans of whole numbers") from None
    if array.ndim != 2 or array.shape[1] != 2 or array.dtype.kind not in "iu":
        raise _fail(field, value[:3], "a list of [start, end] spans of whole numbers")
    array = array.astype(np.int64)
    starts, ends = array[:, 0], array[:, 1]
    bad = (starts < 0) | (ends <= starts) | (ends > limit)
    bad[1:] |= starts[1:] <= ends[:-1]
    if bad.any():
        at = int(np.argmax(bad))
        raise _fail(
            f"{field}[{at}]", array[at].tolist(), f"a span with 0 <= start < end <= {limit:,}, after the span before it (sorted, disjoint)"
        )
    return array


def check_state(state: Any) -> None:
    """Each part of one rank's sampler state is of its kind and in range.

    Raises:
        ValueError: The first part that is not, named.
    """
    if not isinstance(state, dict):
        raise ConfigurationError(f"sampler state: expected the dict Sampler.state_dict() returns, got {type(state).__name__}")
    version = state.get("version")
    if version == 1:
        raise ConfigurationError(
            "sampler state version 1 was saved by an earlier stoker, whose shuffled order this one does not compute; "
            "resume with that version, or start the epoch again"
        )
    if version != SAMPLER_STATE_VERSION:
        raise _fail("version", version, str(SAMPLER_STATE_VERSION))
    missing = [part for part in _PARTS if part not in state]
    if missing:
        raise ConfigurationError(f"sampler state: no {', '.join(repr(part) for part in missing)} (not a state Sampler.state_dict() wrote)")
    samples = state.get("num_samples")
    if not isinstance(samples, int) or isinstance(samples, bool) or not 1 <= samples <= 1 << 62:
        raise _fail("num_samples", samples, "a whole number from 1 to 2**62")
    if not isinstance(state.get("shuffle"), bool):
        raise _fail("shuffle", state.get("shuffle"), "true or false")
    try:
        check_seed(state.get("seed"))
    except ValueError:
        raise _fail("seed", state.get("seed"), "a whole number from 0 to 2**64 - 1") from None
    for field, low, high in (("epoch", 0, 1 << 62), ("world_size", 1, 1 << 24), ("order_ranks", 1, 1 << 24), ("window", 1, 1 << 30)):
        if not _whole(state.get(field)) or not low <= state[field] <= high:
            raise _fail(field, state.get(field), f"a whole number from {low} to {high:,}")
    if not _whole(state.get("rank")) or not 0 <= state["rank"] < state["world_size"]:
        raise _fail("rank", state.get("rank"), f"a rank of the world of {state['world_size']}")
    if not _whole(state.get("padding_delivered")) or not 0 <= state["padding_delivered"] <= samples:
        raise _fail("padding_delivered", state.get("padding_delivered"), f"a whole number from 0 to {samples:,}")
    if state.get("scheme") not in _SCHEMES or (state["scheme"] == "sequential") == state["shuffle"]:
        raise _fail("scheme", state.get("scheme"), "sequential without shuffle, uniform, block or bucket with it")
    crc = state.get("blocks_crc")
    if crc is not None and not (_whole(crc) and 0 <= crc < 1 << 32):
        raise _fail("blocks_crc", crc, "a CRC-32 or null")
    spans(state.get("delivered"), "delivered", samples)
    spans(state.get("excluded"), "excluded", samples)
