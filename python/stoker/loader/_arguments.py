"""Argument checks made when a Loader is made, so a wrong type fails at once with a message naming
the argument and what it takes, never later inside the pipeline."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigurationError
from ..storage import Storage, open_storage

__all__ = ["as_storage", "check_integer", "check_number"]


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
