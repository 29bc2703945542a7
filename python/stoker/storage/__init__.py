"""Where bytes live: one protocol (`Storage`) and its backends.

- `FileStorage`: one file per sample (ImageFolder tree or manifest), cached parallel listing.
- `TarShardStorage`: WebDataset-compatible tar shards with sidecar indexes, random access,
  coalesced reads.
- `LmdbStorage`: LMDB (py-lmdb or Caffe) through a persisted offset index and explicit reads.
"""

from ._caffe import DatumLayout, encode_datum, parse_datum
from ._convert import ConversionReport, convert_storage, shard_key
from ._errors import CorruptSampleError, ShardError, StaleIndexError, StorageError
from ._files import IMAGE_EXTENSIONS, FileStorage
from ._inspect import format_report, inspect_storage
from ._lmdb import LmdbStorage
from ._memory import MemoryStorage
from ._mixture import MixedStorage
from ._open import open_storage, storage_format
from ._protocol import ReadFailure, Storage
from ._tar import TarShardStorage
from ._tokens import TokenFile, TokenShards, open_tokens, write_token_shards
from ._tar_index import INDEX_FORMAT, INDEX_VERSION, ShardIndex, build_index, index_path, load_index, write_index

__all__ = [
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "IMAGE_EXTENSIONS",
    "ConversionReport",
    "CorruptSampleError",
    "DatumLayout",
    "FileStorage",
    "LmdbStorage",
    "MemoryStorage",
    "MixedStorage",
    "ReadFailure",
    "ShardError",
    "ShardIndex",
    "StaleIndexError",
    "Storage",
    "StorageError",
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
    "shard_key",
    "storage_format",
    "write_token_shards",
    "write_index",
]
