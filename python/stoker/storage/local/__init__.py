"""Storage on this machine's disks: one file per sample, WebDataset tar shards, LMDB, Parquet,
JSON Lines (plain, gzip, zstd), tokenized documents, and bytes in memory. Reads are explicit positional reads through the Rust
core, coalesced where samples sit side by side (LMDBIO), with the GIL released."""

from ._caffe import DatumLayout, parse_datum
from ._files import AUDIO_EXTENSIONS, IMAGE_EXTENSIONS, VIDEO_EXTENSIONS, FileStorage
from ._jsonl import JSONL_SUFFIXES, JsonlStorage
from ._lmdb import LmdbStorage
from ._memory import MemoryStorage
from ._parquet import ParquetStorage
from ._tar import TarShardStorage
from ._tar_index import ShardIndex, build_index, index_path
from ._tar_index_file import INDEX_FORMAT, INDEX_VERSION, load_index, write_index
from ._tar_index_json import index_to_json
from ._tokens import TokenFile, TokenShards, open_tokens

__all__ = [
    "AUDIO_EXTENSIONS",
    "IMAGE_EXTENSIONS",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "JSONL_SUFFIXES",
    "VIDEO_EXTENSIONS",
    "DatumLayout",
    "FileStorage",
    "JsonlStorage",
    "LmdbStorage",
    "MemoryStorage",
    "ParquetStorage",
    "ShardIndex",
    "TarShardStorage",
    "TokenFile",
    "TokenShards",
    "build_index",
    "index_path",
    "index_to_json",
    "load_index",
    "open_tokens",
    "parse_datum",
    "write_index",
]
