"""WebDataset tar shards read at random: `TarShardStorage`, the sidecar index of each shard
(`ShardIndex`; the binary format v3 is documented in `_index_file.py`, the older JSON ones read
by `_index_json.py`), and the catalog that finds a sample's shard and span from the indexes'
headers, loading a shard's arrays only when one of its samples is read (`ShardCatalog`)."""

from ._catalog import SHARD_IMAGE_EXTENSIONS, ShardBlock, ShardCatalog, decode_member
from ._index import ShardIndex, build_index, index_path
from ._index_file import INDEX_FORMAT, INDEX_VERSION, IndexHeader, header_of, load_index, parse_index, write_index
from ._index_json import index_to_json
from ._storage import DATASET_FORMAT, PARTIAL_MARKER, TarShardStorage

__all__ = [
    "DATASET_FORMAT",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "PARTIAL_MARKER",
    "SHARD_IMAGE_EXTENSIONS",
    "IndexHeader",
    "ShardBlock",
    "ShardCatalog",
    "ShardIndex",
    "TarShardStorage",
    "build_index",
    "decode_member",
    "header_of",
    "index_path",
    "index_to_json",
    "load_index",
    "parse_index",
    "write_index",
]
