"""What an operator left out of a run (`Loader.exclude`), kept beside its provenance ledger: one
JSON line per exclusion, per rank (``exclusions-rank-00000.jsonl``), flushed when it is made, so
the record of the run says which batches or samples were cut and when, as `stoker replay
--exclusions` shows. Read back, it is input: a line that is not a well-formed record is skipped,
with a warning naming the file and line, and nothing else is lost."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .._bounded import open_regular, parse_json, shown_logger
from ..errors import StorageError

__all__ = ["read_exclusions", "write_exclusion"]

_logger = shown_logger("stoker.observe")
_FILE = re.compile(r"exclusions-rank-(\d{5})\.jsonl$")
_KEYS_KEPT = 100_000  # keys listed per record: a record of millions stays readable; the count is whole
_RECORD_BYTES = 256 << 20  # a line read back at most: the keys kept, a kilobyte each, quoted and escaped


def write_exclusion(directory: Path, *, rank: int, epoch: int, step: int, steps: range | None, keys: list[str]) -> None:
    """Append one exclusion: made at ``step`` (the next batch's) of ``epoch``, of ``steps`` (or
    by key), leaving out the samples of ``keys``.

    Raises:
        StorageError: The file cannot be written.
    """
    record = {
        "epoch": epoch,
        "step": step,
        "steps": None if steps is None else [steps.start, steps.stop - 1],
        "samples": len(keys),
        "keys": keys[:_KEYS_KEPT],
    }
    path = directory / f"exclusions-rank-{rank:05d}.jsonl"
    try:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
    except OSError as error:
        raise StorageError(f"cannot record the exclusion in {path}: {error}") from error


def _valid(record: Any) -> bool:
    def whole(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    steps = record.get("steps") if isinstance(record, dict) else None
    return (
        isinstance(record, dict)
        and all(whole(record.get(name)) for name in ("epoch", "step", "samples"))
        and (steps is None or isinstance(steps, list) and len(steps) == 2 and all(whole(step) for step in steps))
        and isinstance(record.get("keys"), list)
        and all(isinstance(key, str) for key in record["keys"])
    )


def read_exclusions(directory: str | os.PathLike[str], *, rank: int | None = None) -> list[dict[str, Any]]:
    """Every exclusion the run's ranks (or one ``rank``) recorded, each with its ``rank``, oldest
    first per rank: ``epoch``, ``step`` (when it was made), ``steps`` (``[first, last]``, or None
    for one by key), ``samples`` (how many were left out) and ``keys`` (the first 100,000)."""
    found: list[dict[str, Any]] = []
    folder = Path(directory)
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = _FILE.search(path.name)
        if not match or (rank is not None and int(match.group(1)) != rank):
            continue
        with open_regular(path, "an exclusions record") as file:
            for number, line in enumerate(iter(lambda: file.readline(_RECORD_BYTES + 1), b""), start=1):
                too_long = len(line) > _RECORD_BYTES
                while too_long and line and not line.endswith(b"\n"):  # skipped to its end, a MB at a time
                    line = file.readline(1 << 20)
                record: Any = None
                try:
                    record = None if too_long else parse_json(line, f"{path} line {number}", max_bytes=_RECORD_BYTES)
                except ValueError:
                    record = None
                if not _valid(record):
                    _logger.warning("%s line %d: not an exclusion record, skipped", path, number)
                    continue
                found.append(
                    {"rank": int(match.group(1)), **{name: record[name] for name in ("epoch", "step", "steps", "samples", "keys")}}
                )
    return found
