"""The node cache's entries: one native handle per process and folder, opened through the folder's
descriptor, and none trusted from another boot or damaged.

Stores are not flushed to disk (see `CacheEntries`): a process that dies leaves the files as its
last store left them (the writes are in the kernel's page cache), but a machine that stops
abruptly can leave them damaged. So the store records the boot it was written in (Linux's boot
id), and one from an earlier boot is emptied when opened; every entry is checked whole on read,
and a store whose state fails its checks is emptied and made again, whenever that is found
(`stoker._native.CacheEntries`). Where there is no boot id (not Linux), every store is flushed
instead. What was emptied, and entries that failed their checks, are logged (`report`).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from ... import _native
from ..._bounded import ManagedFolder, shown_logger
from ...errors import StorageError

__all__ = ["close_environment", "open_environment", "report"]

_logger = shown_logger("stoker.storage")

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot's id (Linux), or None."""
    try:
        return _BOOT_ID.read_text().strip()[:64] or None
    except OSError:
        return None


def _identity(folder: ManagedFolder) -> tuple[int, int, int]:
    """This process and the folder's device and inode: one handle per process and folder,
    however the folder was named."""
    status = os.fstat(folder.fileno())
    return os.getpid(), status.st_dev, status.st_ino


# One handle per process and folder: a forked child opens its own (its parent's writer lock and
# segment files are the parent's). Keyed by process, as a forked child opens its own.
_ENVIRONMENTS: dict[tuple[int, int, int], list[Any]] = {}  # -> [environment, users]
_ENVIRONMENTS_LOCK = threading.Lock()


def report(folder: ManagedFolder, environment: _native.CacheEntries) -> None:
    """Log what the handle has to tell since it was last asked (the store emptied and why,
    entries that failed their checks): a store of an earlier boot as information, the rest as
    warnings."""
    for level, notice in environment.notices():
        _logger.log(logging.INFO if level == "info" else logging.WARNING, "sample cache %s: %s", folder.path, notice)


def open_environment(folder: ManagedFolder) -> _native.CacheEntries:
    """This process's handle on the entries in ``folder`` (opened, or the one already open).

    Raises:
        StorageError: The folder cannot hold the entries.
    """
    key = _identity(folder)
    with _ENVIRONMENTS_LOCK:
        held = _ENVIRONMENTS.get(key)
        if held is not None:
            held[1] += 1
            return held[0]
        for inherited in [other for other in _ENVIRONMENTS if other[1:] == key[1:]]:
            # A forked child's copy of its parent's handle: closed (in this process only; the
            # parent's descriptors and its lock are its own).
            _ENVIRONMENTS.pop(inherited)[0].close()
        boot = boot_id()
        try:
            environment = _native.CacheEntries(folder.fileno(), str(folder.path), boot is None, boot)  # sync: see the module's notes
        except OSError as error:
            raise StorageError(f"sample cache {folder.path}: cannot open it ({type(error).__name__}: {error})") from error
        report(folder, environment)
        _ENVIRONMENTS[key] = [environment, 1]
        return environment


def close_environment(folder: ManagedFolder) -> None:
    """Let go of one user of this process's handle on ``folder``; the last closes it."""
    key = _identity(folder)
    with _ENVIRONMENTS_LOCK:
        held = _ENVIRONMENTS.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _ENVIRONMENTS[key]
            held[0].close()
