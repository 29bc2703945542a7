"""Opening a file stoker was told to read, without trusting what sits at the path.

A FIFO where a file is expected blocks ``open`` until some writer comes, and ``/dev/zero`` reads
forever: a path a user typed, or one named in a run file or a ledger, may be either. Every entry
point that reads a whole file (run files, manifests, ledgers, JSON Lines, tokenizers) opens it
here: without blocking, checked to be a regular file by the opened descriptor itself (no window
between a check and the open), and read up to a bound.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from ..errors import StorageError

__all__ = ["file_kind", "open_regular", "read_regular", "require_regular"]


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words (``"a FIFO"``, ``"a character device"``...)."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refusal(path: str | os.PathLike[str], mode: int, what: str) -> StorageError:
    return StorageError(f"{path}: {file_kind(mode)}, not a regular file; stoker reads {what} only from regular files")


def require_regular(path: str | os.PathLike[str], what: str = "this") -> os.stat_result:
    """``path``'s status, if it is a regular file (symbolic links followed).

    Raises:
        FileNotFoundError: Nothing at ``path``.
        StorageError: A folder, FIFO, device or socket, named.
    """
    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        raise _refusal(path, status.st_mode, what)
    return status


def open_regular(path: str | os.PathLike[str], what: str = "this") -> BinaryIO:
    """``path`` opened for binary reading, if it is a regular file; never blocks on a FIFO.

    Raises:
        FileNotFoundError: Nothing at ``path``.
        StorageError: A folder, FIFO, device or socket, named; or it cannot be opened.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise _refusal(path, stat.S_IFDIR, what) from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _refusal(path, status.st_mode, what)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_regular(path: str | os.PathLike[str], *, limit: int, what: str = "this") -> bytes:
    """The whole of the regular file at ``path``, refused past ``limit`` bytes before it is read.

    Raises:
        FileNotFoundError: Nothing at ``path``.
        StorageError: Not a regular file, or larger than ``limit`` (its size named).
    """
    with open_regular(path, what) as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise StorageError(f"{Path(path)}: {size:,} bytes, over the {limit:,} bytes stoker reads as {what}")
        data = file.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise StorageError(f"{Path(path)}: over the {limit:,} bytes stoker reads as {what}")
    return data
