"""File names that a dataset's own index gives: untrusted, so refused when they would leave the
dataset's folder (an absolute path, ``..``), before anything is opened by them."""

from __future__ import annotations

import posixpath
from typing import Any

from ...errors import StorageError

__all__ = ["relative_name"]


def relative_name(name: Any, source: str) -> str:
    """``name`` normalised, if it is a path inside the dataset's folder.

    Raises:
        StorageError: Not a string, empty, absolute, or leaving the folder; names ``source``.
    """
    if not isinstance(name, str) or not name or "\\" in name or "\x00" in name:
        raise StorageError(f"{source}: a file name {name!r} that is not a relative path")
    normal = posixpath.normpath(name)
    if normal.startswith(("/", "../")) or normal in ("..", "."):
        raise StorageError(f"{source}: a shard name {name!r} outside the dataset's folder")
    return normal
