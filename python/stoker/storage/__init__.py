"""The read side: where bytes live. One small protocol (`Storage`) and its backends, by family.

- `local`: `FileStorage` (one file per sample: an ImageFolder tree or a manifest),
  `TarShardStorage` (WebDataset tar shards with sidecar indexes, random access, coalesced
  reads), `LmdbStorage` (explicit I/O through an offset index), `ParquetStorage` (Hugging Face's
  layout), `MemoryStorage`, and tokenized documents (`open_tokens`).
- `remote`: `S3Storage` (S3-compatible stores, by ranged GETs) and `CassandraStorage`
  (Cassandra/ScyllaDB rows), on `RemoteStorage`: retries, many requests in flight, async
  per-sample fetches for out-of-order prefetch.
- `policies`: `RetryPolicy`, `SampleCache`.
- `views`: `SubsetStorage`, `MixedStorage`.

`open_storage` picks the backend from a path or URL. Writing datasets (convert, upload,
inspect) is `stoker.ingest`'s. A new backend sets its keys and labels and implements one read
(`Storage._read_indices`); what it can do beyond that is declared by implementing a capability
protocol (`BlockStorage`, `MemberStorage`, `EpochStorage`, `LatencyReporting`), which the Loader
checks for. The package README walks through adding a backend.
"""

from .._deprecation import moved_names
from ..errors import CorruptSampleError, ShardError, StaleIndexError, StorageClosedError, StorageError, StorageUnavailableError
from ._capabilities import BlockStorage, EpochStorage, LatencyReporting, MemberStorage
from ._open import open_storage, storage_format
from ._protocol import Storage
from .local import (
    AUDIO_EXTENSIONS,
    IMAGE_EXTENSIONS,
    INDEX_FORMAT,
    INDEX_VERSION,
    VIDEO_EXTENSIONS,
    DatumLayout,
    FileStorage,
    LmdbStorage,
    MemoryStorage,
    ParquetStorage,
    ShardIndex,
    TarShardStorage,
    TokenFile,
    TokenShards,
    build_index,
    index_path,
    load_index,
    open_tokens,
    parse_datum,
    write_index,
)
from .policies import RetryPolicy, SampleCache
from .remote import CassandraConnection, CassandraStorage, RemoteStorage, S3Storage, read_metadata_table, sample_id
from .views import MixedStorage, SubsetStorage

__all__ = [
    "AUDIO_EXTENSIONS",
    "IMAGE_EXTENSIONS",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "VIDEO_EXTENSIONS",
    "BlockStorage",
    "CassandraConnection",
    "CassandraStorage",
    "CorruptSampleError",
    "DatumLayout",
    "EpochStorage",
    "FileStorage",
    "LatencyReporting",
    "LmdbStorage",
    "MemberStorage",
    "MemoryStorage",
    "MixedStorage",
    "ParquetStorage",
    "RemoteStorage",
    "RetryPolicy",
    "S3Storage",
    "SampleCache",
    "ShardError",
    "ShardIndex",
    "StaleIndexError",
    "Storage",
    "StorageClosedError",
    "StorageError",
    "StorageUnavailableError",
    "SubsetStorage",
    "TarShardStorage",
    "TokenFile",
    "TokenShards",
    "build_index",
    "index_path",
    "load_index",
    "open_storage",
    "open_tokens",
    "parse_datum",
    "read_metadata_table",
    "sample_id",
    "storage_format",
    "write_index",
]

# The write side moved to stoker.ingest; the per-read failure record to stoker.failures.
__getattr__ = moved_names(
    __name__,
    {
        "ConversionReport": "stoker.ingest:ConversionReport",
        "convert_storage": "stoker.ingest:convert_storage",
        "encode_datum": "stoker.ingest:encode_datum",
        "format_report": "stoker.ingest:format_report",
        "inspect_storage": "stoker.ingest:inspect_storage",
        "read_metadata_csv": "stoker.ingest:read_metadata_csv",
        "shard_key": "stoker.ingest:shard_key",
        "upload_to_cassandra": "stoker.ingest:upload_to_cassandra",
        "upload_to_s3": "stoker.ingest:upload_to_s3",
        "write_token_shards": "stoker.ingest:write_token_shards",
        "ReadFailure": "stoker.failures:Failure",
    },
)
