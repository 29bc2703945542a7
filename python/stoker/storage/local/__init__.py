"""Storage on this machine's disks: one file per sample, WebDataset tar shards, LMDB, Parquet,
JSON Lines (plain, gzip, zstd), tokenized documents, and bytes in memory. Reads are explicit positional reads through the Rust
core, coalesced where samples sit side by side (LMDBIO), with the GIL released."""

from ._caffe import DatumLayout, parse_datum
from ._files import AUDIO_EXTENSIONS, IMAGE_EXTENSIONS, SAMPLE_EXTENSIONS, VIDEO_EXTENSIONS, FileStorage
from ._jsonl import JSONL_SUFFIXES, JsonlStorage
from ._lmdb import CLASSES_FILE, LmdbStorage, import_lmdb
from ._memory import MemoryStorage
from ._parquet import ParquetStorage, import_pyarrow
from ._reads import read_spans
from ._tokens import TOKEN_DTYPES, TokenFile, TokenShards, open_tokens
from .tar import (
    DATASET_FORMAT,
    INDEX_FORMAT,
    INDEX_VERSION,
    PARTIAL_MARKER,
    SHARD_IMAGE_EXTENSIONS,
    IndexHeader,
    ShardBlock,
    ShardCatalog,
    ShardIndex,
    TarShardStorage,
    build_index,
    decode_member,
    header_of,
    index_path,
    index_to_json,
    load_index,
    parse_index,
    write_index,
)

__all__ = [
    "AUDIO_EXTENSIONS",
    "CLASSES_FILE",
    "DATASET_FORMAT",
    "DatumLayout",
    "FileStorage",
    "IMAGE_EXTENSIONS",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "IndexHeader",
    "JSONL_SUFFIXES",
    "JsonlStorage",
    "LmdbStorage",
    "MemoryStorage",
    "PARTIAL_MARKER",
    "SHARD_IMAGE_EXTENSIONS",
    "ParquetStorage",
    "SAMPLE_EXTENSIONS",
    "ShardBlock",
    "ShardCatalog",
    "ShardIndex",
    "TOKEN_DTYPES",
    "TarShardStorage",
    "TokenFile",
    "TokenShards",
    "VIDEO_EXTENSIONS",
    "build_index",
    "decode_member",
    "header_of",
    "import_lmdb",
    "import_pyarrow",
    "index_path",
    "index_to_json",
    "load_index",
    "open_tokens",
    "parse_datum",
    "parse_index",
    "read_spans",
    "write_index",
]
