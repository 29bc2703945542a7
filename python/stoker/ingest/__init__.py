"""The write side: turn a dataset into the formats stoker reads fastest, put it on a store, and
look at what a dataset holds. Uses `stoker.storage` to read; storage never imports this package.

- `convert_storage`: any storage to indexed tar shards, LMDB or Parquet (``stoker convert``),
  every image decoded once first so nothing unusable is packed.
- `upload_to_s3`, `upload_to_cassandra`: a storage onto a store, with its metadata.
- `inspect_storage`, `format_report`: what a dataset is (``stoker inspect``).
- `write_token_shards`, `write_token_file`: tokenized documents as shards, or as one token file
  with offsets (what length buckets need), for `stoker.TokenLoader`.
- `encode_datum`: Caffe's Datum, for Caffe-style LMDB.
"""

from ._caffe import encode_datum
from ._convert import ConversionReport, add_tar_member, convert_storage, shard_key
from ._inspect import format_report, inspect_storage
from ._object_upload import upload_to_object_store, upload_to_s3
from ._tokens import write_token_file, write_token_shards
from ._upload import read_metadata_csv, upload_to_cassandra

__all__ = [
    "ConversionReport",
    "add_tar_member",
    "convert_storage",
    "encode_datum",
    "format_report",
    "inspect_storage",
    "read_metadata_csv",
    "shard_key",
    "upload_to_cassandra",
    "upload_to_object_store",
    "upload_to_s3",
    "write_token_file",
    "write_token_shards",
]
