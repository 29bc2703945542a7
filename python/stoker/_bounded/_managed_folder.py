"""Folders stoker keeps files in, worked on through a descriptor that never follows a link out.

A folder stoker manages (the node cache) may sit in a folder other users can write, such as
``/dev/shm``, where one of them can plant a link where stoker expects a folder or a file of its
own: an ``entries`` that points at a dataset. Paths are therefore looked up once: the folder is
opened (``O_DIRECTORY | O_NOFOLLOW``), checked through its descriptor (a link, another user's
folder, a folder other users can write: refused by name, or replaced by a private one), and every
file in it is then opened, made and removed relative to that descriptor (``openat``,
``unlinkat``: ``os.open(..., dir_fd=)``), again without following a link. A folder renamed or
swapped after it was opened is not the one worked on: the descriptor still names the one checked.
Nothing is removed but the names its caller made, one at a time; a removal never descends into a
folder.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

from ..errors import StorageError
from ._shown_log import shown_logger

__all__ = ["ManagedFolder", "private_folder"]

_logger = shown_logger("stoker.storage")

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK
# Mode bits that let users other than the owner add, remove or rename entries in a folder.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
# Folders replaced by a private one this process already warned about (one warning each).
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


class ManagedFolder:
    """A folder opened once and worked on through its descriptor, never through a link.

    Immutable once made (its descriptor is closed once, by `close`): threads may share it.

    Args:
        path: What the folder is called in messages (the path it was opened by).
        descriptor: An open descriptor of the folder, now owned by this object.
    """

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self._descriptor = descriptor

    def fileno(self) -> int:
        """The folder's descriptor (for ``dir_fd=`` and native calls; owned by this object)."""
        return self._descriptor

    def folder(self, name: str, *, create: bool = True) -> ManagedFolder:
        """The folder ``name`` in this one (made, ``0o700``, when missing and ``create``). A link
        or a file in its place is removed by name (never what it points to) and the folder made,
        with a warning: only the folder's own user could have put it there, and a folder stoker
        manages holds only what stoker made.

        Raises:
            StorageError: It cannot be made or opened.
        """
        _check_name(name)
        where = self.path / name
        for _ in range(2):
            if create:
                try:
                    os.mkdir(name, 0o700, dir_fd=self._descriptor)
                except FileExistsError:
                    pass
            try:
                descriptor = os.open(name, _FOLDER_FLAGS, dir_fd=self._descriptor)
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOTDIR) or not create:
                    raise StorageError(f"{where}: cannot open this folder ({type(error).__name__}: {error})") from error
                kind = "a symbolic link" if _is_link(self._descriptor, name) else "not a folder"
                _logger.warning(
                    "%s: %s where stoker keeps a folder; removed (only the name, never what it points to) and made again", where, kind
                )
                self.remove(name)
                continue
            owner, mode = _owner_and_mode(descriptor)
            if owner != os.geteuid() or mode & _OTHERS_WRITE:
                os.close(descriptor)
                why = f"owned by another user (uid {owner})" if owner != os.geteuid() else f"other users can write it (mode {mode:o})"
                raise StorageError(f"{where}: {why}; stoker keeps files only in folders no other user can change")
            return ManagedFolder(where, descriptor)
        raise StorageError(f"{where}: replaced by something else while stoker made it a folder")

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        """A descriptor of the regular file ``name`` in this folder (``os.open`` ``flags``, plus
        ``O_NOFOLLOW``): a link there is an error, never followed; a FIFO never blocks the call.

        Raises:
            StorageError: A link, a folder, a FIFO or another kind of file at ``name``.
            OSError: It cannot be opened (``FileNotFoundError`` without ``O_CREAT``).
        """
        _check_name(name)
        try:
            descriptor = os.open(name, flags | _FILE_FLAGS, mode, dir_fd=self._descriptor)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EISDIR):
                raise StorageError(
                    f"{self.path / name}: not a regular file (a link or a folder); stoker opens only files it made"
                ) from error
            raise
        try:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode):
                raise StorageError(f"{self.path / name}: not a regular file; stoker opens only files it made")
            os.set_blocking(descriptor, True)
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

    def remove(self, name: str) -> bool:
        """Remove the file or link ``name`` from this folder (a link itself, never what it
        points to; a folder is left alone). Returns whether something was removed.

        Raises:
            OSError: It cannot be removed (other than being missing or a folder).
        """
        _check_name(name)
        try:
            os.unlink(name, dir_fd=self._descriptor)
        except FileNotFoundError:
            return False
        except IsADirectoryError:
            return False
        except PermissionError:
            if stat.S_ISDIR(os.stat(name, dir_fd=self._descriptor, follow_symlinks=False).st_mode):
                return False  # unlink of a folder is EPERM on some systems
            raise
        return True

    def names(self) -> list[str]:
        """The names in this folder (not followed into anything)."""
        return os.listdir(self._descriptor)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        descriptor, self._descriptor = self._descriptor, -1
        if descriptor >= 0:
            os.close(descriptor)

    def __enter__(self) -> ManagedFolder:
        return self

    def __exit__(self, *_exception: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{name!r}: one name in the folder, not a path")


def _owner_and_mode(descriptor: int) -> tuple[int, int]:
    status = os.fstat(descriptor)
    return status.st_uid, stat.S_IMODE(status.st_mode)


def _refusal(path: Path, why: str, what: str) -> StorageError:
    return StorageError(f"{what} {path}: {why}; stoker keeps a {what} only in a folder of its own user that no other user can change")


def _open_checked(parent: int, name: str, path: Path, what: str) -> int:
    """``name`` in ``parent`` opened as a folder, never through a link (refused by name)."""
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):  # a link is ENOTDIR with O_DIRECTORY on Linux
            if _is_link(parent, name):
                target = os.readlink(name, dir_fd=parent)
                raise _refusal(path, f"a symbolic link (to {target}), not followed: name the folder itself", what) from None
            raise _refusal(path, "not a folder", what) from None
        raise StorageError(f"{what} {path}: cannot open it ({type(error).__name__}: {error})") from error


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _chain(path: Path, within: Path | None, what: str) -> int:
    """A descriptor of ``path``'s parent folder: below ``within`` (when ``path`` is in it), each
    folder opened without following links and checked as the cache folder is; above it (the
    user's own path), opened as the system resolves it."""
    parent = path.parent
    if within is not None:
        base = Path(os.path.abspath(within))
        if parent == base or base in parent.parents:
            os.makedirs(base, exist_ok=True)
            descriptor = os.open(base, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
            where = base
            for name in parent.relative_to(base).parts:
                where = where / name
                try:
                    os.mkdir(name, 0o700, dir_fd=descriptor)
                except FileExistsError:
                    pass
                try:
                    inner = _open_checked(descriptor, name, where, what)
                finally:
                    os.close(descriptor)
                descriptor = inner
                owner, mode = _owner_and_mode(descriptor)
                if owner != os.geteuid() or mode & _OTHERS_WRITE:
                    os.close(descriptor)
                    why = f"owned by another user (uid {owner})" if owner != os.geteuid() else f"other users can write it (mode {mode:o})"
                    raise _refusal(where, why, what)
            return descriptor
    os.makedirs(parent, exist_ok=True)
    return os.open(parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))


