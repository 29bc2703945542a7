"""Storage across the network: object stores (S3 and S3-compatible stores, Google Cloud Storage,
Azure Blob Storage: objects, shards or Parquet by ranged GETs, through obstore), plain web servers
(``https://`` URL lists, through stoker's own client; the lists themselves, WebDataset's brace
form computed when asked for, in `url_lists`), and Cassandra/ScyllaDB rows. All share
`RemoteStorage`: retried requests (`stoker.storage.policies.RetryPolicy`), many in flight, and
async per-sample fetches for the Loader's out-of-order prefetch. Every object store and web server
read goes through one `ObjectClient`, under the HTTP body policy of `stoker._bounded`. Their
client libraries are imported when a store is opened."""

from ._azure import AzureStorage
from ._cassandra import CassandraStorage, await_response, classify_cassandra_error, read_metadata_table, sample_id
from ._cassandra_connection import CassandraConnection, check_identifier
from ._cloud_clients import open_azure_store, open_gcs_store, open_http_store, parse_connection_string
from ._gcs import GCSStorage
from ._http import HTTPStorage
from ._object_parquet import open_object_parquet, open_s3_parquet
from ._object_storage import OBJECTS_FORMAT, SHARDS_FORMAT, ObjectStorage
from ._object_url import OBJECT_STORE_SCHEMES, ObjectUrl, parse_object_url
from ._remote import RemoteStorage
from ._s3 import S3Storage
from ._s3_client import classify_object_store_error, classify_s3_error, open_s3_store, parse_s3_url
from .url_lists import HTTP_SCHEMES, expand_urls

__all__ = [
    "AzureStorage",
    "CassandraConnection",
    "CassandraStorage",
    "GCSStorage",
    "HTTPStorage",
    "HTTP_SCHEMES",
    "OBJECTS_FORMAT",
    "OBJECT_STORE_SCHEMES",
    "ObjectStorage",
    "ObjectUrl",
    "RemoteStorage",
    "S3Storage",
    "SHARDS_FORMAT",
    "await_response",
    "check_identifier",
    "classify_cassandra_error",
    "classify_object_store_error",
    "classify_s3_error",
    "expand_urls",
    "open_azure_store",
    "open_gcs_store",
    "open_http_store",
    "open_object_parquet",
    "open_s3_parquet",
    "open_s3_store",
    "parse_connection_string",
    "parse_object_url",
    "parse_s3_url",
    "read_metadata_table",
    "sample_id",
]
