"""``stoker convert SRC DST --ray``: a conversion to indexed tar shards spread over a Ray cluster
(reads and tar encoding on the workers, `StokerShardSink` committing on the driver), giving the
same bytes as the one-machine `stoker.storage.convert_storage`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..storage import ConversionReport

__all__ = ["convert_with_ray"]


def convert_with_ray(
    source: str,
    destination: str | os.PathLike[str],
    *,
    shard_size: int = 256 << 20,
    address: str | None = None,
    rows_per_block: int = 256,
    timing: dict[str, float] | None = None,
    **storage_options: Any,
) -> ConversionReport:
    """Convert ``source`` (a path or URL every Ray node can open) into tar shards at
    ``destination`` (a folder every Ray node sees) with Ray.

    Args:
        source: The dataset to convert (`open_storage`).
        destination: A new or empty folder.
        shard_size: Start a new shard past this many bytes.
        address: The Ray cluster (``"auto"``, ``"127.0.0.1:6379"``); None: the one this process
            is connected to, else a new local one.
        rows_per_block: Samples per read and per Ray block.
        timing: Filled with ``task_seconds`` (the workers' time, summed), ``tasks`` and
            ``driver_seconds`` (assembly and verification), to project to more workers.
        storage_options: Passed to `open_storage` on every worker.

    Raises:
        StorageError: The destination is not new or empty; a sample lost, repeated or read back
            different (no ``dataset.json`` is written then).
        Exception: A read task's error after Ray's retries, naming the sample.
    """
    import ray

    from ._datasink import StokerShardSink
    from ._datasource import StokerDatasource

    connected_here = not ray.is_initialized()
    if connected_here:
        ray.init(address=address, log_to_driver=False)
    try:
        datasource = StokerDatasource(source, columns=("index", "key", "label", "bytes"), rows_per_block=rows_per_block, **storage_options)
        sink = StokerShardSink(destination, shard_size=shard_size, samples=datasource.count, classes=datasource.classes)
        ray.data.read_datasource(datasource).write_datasink(sink)
    finally:
        if connected_here:
            ray.shutdown()
    if timing is not None:
        timing.update({key: sink.report[key] for key in ("task_seconds", "tasks", "driver_seconds")})
    return ConversionReport(Path(destination), "shards", sink.report["samples"], sink.report["bytes"], sink.report["shards"])
