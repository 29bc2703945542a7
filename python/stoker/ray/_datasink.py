"""`StokerShardSink`: a Ray Data sink that writes indexed tar shards from many workers, the same
bytes `stoker convert` writes on one machine, with one ``dataset.json`` committed at the end.

Tar members are position-independent (no offsets in their headers), so the work splits cleanly:
each write task turns its rows into the tar records `stoker convert` would write for them (one
file of records per task, written under a temporary name and renamed) and returns, per sample,
its index, where its records lie and their CRC-32. Once every task is done, the driver orders the
samples by index, cuts shards where `stoker convert` cuts them (a shard ends after the sample that
takes it to ``shard_size``), joins the records into each shard, indexes and verifies every sample
against its CRC-32, and only then writes ``dataset.json`` (under a temporary name, renamed). A
failed or interrupted job leaves no ``dataset.json``; the destination must be a folder every Ray
node sees (a shared filesystem) when the cluster spans machines.
"""

from __future__ import annotations

import collections
import io
import json
import os
import shutil
import tarfile
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

__all__ = ["StokerShardSink"]

PARTS = ".ray-parts"


def sample_records(key: str, data: bytes, label: Any) -> tuple[str, bytes]:
    """(member key, the tar records of one sample) exactly as `stoker convert` writes them: the
    payload member, then a ``.cls`` member with the label when there is one."""
    from ..ingest import add_tar_member, shard_key

    member_key, extension = shard_key(key)
    buffer = io.BytesIO()
    archive = tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT)
    add_tar_member(archive, f"{member_key}.{extension}", data)
    if label is not None:
        add_tar_member(archive, f"{member_key}.cls", str(label).encode())
    # Not closed: closing would add the end-of-archive blocks, which belong to the shard.
    return member_key, buffer.getvalue()


def end_of_archive(length: int) -> bytes:
    """What `tarfile.TarFile.close` appends to ``length`` bytes of records: two zero blocks, then
    zeros to a multiple of the 20-block record size."""
    closed = length + 2 * tarfile.BLOCKSIZE
    return bytes(2 * tarfile.BLOCKSIZE + (-closed) % tarfile.RECORDSIZE)


class StokerShardSink:
    """A ``ray.data.Datasink`` writing rows with columns ``index``, ``key``, ``label`` and
    ``bytes`` (as `StokerDatasource` reads them) into ``destination`` as indexed tar shards.

    Args:
        destination: A new or empty folder.
        shard_size: Start a new shard past this many bytes (as `stoker convert`).
        samples: How many samples the dataset holds (every index from 0 must arrive once).
        classes: The class names for ``dataset.json`` (the source's).

    Raises:
        StorageError: (at the start) The destination is a file or a non-empty folder; (at the
            end) a sample missing or repeated, or one that reads back different bytes.
    """

    report: dict[str, Any]
    """What the write did, once it finished: ``samples``, ``bytes``, ``shards``, and seconds and
    tasks per phase."""

    def __new__(
        cls, destination: str | os.PathLike[str], *, shard_size: int = 256 << 20, samples: int, classes: list[str] | None = None
    ) -> Any:
        # Built on first use: `ray` is an optional extra, imported only by those who use it.
        return _sink_class()(destination, shard_size=shard_size, samples=samples, classes=classes)

    def __init__(
        self, destination: str | os.PathLike[str], *, shard_size: int = 256 << 20, samples: int, classes: list[str] | None = None
    ) -> None:
        """Never runs (`__new__` returns the Ray datasink's own instance): the signature, for
        readers and type checkers."""


