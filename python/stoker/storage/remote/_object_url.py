"""Where an object store's data is: the URL forms of S3, Google Cloud Storage and Azure Blob
Storage, read into one shape (`ObjectUrl`) that names every object the same way in messages,
ledgers and caches."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from ...errors import ConfigurationError

__all__ = ["OBJECT_STORE_SCHEMES", "ObjectUrl", "parse_object_url"]

# URL scheme -> the store's short name. Azure has several spellings in its own tools: ``az://``
# (fsspec/adlfs, obstore), ``azure://`` (object_store), ``abfs[s]://`` (Hadoop, Spark, Databricks).
OBJECT_STORE_SCHEMES = {"s3": "s3", "gs": "gs", "gcs": "gs", "az": "az", "azure": "az", "abfs": "az", "abfss": "az"}


@dataclass(frozen=True)
class ObjectUrl:
    """An object store location.

    Attributes:
        store: ``"s3"``, ``"gs"`` or ``"az"``.
        bucket: The bucket (S3, GCS) or container (Azure).
        prefix: The key prefix, without slashes at either end ("" for the whole bucket).
        account: Azure's storage account where the URL names it (``abfs://container@account...``).
    """

    store: str
    bucket: str
    prefix: str
    account: str | None = None

    @property
    def url(self) -> str:
        """The canonical form, ``s3://bucket/prefix``, ``gs://...`` or ``az://container/prefix``."""
        return f"{self.store}://{self.bucket}/{self.prefix}" if self.prefix else f"{self.store}://{self.bucket}"

    def key(self, name: str) -> str:
        """The full object key of ``name`` under the prefix."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def name(self, key: str) -> str:
        """How an object is named to the user: ``gs://bucket/key`` (never credentials)."""
        return f"{self.store}://{self.bucket}/{key}"


def parse_object_url(url: str, store: str | None = None) -> ObjectUrl:
    """Read an object store URL.

    Args:
        url: ``s3://bucket/prefix``, ``gs://bucket/prefix`` (also ``gcs://``),
            ``az://container/prefix`` (also ``azure://``), or
            ``abfs[s]://container@account.dfs.core.windows.net/prefix``.
        store: The store it must be (``"s3"``, ``"gs"``, ``"az"``), where the caller knows.

    Raises:
        ConfigurationError: Not such a URL, no bucket, or another store than ``store``.
    """
    parsed = urlparse(url)
    kind = OBJECT_STORE_SCHEMES.get(parsed.scheme.lower())
    article = "an" if store in ("s3", "az") else "a"  # said as letters: "an s3://", "an az://"
    expected = f"{article} {store}:// URL" if store else "an s3://, gs:// or az:// URL"
    if kind is None or not parsed.netloc or (store is not None and kind != store):
        raise ConfigurationError(f"not {expected} with a bucket (s3://bucket/prefix, gs://bucket/prefix, az://container/prefix): {url!r}")
    bucket, account = parsed.netloc, None
    if "@" in bucket:  # abfs://container@account.dfs.core.windows.net
        if kind != "az":
            raise ConfigurationError(f"{url!r}: only Azure URLs name an account with '@'")
        bucket, host = bucket.split("@", 1)
        account = host.split(".", 1)[0] or None
    if not bucket:
        raise ConfigurationError(f"not {expected} with a bucket: {url!r}")
    return ObjectUrl(kind, bucket, parsed.path.strip("/"), account)
