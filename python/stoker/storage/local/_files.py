"""One file per sample: an ImageFolder tree (class = folder name) or a manifest of (path, label).

Listing a million files is the slow part of opening such a dataset, so the listing walks class
folders in parallel in the Rust core (no GIL, no Python object per directory entry) and is
cached; the cache is used only while every listed folder's modification time is unchanged. The
walk keeps the rules of every dataset walk (`stoker._bounded` tree walks): links followed, each
folder once, a link cycle or an entry whose kind cannot be read (a loop of links) named and
skipped.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

from ... import _native
from ..._bounded import (
    ALREADY_WALKED,
    MAX_MANIFEST_BYTES,
    folder_entries,
    folders_up_from,
    open_regular,
    read_json,
    skipped_why,
    tell_skipped,
)
from ...errors import StorageError
from .._cache import cache_dir
from .._protocol import Storage

__all__ = ["AUDIO_EXTENSIONS", "FileStorage", "IMAGE_EXTENSIONS", "SAMPLE_EXTENSIONS", "VIDEO_EXTENSIONS"]

# torchvision's ImageFolder extensions.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".m4a", ".aac")
VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm", ".mov", ".avi")
# What a class folder's listing takes as samples (local folders and S3 prefixes alike).
SAMPLE_EXTENSIONS = IMAGE_EXTENSIONS + AUDIO_EXTENSIONS + VIDEO_EXTENSIONS
_LISTING_VERSION = 3  # 3: what the walk skipped is kept, to be told again


class FileStorage(Storage):
    """Samples as files: ``FileStorage("train/")`` (ImageFolder) or ``FileStorage("train.csv")``.

    Args:
        path: A folder of class folders (images, audio or video files by extension), or a manifest (CSV or TSV lines ``path,label``; paths
            relative to the manifest's folder; labels integers or class names; a header line
            ``path,label`` is allowed).
        root: A manifest's root: its paths are relative to it, and none may lead outside it
            (``..`` or an absolute path elsewhere is refused, naming the line), so a manifest
            cannot make stoker read ``/etc/passwd``. Default: the manifest's folder; pass
            ``root="/"`` for a manifest of absolute paths anywhere.
        cache: Cache the folder listing (default True).
        listing_threads: Threads walking class folders in parallel.
        max_concurrent_reads: See `Storage`.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        StorageError: A malformed manifest (naming the line), a manifest path outside ``root``,
            or an empty dataset.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        cache: bool = True,
        listing_threads: int = 8,
        max_concurrent_reads: int = 64,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(max_concurrent_reads)
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no such file or folder")
        if self.path.is_dir():
            self._root, self._keys, self._labels, self.classes = self._list_folder(cache, listing_threads)
        else:
            self._root = Path(os.path.abspath(root if root is not None else self.path.parent))
            self._keys, self._labels, self.classes = self._read_manifest()
        if not self._keys:
            raise StorageError(f"{self.path}: no samples found")

    def describe(self) -> str:
        return f"files at {self.path}"

    def path_of(self, key: str) -> Path:
        """The file holding sample ``key``."""
        return self._root / key

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception] = []
        for index in indices:
            key = self._keys[index]
            try:
                # Never blocks on a FIFO nor reads a device (/dev/zero reads forever): a manifest
                # or a listing names the path, and what sits there now may be anything.
                with open_regular(self._root / key, "a sample") as file:
                    results.append(file.read())
            except StorageError as error:  # not a regular file: named by open_regular
                results.append(error)
            except OSError as error:
                failure = StorageError(error.errno, f"sample {key!r}: {error.strerror}", str(self._root / key))
                failure.__cause__ = error
                results.append(failure)
        return results

    # ---- listing --------------------------------------------------------------------------

    def _cache_file(self) -> Path:
        digest = hashlib.sha1(str(self.path.resolve()).encode()).hexdigest()[:16]
        return cache_dir("listings") / f"{digest}.json"

    def _list_folder(self, cache: bool, threads: int) -> tuple[Path, list[str], list[int | None], list[str]]:
        root = self.path.resolve()
        if cache:
            cached = self._load_cached_listing(root)
            if cached is not None:
                return cached
        skipped: list[tuple[str, str]] = []
        folders_here, _ = folder_entries(root, skipped)
        # A class folder that is the dataset's own folder or one above it (`all -> .`) would list
        # every sample again under it: a cycle like any other.
        above = folders_up_from(root)
        classes = []
        for name, status in folders_here:
            if (status.st_dev, status.st_ino) in above:
                skipped.append((str(root / name), skipped_why(ALREADY_WALKED)))
            else:
                classes.append(name)
        if not classes:
            tell_skipped(root, skipped)
            raise StorageError(f"{root}: an ImageFolder needs one folder per class; found none")
        walked = _native.list_tree([root / name for name in classes], root, list(SAMPLE_EXTENSIONS), max(1, threads))
        keys: list[str] = []
        labels: list[int | None] = []
        folders = {str(root): os.stat(root).st_mtime_ns}
        for label, (files, visited, passed_over) in enumerate(walked):
            keys.extend(files)
            labels.extend([label] * len(files))
            folders.update(visited)
            skipped.extend((path, skipped_why(why)) for path, why in passed_over)
        tell_skipped(root, skipped)
        if cache:
            self._save_listing(root, keys, labels, classes, folders, skipped)
        return root, keys, labels, classes

    def _load_cached_listing(self, root: Path) -> tuple[Path, list[str], list[int | None], list[str]] | None:
        try:
            # A listing of every file: as large as a manifest that lists every sample.
            data = read_json(self._cache_file(), what="a cached listing", max_bytes=MAX_MANIFEST_BYTES)
            if not isinstance(data, dict) or data.get("version") != _LISTING_VERSION or data.get("root") != str(root):
                return None
            for folder, mtime in data["folders"].items():
                if os.stat(folder).st_mtime_ns != mtime:
                    return None
            skipped = [(str(path), str(why)) for path, why in data["skipped"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # missing, stale or damaged: listed again
            return None
        keys, counts, classes = data.get("keys"), data.get("counts"), data.get("classes")
        if not (
            isinstance(keys, list)
            and isinstance(counts, list)
            and isinstance(classes, list)
            and len(counts) == len(classes)
            and all(type(count) is int and count >= 0 for count in counts)
            and sum(counts) == len(keys)
            and all(isinstance(key, str) for key in keys)
            and all(isinstance(name, str) for name in classes)
        ):
            return None
        tell_skipped(root, skipped)
        labels: list[int | None] = [label for label, count in enumerate(counts) for _ in range(count)]
        return root, keys, labels, classes

    def _save_listing(
        self,
        root: Path,
        keys: list[str],
        labels: list[int | None],
        classes: list[str],
        folders: dict[str, int],
        skipped: list[tuple[str, str]],
    ) -> None:
        counts = [0] * len(classes)
        for label in labels:
            counts[label] += 1  # type: ignore[index]
        target = self._cache_file()
        temporary = target.with_suffix(f".{os.getpid()}.tmp")
        listing = {"version": _LISTING_VERSION, "root": str(root), "classes": classes, "counts": counts, "keys": keys}
        try:
            temporary.write_text(json.dumps({**listing, "folders": folders, "skipped": skipped}))
            temporary.replace(target)
        except OSError:
            temporary.unlink(missing_ok=True)  # a cache we cannot write is only slower

    # ---- manifests ------------------------------------------------------------------------

    def _read_manifest(self) -> tuple[list[str], list[int | None], list[str] | None]:
        delimiter = "\t" if self.path.suffix.lower() in (".tsv", ".txt") else ","
        rows: list[tuple[str, str | None]] = []
        root = str(self._root)
        with io.TextIOWrapper(open_regular(self.path, "a manifest"), newline="") as file:
            for number, row in enumerate(csv.reader(file, delimiter=delimiter), start=1):
                if not row or row[0].startswith("#"):
                    continue
                if number == 1 and [cell.strip().lower() for cell in row[:2]] in (["path", "label"], ["path"]):
                    continue
                if len(row) > 2:
                    raise StorageError(f"{self.path}, line {number}: expected 'path{delimiter}label', got {len(row)} fields")
                place = row[0].strip()
                # Lexically, not through symbolic links: a link inside the root is the user's own choice.
                if os.path.commonpath([root, os.path.normpath(os.path.join(root, place))]) != root:
                    raise StorageError(
                        f"{self.path}, line {number}: {place!r} leads outside the manifest's root {root} (pass root= to name a wider one)"
                    )
                rows.append((place, row[1].strip() if len(row) == 2 and row[1].strip() else None))
        values = {label for _, label in rows if label is not None}
        classes: list[str] | None = None
        if values and all(value.lstrip("-").isdigit() for value in values):
            labels: list[int | None] = [int(label) if label is not None else None for _, label in rows]
        elif values:
            classes = sorted(values)
            position = {name: index for index, name in enumerate(classes)}
            labels = [position[label] if label is not None else None for _, label in rows]
        else:
            labels = [None] * len(rows)
        return [path for path, _ in rows], labels, classes
