"""Azure Blob Storage as `ObjectStorage`: ``az://container/prefix`` (also ``azure://`` and
``abfs[s]://container@account.dfs.core.windows.net/prefix``), every layout S3 has, priced with
Azure's own request prices. Credentials and Azurite: `open_azure_store`."""

from __future__ import annotations

import os
from typing import Any

from ._cloud_clients import open_azure_store
from ._object_client import ObstoreObjects
from ._object_storage import ObjectStorage
from ._object_url import parse_object_url

__all__ = ["AzureStorage"]


class AzureStorage(ObjectStorage):
    """Samples in an Azure Blob Storage container (every layout of `ObjectStorage`).

    Args:
        url: ``az://container/prefix``, ``azure://container/prefix`` or
            ``abfs[s]://container@account.dfs.core.windows.net/prefix``.
        account: The storage account (default: the URL's, ``AZURE_STORAGE_ACCOUNT_NAME``, or the
            connection string's).
        account_key: Its key (default: ``AZURE_STORAGE_ACCOUNT_KEY``).
        sas_token: A shared access signature, instead of the key.
        connection_string: All of it in one (default: ``AZURE_STORAGE_CONNECTION_STRING``).
        anonymous: Read a public container unsigned.
        endpoint: The blob service's URL, for Azurite or a private endpoint.
        timeout: Seconds per request.
        connect_timeout: Seconds to connect.
        ca_bundle: A PEM file of CA certificates trusted besides the system's (default:
            ``REQUESTS_CA_BUNDLE``); certificates are verified whatever it is.
        options: `ObjectStorage`'s (payload, image_extensions, verify, cache_dir, cache_bytes,
            block_bytes, block_cache_bytes, max_in_flight, retry).

    Raises:
        ConfigurationError: Not an Azure URL, or a malformed connection string.
        StorageError: Nothing there, access refused, or a manifest or index that cannot be read;
            the message names the object.
        StorageUnreachableError: The endpoint's name does not resolve, or its TLS certificate is
            not trusted (at once, naming the host and the reason).
    """

    price_table = "azure-blob-hot"

    def __init__(
        self,
        url: str,
        *,
        account: str | None = None,
        account_key: str | None = None,
        sas_token: str | None = None,
        connection_string: str | None = None,
        anonymous: bool = False,
        endpoint: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        ca_bundle: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> None:
        location = parse_object_url(url, "az")
        settings: dict[str, Any] = {
            "account": account or location.account,
            "account_key": account_key,
            "sas_token": sas_token,
            "connection_string": connection_string,
            "anonymous": anonymous,
            "endpoint": endpoint,
            "timeout": timeout,
            "connect_timeout": connect_timeout,
            "ca_bundle": ca_bundle,
        }
        super().__init__(
            location, open_client=lambda: ObstoreObjects(open_azure_store(location.bucket, **settings), location.name), **options
        )