def _sink_class() -> type:
    from ray.data.datasource import Datasink

    from ..storage import StorageError
    from ..storage.local import DATASET_FORMAT

    class _StokerShardSink(Datasink):
        def __init__(
            self, destination: str | os.PathLike[str], *, shard_size: int = 256 << 20, samples: int, classes: list[str] | None = None
        ) -> None:
            self.destination = Path(destination)
            self.shard_size = shard_size
            self.samples = samples
            self.classes = classes

        def get_name(self) -> str:
            return "stoker-shards"

        def on_write_start(self, schema: Any = None) -> None:
            if self.destination.exists() and not self.destination.is_dir():
                raise StorageError(f"{self.destination} is a file; shards go into a folder (give a new or empty folder)")
            if self.destination.exists() and any(item.name != PARTS for item in self.destination.iterdir()):
                raise StorageError(f"{self.destination} is not empty; choose a new or empty folder")
            shutil.rmtree(self.destination / PARTS, ignore_errors=True)  # an earlier failed run's
            (self.destination / PARTS).mkdir(parents=True)

        def write(self, blocks: Any, ctx: Any) -> tuple[float, list[tuple[int, str, int, str, int, int, int, Any]]]:
            """Each row's records into one file for this task; the task's seconds, and per sample
            (index, member key, crc32, file, offset, length, payload bytes, label)."""
            started = time.perf_counter()
            name = f"task-{ctx.task_idx:06d}-{uuid.uuid4().hex}.records"
            partial = self.destination / PARTS / f".{name}.tmp"
            placed = []
            offset = 0
            with open(partial, "wb") as out:
                for block in blocks:
                    table = block.to_pydict() if hasattr(block, "to_pydict") else block.to_dict("list")
                    for index, key, label, data in zip(table["index"], table["key"], table["label"], table["bytes"]):
                        member_key, records = sample_records(key, data, label)
                        out.write(records)
                        placed.append((int(index), member_key, zlib.crc32(data), name, offset, len(records), len(data), label))
                        offset += len(records)
            partial.replace(self.destination / PARTS / name)
            return time.perf_counter() - started, placed

        def on_write_complete(self, write_result: Any) -> None:
            import ray

            started = time.perf_counter()
            placed = sorted((sample for _, task in write_result.write_returns for sample in task), key=lambda sample: sample[0])
            indices = [sample[0] for sample in placed]
            if indices != list(range(self.samples)):
                missing = sorted(set(range(self.samples)) - set(indices))
                raise StorageError(
                    f"{self.destination}: {len(placed)} samples written for {self.samples} (missing e.g. {missing[:5]}); no dataset.json"
                )
            keys = [sample[1] for sample in placed]
            if len(set(keys)) != len(keys):
                repeated = next(key for key, count in collections.Counter(keys).items() if count > 1)
                raise StorageError(f"two source samples map to shard key {repeated!r}")
            # Each shard is joined, indexed and verified by a task of its own: only the cut is
            # worked out here (sizes alone), so the driver's part does not grow with the bytes.
            assemble = ray.remote(_assemble_shard)
            waiting = time.perf_counter()
            shards = ray.get(
                [assemble.remote(str(self.destination), number, group, length) for number, (group, length) in enumerate(self._cut(placed))]
            )
            waited = time.perf_counter() - waiting
            shard_seconds = [shard.pop("seconds") for shard in shards]
            manifest = {"format": DATASET_FORMAT, "version": 1, "shards": shards, "samples": len(placed), "classes": self.classes}
            temporary = self.destination / ".dataset.json.tmp"
            temporary.write_text(json.dumps(manifest, indent=1))
            temporary.replace(self.destination / "dataset.json")
            shutil.rmtree(self.destination / PARTS, ignore_errors=True)
            self.report = {
                "samples": len(placed),
                "bytes": sum(sample[6] for sample in placed),
                "shards": len(shards),
                # For projecting to more workers: the write tasks' own time (reads and encoding),
                # the shard tasks' (assembly and verification; one task a shard, after the
                # writes) and the driver's (the cut and the manifest), which does not spread.
                "write_seconds": sum(seconds for seconds, _ in write_result.write_returns),
                "write_tasks": len(write_result.write_returns),
                "shard_seconds": sum(shard_seconds),
                "longest_shard_seconds": max(shard_seconds, default=0.0),
                "driver_seconds": time.perf_counter() - started - waited,
            }

        def on_write_failed(self, error: Exception) -> None:
            shutil.rmtree(self.destination / PARTS, ignore_errors=True)
            for part in self.destination.glob("shard-*"):
                part.unlink()

        def _cut(self, placed: list[tuple[Any, ...]]) -> list[tuple[list[tuple[Any, ...]], int]]:
            """The shards' samples and record bytes, cut where `stoker convert` cuts: after the
            sample that takes a shard to ``shard_size``."""
            shards: list[tuple[list[tuple[Any, ...]], int]] = []
            group: list[tuple[Any, ...]] = []
            length = 0
            for sample in placed:
                group.append(sample)
                length += sample[5]
                if length >= self.shard_size:
                    shards.append((group, length))
                    group, length = [], 0
            if group:
                shards.append((group, length))
            return shards

    return _StokerShardSink


def _assemble_shard(destination: str, number: int, group: list[tuple[Any, ...]], length: int) -> dict[str, Any]:
    """Shard ``number``: its samples' records then the archive's end, indexed, every sample read
    back against its CRC-32 and label; the manifest entry (and the seconds it took).

    Raises:
        StorageError: A sample reads back different bytes or label.
    """
    from ..storage import StorageError, TarShardStorage
    from ..storage.local import build_index, write_index

    started = time.perf_counter()
    folder = Path(destination)
    final = folder / f"shard-{number:06d}.tar"
    part = final.with_name(final.name + ".part")
    handles: dict[str, Any] = {}
    try:
        with open(part, "wb") as out:
            for _, _, _, name, offset, size, _, _ in group:
                source = handles.get(name) or handles.setdefault(name, open(folder / PARTS / name, "rb"))  # noqa: SIM115
                source.seek(offset)
                out.write(source.read(size))
            out.write(end_of_archive(length))
    finally:
        for handle in handles.values():
            handle.close()
    index = build_index(part, checksums=True)
    index.shard = final
    write_index(index)
    part.replace(final)
    with TarShardStorage([final], verify=True, missing_index="error") as written:
        found = [(key, zlib.crc32(data), label) for (key, data), label in zip(written.iter_sequential(), written.labels)]
    if found != [(sample[1], sample[2], sample[7]) for sample in group]:
        final.unlink()
        raise StorageError(f"verification: {final.name} reads back other samples, bytes or labels than were written")
    return {"name": final.name, "samples": len(group), "bytes": final.stat().st_size, "seconds": time.perf_counter() - started}
