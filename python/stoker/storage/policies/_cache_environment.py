"""The node cache's LMDB environment: one handle per process, and none trusted from another boot.

Commits are not flushed to disk (see `CacheEntries`): a process that dies leaves the file as its
last commit left it (the writes are in the kernel's page cache), but a machine that stops
abruptly can leave a damaged file, which LMDB trusts. So the environment records the boot it was
opened in (Linux's boot id), and an environment from an earlier boot is emptied before use.
Where there is no boot id (not Linux), every commit is flushed instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from ... import _native
from ..._bounded import shown_logger
from ...errors import StorageError

__all__ = ["close_environment", "open_environment"]

_logger = shown_logger("stoker.storage")

_MAX_READERS = 1024  # read transactions open at once, over every process on the node
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot's id (Linux), or None."""
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def _trusted(folder: Path, boot: str | None) -> None:
    """Empty ``folder``'s environment if an earlier boot wrote it (under a lock on the folder's
    parent, so ranks starting together empty it once)."""
    if boot is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    mark = folder / "boot"
    with open(folder.parent / ".entries.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            written = mark.read_text().strip()
        except FileNotFoundError:
            written = None
        if written == boot:
            return
        if written is not None or (folder / "data.mdb").exists():
            _logger.info("sample cache %s: written before this machine last started; emptied (its last writes may not be whole)", folder)
            for child in folder.iterdir():
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        child.unlink()
        mark.write_text(boot)


# One handle per process and folder: LMDB must not open one environment twice in a process (closing
# either would drop the file lock the other relies on). Keyed by process, as a forked child opens its own.
_ENVIRONMENTS: dict[tuple[int, str], list[Any]] = {}  # -> [environment, users]
_ENVIRONMENTS_LOCK = threading.Lock()


def open_environment(folder: Path, map_bytes: int) -> _native.CacheEntries:
    """This process's handle on the entries in ``folder`` (opened, or the one already open).

    Raises:
        StorageError: The folder cannot hold the environment.
    """
    key = (os.getpid(), str(folder.resolve()))
    with _ENVIRONMENTS_LOCK:
        held = _ENVIRONMENTS.get(key)
        if held is not None:
            held[1] += 1
            return held[0]
        for inherited in [other for other in _ENVIRONMENTS if other[1] == key[1]]:
            # A forked child's copy of its parent's handle: a folder is opened once per
            # process, so it is closed first. That touches only this process: LMDB clears the
            # read slots of the calling process id, and the parent's file lock is its own.
            _ENVIRONMENTS.pop(inherited)[0].close()
        boot = boot_id()
        try:
            _trusted(folder, boot)
            environment = _native.CacheEntries(folder, map_bytes, _MAX_READERS, boot is None)  # sync: see the module's notes
        except OSError as error:
            raise StorageError(f"sample cache {folder}: cannot open it ({type(error).__name__}: {error})") from error
        _ENVIRONMENTS[key] = [environment, 1]
        return environment


def close_environment(folder: Path) -> None:
    """Let go of one user of this process's handle on ``folder``; the last closes it."""
    key = (os.getpid(), str(folder.resolve()))
    with _ENVIRONMENTS_LOCK:
        held = _ENVIRONMENTS.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _ENVIRONMENTS[key]
            held[0].close()
