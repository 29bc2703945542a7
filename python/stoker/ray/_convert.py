"""``stoker convert SRC DST --ray``: a conversion to indexed tar shards spread over a Ray cluster
(reads and tar encoding on the workers, `StokerShardSink` committing on the driver), giving the
same bytes as the one-machine `stoker.storage.convert_storage`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..ingest import ConversionReport

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
        timing: Filled with ``write_seconds`` and ``write_tasks`` (reading and encoding, summed
            over the workers), ``shard_seconds`` and ``longest_shard_seconds`` (assembly and
            verification, a task a shard) and ``driver_seconds``, to project to more workers.
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
        # Tasks of about 10,000 samples, at least two per core: Ray's own cost per task is
        # tens of milliseconds, so many small ones would cost more than they spread.
        cores = int(ray.cluster_resources().get("CPU", 1))
        tasks = max(2 * cores, -(-datasource.count // 10_000))
        ray.data.read_datasource(datasource, override_num_blocks=min(tasks, max(1, datasource.count))).write_datasink(sink)
    finally:
        if connected_here:
            ray.shutdown()
    if timing is not None:
        timing.update({key: value for key, value in sink.report.items() if key.endswith(("seconds", "tasks"))})
    return ConversionReport(Path(destination), "shards", sink.report["samples"], sink.report["bytes"], sink.report["shards"])
