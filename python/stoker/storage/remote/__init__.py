"""Storage across the network: S3-compatible object stores (objects, shards or Parquet by ranged
GETs, through obstore) and Cassandra/ScyllaDB rows. All share `RemoteStorage`: retried requests
(`stoker.storage.policies.RetryPolicy`), many in flight, and async per-sample fetches for the
Loader's out-of-order prefetch. Their client libraries are imported when a store is opened."""

from ._cassandra import CassandraStorage, read_metadata_table, sample_id
from ._cassandra_connection import CassandraConnection
from ._remote import RemoteStorage
from ._s3 import S3Storage

__all__ = ["CassandraConnection", "CassandraStorage", "RemoteStorage", "S3Storage", "read_metadata_table", "sample_id"]
