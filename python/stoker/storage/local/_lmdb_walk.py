"""The walk that builds an LMDB's offset index, run in a child process of its own.

liblmdb follows the page numbers it finds in the file through its memory map; in a corrupt file
(a flipped bit in a branch page) a page number can point past the end of the file, and touching
that page raises SIGBUS, which no Python code can catch: the whole training process would die.
The walk therefore runs in a child (``python -m stoker.storage.local._lmdb_walk``); a crash there is a
`StorageError` naming the file, and every read after it uses the offsets with explicit I/O,
checked against the file's size, never the map.

    python -m stoker.storage.local._lmdb_walk PATH SUBDIR VALUE_FORMAT   # prints the index as JSON
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ...errors import StorageError
from ._caffe import parse_datum

# The exit status the walk uses for an error it explains on stderr (a non-Datum value...).
_EXPLAINED = 3


def _map_start(data_file: Path) -> int:
    """Start address of this process's mapping of ``data_file`` (Linux /proc/self/maps)."""
    target = os.path.realpath(data_file)
    starts = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].strip() == target:
                start = int(fields[0].split("-")[0], 16)
                starts.append(start - int(fields[2], 16))
    if not starts:
        raise StorageError(f"{data_file}: cannot find LMDB's memory map of this file in /proc/self/maps")
    return min(starts)


def walk(path: Path, subdir: bool, value_format: str) -> dict[str, Any]:
    """Every key's value (or Caffe Datum payload): where it sits in the data file, and its label.

    Raises:
        StorageError: The file is not LMDB, or a value is not the format asked for.
    """
    import lmdb
    import numpy as np

    data_file = path / "data.mdb" if subdir else path
    try:
        environment = lmdb.open(str(path), subdir=subdir, readonly=True, lock=False, readahead=False)
    except lmdb.Error as error:
        raise StorageError(f"{path}: cannot open as LMDB ({error})") from error
    base = _map_start(data_file)
    keys: list[str] = []
    labels: list[int | None] = []
    offsets: list[int] = []
    lengths: list[int] = []
    chosen = value_format
    try:
        with environment.begin(buffers=True) as transaction:
            for key, value in transaction.cursor():
                address = np.frombuffer(value, np.uint8).__array_interface__["data"][0] if len(value) else base
                offset, length, label = address - base, len(value), None
                if chosen == "auto":
                    chosen = "raw"
                    try:
                        if parse_datum(value).encoded:
                            chosen = "caffe"
                    except ValueError:
                        pass
                if chosen == "caffe":
                    try:
                        layout = parse_datum(value)
                    except ValueError as error:
                        raise StorageError(f"{path}: value of key {bytes(key)!r} is not a Caffe Datum ({error})") from error
                    offset, length, label = offset + layout.data_offset, layout.data_length, layout.label
                keys.append(bytes(key).decode("utf-8", "surrogateescape"))
                labels.append(label)
                offsets.append(offset)
                lengths.append(length)
    except lmdb.Error as error:
        raise StorageError(f"{path}: LMDB cannot read its pages ({error}): the file is corrupt") from error
    finally:
        environment.close()
    size = os.stat(data_file).st_size
    for name, offset, length in zip(keys, offsets, lengths):
        if not 0 <= offset <= offset + length <= size:
            raise StorageError(f"{path}: key {name!r} points at bytes {offset}..{offset + length}, outside the file's {size}")
    return {"value_format": "raw" if chosen == "auto" else chosen, "keys": keys, "labels": labels, "offsets": offsets, "lengths": lengths}


def walk_in_child(path: Path, subdir: bool, value_format: str) -> dict[str, Any]:
    """`walk`, in a child process, so that a crash in liblmdb is an error, not the end of this one.

    Raises:
        StorageError: The walk failed, or the child died (a corrupt file), naming the file.
    """
    finished = subprocess.run(
        [sys.executable, "-m", "stoker.storage.local._lmdb_walk", str(path), "1" if subdir else "0", value_format],
        capture_output=True,
        text=True,
    )
    if finished.returncode == 0:
        result: dict[str, Any] = json.loads(finished.stdout)
        return result
    if finished.returncode == _EXPLAINED:
        raise StorageError(finished.stderr.strip().splitlines()[-1])
    how = f"signal {-finished.returncode}" if finished.returncode < 0 else f"exit status {finished.returncode}"
    detail = finished.stderr.strip().splitlines()[-1] if finished.stderr.strip() else "no message"
    raise StorageError(f"{path}: LMDB crashed reading its pages ({how}; {detail}): the file is corrupt")


def main() -> None:
    path, subdir, value_format = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    try:
        index = walk(path, subdir, value_format)
    except StorageError as error:
        print(str(error), file=sys.stderr)
        sys.exit(_EXPLAINED)
    json.dump(index, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()
