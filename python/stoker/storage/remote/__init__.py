"""Storage across the network: S3-compatible object stores (objects, shards or Parquet by ranged
GETs, through obstore) and Cassandra/ScyllaDB rows. All share `RemoteStorage`: retried requests
(`stoker.storage.policies.RetryPolicy`), many in flight, and async per-sample fetches for the
Loader's out-of-order prefetch. Their client libraries are imported when a store is opened."""

from ._cassandra import CassandraStorage, await_response, classify_cassandra_error, read_metadata_table, sample_id
from ._cassandra_connection import CassandraConnection, check_identifier
from ._remote import RemoteStorage
from ._s3 import OBJECTS_FORMAT, S3Storage
from ._s3_client import classify_s3_error, open_s3_store, parse_s3_url
from ._s3_parquet import open_s3_parquet

__all__ = [
    "CassandraConnection",
    "CassandraStorage",
    "OBJECTS_FORMAT",
    "RemoteStorage",
    "S3Storage",
    "await_response",
    "check_identifier",
    "classify_cassandra_error",
    "classify_s3_error",
    "open_s3_parquet",
    "open_s3_store",
    "parse_s3_url",
    "read_metadata_table",
    "sample_id",
]
