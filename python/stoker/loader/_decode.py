"""The Loader's decode step for one batch: images into the batch buffer, a user ``decode`` per
sample, or the bytes as they are; samples that were read but do not decode are reported, not
raised, so the failure policy sees the whole batch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ops.batch import Transform, decode_batch

__all__ = ["decode_payloads"]


def decode_payloads(
    payloads: Sequence[bytes | Exception],
    *,
    keys: list[str],
    seeds: list[int],
    transform: Transform | None,
    decode: Callable[[bytes], Any] | None,
    out: np.ndarray | None,
) -> tuple[Any, dict[int, tuple[str, str]]]:
    """Decode what was read.

    Args:
        payloads: Each sample's bytes, or the exception its read failed with (its slot is left
            empty: zeros, or None).
        keys: The samples' names, for error messages.
        seeds: Each sample's augmentation seed.
        transform: Decode images, audio or video into ``out`` with this.
        decode: Else, a function of the bytes.
        out: The batch buffer (with ``transform``).

    Returns:
        The batch data (``out``, or a list), and ``{slot: ("decode", reason)}`` for the samples
        that were read but did not decode.
    """
    failures: dict[int, tuple[str, str]] = {}
    if transform is not None:
        decoded = decode_batch(
            [payload if not isinstance(payload, Exception) else b"" for payload in payloads],
            transform,
            out=out,
            seeds=seeds,
            names=keys,
            on_error="zero",
        )
        for failure in decoded.failures:
            slot = failure.position
            assert slot is not None  # decode_batch records each failure's slot
            if not isinstance(payloads[slot], Exception):
                failures[slot] = ("decode", failure.error)
        return decoded.images, failures
    if decode is not None:
        data: list[Any] = []
        for slot, payload in enumerate(payloads):
            if isinstance(payload, Exception):
                data.append(None)
                continue
            try:
                data.append(decode(payload))
            except Exception as error:  # the user's function: any error is this sample's
                data.append(None)
                failures[slot] = ("decode", f"{type(error).__name__}: {error}")
        return data, failures
    return [None if isinstance(payload, Exception) else payload for payload in payloads], failures
