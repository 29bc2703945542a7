"""Argument checks made when a Loader is made, so a wrong type fails at once with a message naming
the argument and what it takes, never later inside the pipeline."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigurationError
from ..ops import media_backend
from ..ops.batch import TRANSFORMS
from ..ops.media import AudioTransform, VideoTransform
from ..storage import Storage, open_storage

__all__ = ["as_storage", "check_decoding", "check_integer", "check_number"]


def check_integer(name: str, value: Any, *, minimum: int = 1, optional: bool = False) -> None:
    """``value`` is an int (not a bool) of at least ``minimum``, or None when ``optional``.

    Raises:
        TypeError: Not an int (a float such as 32.0 or a string such as "32" included).
        ConfigurationError: Below ``minimum`` (a ValueError).
    """
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        expected = f"an int >= {minimum}" + (" or None" if optional else "")
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value}")


def check_number(name: str, value: Any, *, minimum: float = 0.0) -> None:
    """``value`` is an int or float (not a bool) of at least ``minimum``.

    Raises:
        TypeError: Not a number.
        ConfigurationError: Below ``minimum`` (a ValueError).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number >= {minimum}, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value}")


def as_storage(storage: Any) -> Storage:
    """A `Storage` as given, or the one `open_storage` opens at a path or URL.

    Raises:
        TypeError: Neither a Storage nor a path or URL.
    """
    if isinstance(storage, Storage):
        return storage
    if isinstance(storage, (str, os.PathLike)):
        return open_storage(storage)
    raise TypeError(f"storage must be a stoker Storage, or a path or URL to open (open_storage), got {type(storage).__name__}")


def check_decoding(transform: Any, decode: Any) -> None:
    """A transform of stoker's, or a function of a sample's bytes, or neither; for audio and video
    an FFmpeg this stoker supports, found now, before any thread starts, not at the first batch.

    Raises:
        TypeError: A transform or decode of the wrong kind.
        ConfigurationError: Both given.
        MediaUnavailableError: An audio or video transform, and no FFmpeg.
    """
    if transform is not None and not isinstance(transform, TRANSFORMS):
        raise TypeError(f"transform must be a stoker.ops ImageTransform, AudioTransform or VideoTransform, got {type(transform).__name__}")
    if decode is not None and not callable(decode):
        raise TypeError(f"decode must be a function of a sample's bytes, got {type(decode).__name__}")
    if transform is not None and decode is not None:
        raise ConfigurationError("give transform or decode, not both")
    if isinstance(transform, (AudioTransform, VideoTransform)):
        media_backend()
