"""Where bytes live: one protocol (`Storage`) and its backends.

- `FileStorage`: one file per sample (ImageFolder tree or manifest), cached parallel listing.
- `TarShardStorage`: WebDataset-compatible tar shards with sidecar indexes, random access,
  coalesced reads.
- `LmdbStorage`: LMDB (py-lmdb or Caffe) through a persisted offset index and explicit reads.
- `ParquetStorage`: Parquet files (Hugging Face's layout), row groups read whole and cached.
- `S3Storage`: S3-compatible object stores (objects or shards by ranged GETs), via obstore.
- `CassandraStorage`: Cassandra/ScyllaDB rows, many requests in flight.
Network backends share `RemoteStorage`: retries (`RetryPolicy`), a local `SampleCache`, async
per-sample `fetch` for out-of-order prefetch.
"""

from ._caffe import DatumLayout, encode_datum, parse_datum
from ._cassandra import CassandraStorage, read_metadata_table, sample_id
from ._cassandra_connection import CassandraConnection
from ._convert import ConversionReport, convert_storage, shard_key
from ._disk_cache import SampleCache
from ._errors import CorruptSampleError, ShardError, StaleIndexError, StorageClosedError, StorageError, StorageUnavailableError
from ._files import AUDIO_EXTENSIONS, IMAGE_EXTENSIONS, VIDEO_EXTENSIONS, FileStorage
from ._inspect import format_report, inspect_storage
from ._lmdb import LmdbStorage
from ._memory import MemoryStorage
from ._mixture import MixedStorage
from ._open import open_storage, storage_format
from ._parquet import ParquetStorage
from ._protocol import ReadFailure, Storage
from ._remote import RemoteStorage
from ._retry import RetryPolicy
from ._s3 import S3Storage
from ._subset import SubsetStorage
from ._tar import TarShardStorage
from ._tar_index import INDEX_FORMAT, INDEX_VERSION, ShardIndex, build_index, index_path, load_index, write_index
from ._tokens import TokenFile, TokenShards, open_tokens, write_token_shards
from ._upload import read_metadata_csv, upload_to_cassandra, upload_to_s3

__all__ = [
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "IMAGE_EXTENSIONS",
    "AUDIO_EXTENSIONS",
    "VIDEO_EXTENSIONS",
    "ConversionReport",
    "CassandraConnection",
    "CassandraStorage",
    "CorruptSampleError",
    "DatumLayout",
    "FileStorage",
    "LmdbStorage",
    "MemoryStorage",
    "MixedStorage",
    "ParquetStorage",
    "ReadFailure",
    "RemoteStorage",
    "RetryPolicy",
    "S3Storage",
    "SampleCache",
    "ShardError",
    "ShardIndex",
    "StaleIndexError",
    "Storage",
    "StorageError",
    "StorageClosedError",
    "StorageUnavailableError",
    "SubsetStorage",
    "TarShardStorage",
    "TokenFile",
    "TokenShards",
    "build_index",
    "convert_storage",
    "encode_datum",
    "format_report",
    "index_path",
    "inspect_storage",
    "load_index",
    "open_tokens",
    "open_storage",
    "parse_datum",
    "read_metadata_csv",
    "read_metadata_table",
    "sample_id",
    "shard_key",
    "storage_format",
    "upload_to_cassandra",
    "upload_to_s3",
    "write_token_shards",
    "write_index",
]
