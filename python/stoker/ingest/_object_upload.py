"""Ingestion into object stores: any `Storage` into an S3 bucket or an Azure container, as one
object per sample or as indexed tar shards, with bounded concurrency, a progress bar, retries,
and resume.

Resume: what is already there is not written again. An object is written whole or not at all,
so an object of the right size is done; ``dataset.json`` is written last, so a dataset is never
seen half-written.

Google Cloud Storage is read in place but not written: obstore writes GCS objects with the XML
API's PUT, which the GCS emulator the tests run (fake-gcs-server) does not serve, so that path
could not be tested against a real server here.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._bounded import MAX_MANIFEST_BYTES, read_json
from ..errors import ConfigurationError, StorageError
from ..storage import Storage
from ..storage.local import index_to_json, load_index
from ..storage.policies import RetryPolicy, call_with_retries
from ..storage.remote import OBJECTS_FORMAT, classify_object_store_error, open_azure_store, open_s3_store, parse_object_url
from ._bounded import bounded
from ._convert import ConversionReport, _progress, convert_storage
from ._decode_check import checked, with_check

__all__ = ["INLINE_INDEX_BYTES", "manifest_with_indexes", "upload_to_object_store", "upload_to_s3"]

# The stores stoker writes, and how it opens each.
_WRITERS: dict[str, Callable[..., Any]] = {"s3": open_s3_store, "az": open_azure_store}


# Indexes up to this size ride inside the uploaded ``dataset.json`` (about 120,000 samples): an
# open is then one round trip, not two. Past it, the sidecars' parallel GETs move the bytes
# faster than one object would.
INLINE_INDEX_BYTES = 16 << 20


def manifest_with_indexes(folder: Path, limit: int = INLINE_INDEX_BYTES) -> bytes:
    """The shard folder's ``dataset.json``, each shard entry carrying its ``.idx`` as ``index``
    when all of them together are at most ``limit`` bytes (the ``.idx`` sidecars are uploaded
    either way, for readers that look for them)."""
    manifest = read_json(folder / "dataset.json", what="a dataset's manifest", max_bytes=MAX_MANIFEST_BYTES)
    try:
        sidecars = [folder / f"{shard['name']}.idx" for shard in manifest["shards"]]
    except (KeyError, TypeError) as error:
        raise StorageError(f"{folder / 'dataset.json'}: not a stoker.shards manifest ({type(error).__name__}: {error})") from error
    if sum(path.stat().st_size for path in sidecars) <= limit:
        for shard, path in zip(manifest["shards"], sidecars):
            shard["index"] = index_to_json(load_index(folder / shard["name"], path))
    return json.dumps(manifest, separators=(",", ":")).encode()


def upload_to_object_store(
    source: Storage,
    url: str,
    *,
    to: str = "objects",
    shard_size: int = 256 << 20,
    concurrency: int = 32,
    progress: bool = True,
    retry: RetryPolicy | None = None,
    decode_check: bool = True,
    **store_options: Any,
) -> ConversionReport:
    """Write ``source`` under ``s3://bucket/prefix`` or ``az://container/prefix``: one object
    per sample (``to="objects"``) or indexed tar shards (``to="shards"``), then ``dataset.json``.
    `open_storage` reads it back by the URL.

    Args:
        source: Any storage.
        url: ``s3://bucket/prefix`` or ``az://container/prefix`` (also ``azure://``, ``abfs[s]://``).
        to: ``"objects"`` or ``"shards"``.
        shard_size: Bytes per shard.
        concurrency: PUTs in flight.
        progress: Progress bar on stderr.
        retry: Retries per PUT.
        decode_check: Leave out (and list in the report) empty files and images that do not
            decode, as `convert_storage` does; False uploads every sample as it is.
        store_options: The store's settings (endpoint, credentials...: `open_s3_store`,
            `open_azure_store`).

    Raises:
        ConfigurationError: Not a store stoker writes (``gs://`` is read in place only).
        StorageError: A PUT kept failing (names the key), or access refused.
    """
    location = parse_object_url(url)
    if location.store not in _WRITERS:
        raise ConfigurationError(
            f"{location.url}: stoker reads gs:// in place but does not write it; convert to a local folder and copy it "
            "with gcloud storage cp -r"
        )
    if location.store == "az" and location.account and "account" not in store_options:
        store_options = {**store_options, "account": location.account}
    bucket, prefix = location.bucket, location.prefix
    store = _WRITERS[location.store](bucket, **store_options)
    policy = retry or RetryPolicy()
    if to not in ("objects", "shards"):
        raise ConfigurationError(f'to must be "objects" or "shards", got {to!r}')
    source, check = checked(source, decode_check)

    def object_key(name: str) -> str:
        return f"{prefix}/{name}" if prefix else name

    async def existing_sizes() -> dict[str, int]:
        import obstore

        sizes: dict[str, int] = {}
        base = f"{prefix}/" if prefix else ""
        async for chunk in obstore.list(store, prefix or None, chunk_size=1000):
            for meta in chunk:
                sizes[meta["path"][len(base) :]] = meta["size"]
        return sizes

    async def put(name: str, data: bytes | Path) -> None:
        import obstore

        await call_with_retries(
            lambda: obstore.put_async(store, object_key(name), data),
            policy=policy,
            classify=classify_object_store_error,
            name=location.name(object_key(name)),
        )

    async def upload_objects() -> ConversionReport:
        done = await existing_sizes()
        total = 0
        with _progress(len(source), f"uploading objects to {url}", progress) as bar:

            async def one(item: tuple[str, bytes]) -> None:
                nonlocal total
                key, data = item
                if done.get(key) != len(data):
                    await put(key, data)
                total += len(data)
                bar.update()

            await bounded(concurrency, source.iter_sequential(), one)
        samples = [[key, label] for key, label in zip(source.keys, source.labels)]
        manifest = {"format": OBJECTS_FORMAT, "version": 1, "classes": source.classes, "samples": samples}
        await put("dataset.json", json.dumps(manifest).encode())
        return ConversionReport(url, f"{location.store}-objects", len(source), total, 0)

    async def upload_shards(folder: Path) -> ConversionReport:
        report = convert_storage(source, folder, to="shards", shard_size=shard_size, progress=progress, decode_check=False)
        done = await existing_sizes()
        files = sorted(path for path in folder.iterdir() if path.name != "dataset.json")

        async def one(path: Path) -> None:
            if done.get(path.name) != path.stat().st_size:
                await put(path.name, path)  # streamed from the file (multipart), never read whole

        await bounded(max(1, min(concurrency, 8)), files, one)
        await put("dataset.json", manifest_with_indexes(folder, INLINE_INDEX_BYTES))
        return ConversionReport(url, f"{location.store}-shards", report.samples, report.bytes, report.shards)

    try:
        if to == "objects":
            return with_check(asyncio.run(upload_objects()), check)
        with tempfile.TemporaryDirectory(prefix="stoker-upload-") as folder:
            return with_check(asyncio.run(upload_shards(Path(folder) / "shards")), check)
    except StorageError:
        raise
    except Exception as error:  # listing or the first PUT refused: say where
        raise StorageError(f"{url}: upload failed ({type(error).__name__}: {str(error).splitlines()[0]})") from error


def upload_to_s3(
    source: Storage,
    url: str,
    *,
    to: str = "objects",
    shard_size: int = 256 << 20,
    concurrency: int = 32,
    progress: bool = True,
    retry: RetryPolicy | None = None,
    decode_check: bool = True,
    **store_options: Any,
) -> ConversionReport:
    """`upload_to_object_store` for an ``s3://bucket/prefix`` URL (see there for the arguments).

    Raises:
        ConfigurationError: Not an ``s3://`` URL.
        StorageError: A PUT kept failing (names the key), or access refused.
    """
    parse_object_url(url, "s3")
    return upload_to_object_store(
        source,
        url,
        to=to,
        shard_size=shard_size,
        concurrency=concurrency,
        progress=progress,
        retry=retry,
        decode_check=decode_check,
        **store_options,
    )
