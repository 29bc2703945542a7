"""The read side: where bytes live. One small protocol (`Storage`) and its backends, by family.

- `local`: `FileStorage` (one file per sample: an ImageFolder tree or a manifest),
  `TarShardStorage` (WebDataset tar shards with sidecar indexes, random access, coalesced
  reads), `LmdbStorage` (explicit I/O through an offset index), `ParquetStorage` (Hugging Face's
  layout), `JsonlStorage` (JSON Lines text corpora, plain, gzip or zstd), `MemoryStorage`, and
  tokenized documents (`open_tokens`).
- `formats`: `PeerFormatStorage`, the peers' own formats read in place (MosaicML Streaming's
  MDS shards, TFRecord files); on object stores the stores below read them.
- `remote`: `S3Storage`, `GCSStorage`, `AzureStorage` (object stores, by ranged GETs), `HTTPStorage` (web servers, by URL) and `CassandraStorage`
  (Cassandra/ScyllaDB rows), on `RemoteStorage`: retries, many requests in flight, async
  per-sample fetches for out-of-order prefetch.
- `policies`: `RetryPolicy`, `SampleCache`, `hedged_copy` (marks a request as a hedged copy).
- `views`: `SubsetStorage`, `FilteredStorage`, `MixedStorage`.

`open_storage` picks the backend from a path or URL. Writing datasets (convert, upload,
inspect) is `stoker.ingest`'s. A new backend sets its keys and labels and implements one read
(`Storage._read_indices`); what it can do beyond that is declared by implementing a capability
protocol (`BlockStorage`, `MemberStorage`, `ColumnStorage`, `EpochStorage`, `LatencyReporting`), which the Loader
checks for. The package README walks through adding a backend.
"""

from .._deprecation import moved_names
from ..errors import (
    CorruptSampleError,
    ShardError,
    StaleIndexError,
    StorageClosedError,
    StorageError,
    StorageUnavailableError,
    StorageUnreachableError,
)
from ._cache import cache_dir
from ._capabilities import BlockStorage, ColumnStorage, EpochStorage, LatencyReporting, MemberStorage, has_blocks
from ._labels import label_array
from ._locate import sample_locations
from ._member_fields import member_fields
from ._open import open_storage, storage_format
from ._protocol import Storage
from .formats import ArrayRecordStorage, LanceStorage, PeerFormatStorage
from .local import (
    AUDIO_EXTENSIONS,
    IMAGE_EXTENSIONS,
    VIDEO_EXTENSIONS,
    FileStorage,
    JsonlStorage,
    LmdbStorage,
    MemoryStorage,
    ParquetStorage,
    TarShardStorage,
    TokenFile,
    TokenShards,
    open_tokens,
)
from .policies import PRICE_TABLES, PriceTable, RetryPolicy, SampleCache, StoreTraffic, hedged_copy
from .remote import AzureStorage, CassandraConnection, CassandraStorage, GCSStorage, HTTPStorage, ObjectStorage, RemoteStorage, S3Storage
from .views import FilteredStorage, MixedStorage, SubsetStorage

__all__ = [
    "AUDIO_EXTENSIONS",
    "ArrayRecordStorage",
    "AzureStorage",
    "BlockStorage",
    "CassandraConnection",
    "CassandraStorage",
    "ColumnStorage",
    "CorruptSampleError",
    "EpochStorage",
    "FileStorage",
    "FilteredStorage",
    "GCSStorage",
    "HTTPStorage",
    "IMAGE_EXTENSIONS",
    "JsonlStorage",
    "LanceStorage",
    "LatencyReporting",
    "LmdbStorage",
    "MemberStorage",
    "MemoryStorage",
    "MixedStorage",
    "ObjectStorage",
    "PRICE_TABLES",
    "ParquetStorage",
    "PeerFormatStorage",
    "PriceTable",
    "RemoteStorage",
    "RetryPolicy",
    "S3Storage",
    "SampleCache",
    "ShardError",
    "StaleIndexError",
    "Storage",
    "StorageClosedError",
    "StorageError",
    "StorageUnavailableError",
    "StorageUnreachableError",
    "StoreTraffic",
    "SubsetStorage",
    "TarShardStorage",
    "TokenFile",
    "TokenShards",
    "VIDEO_EXTENSIONS",
    "cache_dir",
    "has_blocks",
    "hedged_copy",
    "label_array",
    "member_fields",
    "open_storage",
    "open_tokens",
    "sample_locations",
    "storage_format",
]

# The write side moved to stoker.ingest; the per-read failure record to stoker.failures; the
# shard index and the Caffe Datum parser to stoker.storage.local, Cassandra's helpers to .remote.
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
        "INDEX_FORMAT": "stoker.storage.local:INDEX_FORMAT",
        "INDEX_VERSION": "stoker.storage.local:INDEX_VERSION",
        "ShardIndex": "stoker.storage.local:ShardIndex",
        "build_index": "stoker.storage.local:build_index",
        "index_path": "stoker.storage.local:index_path",
        "load_index": "stoker.storage.local:load_index",
        "write_index": "stoker.storage.local:write_index",
        "DatumLayout": "stoker.storage.local:DatumLayout",
        "parse_datum": "stoker.storage.local:parse_datum",
        "read_metadata_table": "stoker.storage.remote:read_metadata_table",
        "sample_id": "stoker.storage.remote:sample_id",
    },
)