def private_folder(
    path: str | os.PathLike[str], *, what: str = "sample cache", within: str | os.PathLike[str] | None = None
) -> ManagedFolder:
    """The folder at ``path``, opened as one stoker may keep files in and remove them from.

    Made (``0o700``) when missing. Refused by name (`StorageError`) when it is a symbolic link
    (never followed: name the folder itself), not a folder, or another user's that other users
    cannot write. A folder other users can write (``/dev/shm``, a group's folder) is replaced by
    a private one inside it, ``.stoker-<uid>``, with one warning that says so; that one must be
    this user's and nobody else's to write, or it is refused too (another user made it first).
    ``within``: a folder (``STOKER_CACHE``) whose chain of folders down to ``path``, when
    ``path`` is inside it, is checked as ``path`` is (no links, this user's, no other writer).

    Raises:
        StorageError: Refused, as above, or it cannot be made or opened.
    """
    where = Path(os.path.abspath(path))
    parent = _chain(where, None if within is None else Path(within), what)
    try:
        try:
            os.mkdir(where.name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass
        descriptor = _open_checked(parent, where.name, where, what)
    finally:
        os.close(parent)
    owner, mode = _owner_and_mode(descriptor)
    if not mode & _OTHERS_WRITE:
        if owner == os.geteuid():
            return ManagedFolder(where, descriptor)
        os.close(descriptor)
        raise _refusal(where, f"owned by another user (uid {owner})", what)
    # A shared folder: a private one inside it, made once and checked like any other.
    private = where / f".stoker-{os.geteuid()}"
    try:
        try:
            os.mkdir(private.name, 0o700, dir_fd=descriptor)
        except FileExistsError:
            pass
        inner = _open_checked(descriptor, private.name, private, what)
    finally:
        os.close(descriptor)
    inner_owner, inner_mode = _owner_and_mode(inner)
    if inner_owner != os.geteuid() or inner_mode & _OTHERS_WRITE:
        os.close(inner)
        why = (
            f"made by another user (uid {inner_owner})"
            if inner_owner != os.geteuid()
            else f"other users can write it (mode {inner_mode:o})"
        )
        raise _refusal(private, why, what)
    with _WARNED_LOCK:
        first = str(where) not in _WARNED
        _WARNED.add(str(where))
    if first:
        _logger.warning(
            "%s %s: other users can write this folder (mode %o); using %s, a private folder in it, instead", what, where, mode, private
        )
    return ManagedFolder(private, inner)
