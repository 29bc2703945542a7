"""Walking a user's dataset folder: links followed once each, a cycle named and skipped.

A dataset folder is the user's, and so are its links: a folder of links to class folders
elsewhere is a common way to build a dataset, so links are followed, in the folder or out of it.
What a walk must never do is loop, hang, list one file under many paths, or end in a traceback
because of a link. Every walk of a dataset folder (ImageFolder listings, Parquet and JSON Lines
discovery, glob patterns, the native ``list_tree`` by the same rules) therefore:

- walks each folder once, known by device and inode: a link to a folder above it (``up -> ..``,
  ``-> /``) or to one already walked is a cycle, skipped and named;
- skips and names an entry whose kind cannot be read through its links (a loop of links, ELOOP;
  a dangling link) or a sub-folder it cannot read;
- lists regular files only (a FIFO or a device is no sample: reading one blocks or never ends).

What was skipped is told once per walk, as one warning naming the first few (`tell_skipped`).
The node cache's own folder, which stoker manages, follows no link at all: that is
``stoker.storage.policies``' business, not this module's.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from ._shown_log import shown_logger

__all__ = ["ALREADY_WALKED", "folder_entries", "folders_up_from", "matching_files", "skipped_why", "tell_skipped", "walk_files"]

_logger = shown_logger("stoker.storage")
# Skipped entries a warning names one by one; the rest are counted.
_NAMED_AT_MOST = 5
# Why-code of a folder reached again (the native walk's too); any other code is an OS error number.
ALREADY_WALKED = 0
_MAGIC = frozenset("*?[")


def skipped_why(code: int) -> str:
    """Why a walk skipped an entry, in words, from its code (`ALREADY_WALKED` or an errno)."""
    if code == ALREADY_WALKED:
        return "a folder already walked (a link cycle, or a second link to it)"
    if code == errno.ELOOP:
        return "a loop of links (ELOOP)"
    if code == errno.ENOENT:
        return "a link to nothing"
    return os.strerror(code)


def _problem(error: OSError) -> str:
    return skipped_why(error.errno) if error.errno else str(error)


def tell_skipped(root: str | os.PathLike[str], skipped: Sequence[tuple[str, str]]) -> None:
    """One warning naming what a walk of ``root`` skipped (path, why): the first few, then a count."""
    if not skipped:
        return
    named = "; ".join(f"{path}: {why}" for path, why in skipped[:_NAMED_AT_MOST])
    more = f"; and {len(skipped) - _NAMED_AT_MOST} more" if len(skipped) > _NAMED_AT_MOST else ""
    _logger.warning("%s: skipped %d while listing it: %s%s", root, len(skipped), named, more)


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


def folders_up_from(folder: str | os.PathLike[str]) -> set[tuple[int, int]]:
    """``folder`` and every folder above its real path, by (device, inode): a link under
    ``folder`` to one of them leads back into the walk (a cycle)."""
    found = set()
    for ancestor in (real := Path(os.path.realpath(folder)), *real.parents):
        try:
            found.add(_identity(os.stat(ancestor)))
        except OSError:
            continue
    return found


def folder_entries(folder: Path, skipped: list[tuple[str, str]]) -> tuple[list[tuple[str, os.stat_result]], list[str]]:
    """One level of ``folder``, through links: (sub-folders with their status, regular files'
    names), each sorted; entries whose kind cannot be read are added to ``skipped``.

    Raises:
        OSError: ``folder`` itself cannot be read.
    """
    folders: list[tuple[str, os.stat_result]] = []
    files: list[str] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                if not entry.is_symlink():  # the kind from the folder itself: no call per file
                    if entry.is_file(follow_symlinks=False):
                        files.append(entry.name)
                    elif entry.is_dir(follow_symlinks=False):
                        folders.append((entry.name, entry.stat(follow_symlinks=False)))
                    continue
                status = entry.stat(follow_symlinks=True)
            except OSError as error:
                skipped.append((entry.path, _problem(error)))
                continue
            if stat.S_ISDIR(status.st_mode):
                folders.append((entry.name, status))
            elif stat.S_ISREG(status.st_mode):
                files.append(entry.name)
    return sorted(folders, key=lambda item: item[0]), sorted(files)


def walk_files(root: str | os.PathLike[str], accept: Callable[[str], bool] = lambda name: True) -> list[Path]:
    """Every regular file under ``root`` whose name ``accept`` takes, sorted; links followed,
    each folder once (see the module notes). What was skipped is told (`tell_skipped`).

    Raises:
        OSError: ``root`` itself cannot be read.
    """
    top = Path(root)
    seen = folders_up_from(top)
    skipped: list[tuple[str, str]] = []
    found: list[Path] = []
    pending = [(top, os.stat(top))]
    while pending:
        folder, status = pending.pop()
        if folder is not top and _identity(status) in seen:
            skipped.append((str(folder), skipped_why(ALREADY_WALKED)))
            continue
        seen.add(_identity(status))
        try:
            folders, files = folder_entries(folder, skipped)
        except OSError as error:
            if folder == top:
                raise
            skipped.append((str(folder), _problem(error)))
            continue
        found.extend(folder / name for name in files if accept(name))
        pending.extend((folder / name, child) for name, child in reversed(folders))
    tell_skipped(top, skipped)
    return sorted(found)


def _split_pattern(pattern: str) -> tuple[Path, list[str]]:
    """A glob pattern as (the folder before its first wildcard, the components from there)."""
    parts = Path(pattern).parts
    fixed = next((index for index, part in enumerate(parts) if _MAGIC & set(part)), len(parts))
    return Path(*parts[:fixed]) if fixed else Path("."), list(parts[fixed:])


def _set_end(part: str, at: int) -> int:
    """Where the ``[...]`` set opened just before ``at`` ends (its ``]``), or -1 when it does
    not: a ``]`` right after ``[`` or ``[!`` is a member, as fnmatch has it."""
    if part[at : at + 1] == "!":
        at += 1
    if part[at : at + 1] == "]":
        at += 1
    return part.find("]", at)


def _component(part: str) -> str:
    """A regular expression for one component of a glob pattern: ``*`` and ``?`` within it, a
    ``[...]`` set, and no hidden name unless the component starts with a dot (as glob has it)."""
    out = "" if part.startswith(".") else r"(?!\.)"
    at = 0
    while at < len(part):
        character = part[at]
        at += 1
        if character == "*":
            out += "[^/]*"
        elif character == "?":
            out += "[^/]"
        elif character == "[" and (end := _set_end(part, at)) != -1:
            inside = part[at:end].replace("\\", "\\\\").replace("[", "\\[")
            if inside.startswith("!"):
                inside = "^" + inside[1:]
            elif inside.startswith("^"):
                inside = "\\" + inside
            out += f"[{inside}]"
            at = end + 1
        else:
            out += re.escape(character)
    return out


def _compiled(parts: Sequence[str]) -> re.Pattern[str]:
    """The pattern's components after its fixed folder as one expression over a relative path:
    ``**`` is any number of folders whose names are not hidden."""
    expression = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            expression += r"(?:(?!\.)[^/]+/)*(?!\.)[^/]+" if last else r"(?:(?!\.)[^/]+/)*"
        else:
            expression += _component(part) + ("" if last else "/")
    return re.compile(expression)


def matching_files(pattern: str) -> list[Path]:
    """The regular files a glob pattern matches, sorted: ``**`` (any depth) by `walk_files`, so
    a link cycle is walked once and named, not followed until the path is too long; a match whose
    kind cannot be read (a loop of links) is skipped and named.
    """
    root, parts = _split_pattern(pattern)
    skipped: list[tuple[str, str]] = []
    if "**" in parts:
        if not root.is_dir():
            return []
        wanted = _compiled(parts)
        return [path for path in walk_files(root) if wanted.fullmatch(path.relative_to(root).as_posix())]
    found = []
    for match in glob.glob(pattern):
        try:
            status = os.stat(match)
        except OSError as error:
            skipped.append((match, _problem(error)))
            continue
        if stat.S_ISREG(status.st_mode):
            found.append(Path(match))
    tell_skipped(root, skipped)
    return sorted(found)
