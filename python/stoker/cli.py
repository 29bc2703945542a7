"""The `stoker` command: convert, inspect and index datasets.

    stoker convert SRC DST [--to shards|lmdb] [--shard-size 256MB]
    stoker inspect PATH [--json]
    stoker index SHARD.tar [SHARD.tar ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .storage import (
    StorageError,
    build_index,
    convert_storage,
    format_report,
    index_path,
    inspect_storage,
    open_storage,
    write_index,
)

_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "K": 1 << 10, "MB": 1 << 20, "M": 1 << 20, "GB": 1 << 30, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``"256MB"`` -> 268435456."""
    stripped = text.strip().upper()
    number = stripped.rstrip("KMGB")
    unit = stripped[len(number) :]
    if not number or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256MB)")
    return int(float(number) * _UNITS[unit])


def _convert(arguments: argparse.Namespace) -> int:
    to = arguments.to or ("lmdb" if arguments.destination.rstrip("/").endswith(".lmdb") else "shards")
    with open_storage(arguments.source) as source:
        report = convert_storage(source, arguments.destination, to=to, shard_size=arguments.shard_size, progress=not arguments.quiet)
    shards = f" in {report.shards} shards" if report.format == "shards" else ""
    print(f"wrote {report.samples} samples ({report.bytes / 1e6:.1f} MB){shards} to {report.destination}; verified")
    return 0


def _inspect(arguments: argparse.Namespace) -> int:
    report = inspect_storage(arguments.path)
    print(json.dumps(report, indent=1) if arguments.json else format_report(report))
    return 0


def _index(arguments: argparse.Namespace) -> int:
    from pathlib import Path

    for shard in arguments.shards:
        index = build_index(Path(shard), checksums=not arguments.no_checksums)
        write_index(index)
        print(f"{index_path(Path(shard))}: {len(index.keys)} samples")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stoker", description="Keeps accelerators fed.")
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser("convert", help="a folder or manifest to indexed tar shards or LMDB")
    convert.add_argument("source")
    convert.add_argument("destination")
    convert.add_argument("--to", choices=("shards", "lmdb"), default=None, help="default: lmdb when DST ends in .lmdb, else shards")
    convert.add_argument("--shard-size", type=parse_size, default=256 << 20, help="default 256MB")
    convert.add_argument("--quiet", action="store_true", help="no progress bar")
    convert.set_defaults(run=_convert)
    inspect = commands.add_parser("inspect", help="format, sample count, shards, sizes, label histogram")
    inspect.add_argument("path")
    inspect.add_argument("--json", action="store_true")
    inspect.set_defaults(run=_inspect)
    index = commands.add_parser("index", help="write the sidecar index of existing WebDataset shards")
    index.add_argument("shards", nargs="+")
    index.add_argument("--no-checksums", action="store_true", help="skip CRC-32s (indexing reads less)")
    index.set_defaults(run=_index)
    arguments = parser.parse_args(argv)
    try:
        return arguments.run(arguments)
    except (StorageError, FileNotFoundError, PermissionError, ValueError) as error:
        print(f"stoker {arguments.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"stoker {arguments.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
