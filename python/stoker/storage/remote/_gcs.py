"""Google Cloud Storage as `ObjectStorage`: ``gs://bucket/prefix``, every layout S3 has, priced
with Google's own request prices. Credentials and emulators: `open_gcs_store`."""

from __future__ import annotations

import os
from typing import Any

from ._cloud_clients import open_gcs_store
from ._object_client import ObstoreObjects
from ._object_storage import ObjectStorage
from ._object_url import parse_object_url

__all__ = ["GCSStorage"]


class GCSStorage(ObjectStorage):
    """Samples in a Google Cloud Storage bucket (every layout of `ObjectStorage`).

    Args:
        url: ``gs://bucket/prefix`` (also ``gcs://``).
        service_account: A service account file (default: ``GOOGLE_APPLICATION_CREDENTIALS``,
            else the machine's application default credentials).
        service_account_key: A service account key, as JSON text.
        anonymous: Read a public bucket unsigned.
        endpoint: Another server than Google's, such as an emulator (default:
            ``STORAGE_EMULATOR_HOST``).
        timeout: Seconds per request.
        connect_timeout: Seconds to connect.
        ca_bundle: A PEM file of CA certificates trusted besides the system's (default:
            ``CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE``, then
            ``REQUESTS_CA_BUNDLE``); certificates are verified whatever it is.
        options: `ObjectStorage`'s (payload, image_extensions, verify, cache_dir, cache_bytes,
            block_bytes, block_cache_bytes, max_in_flight, retry).

    Raises:
        ConfigurationError: Not a ``gs://`` URL.
        StorageError: Nothing there, access refused, or a manifest or index that cannot be read;
            the message names the object.
        StorageUnreachableError: The endpoint's name does not resolve, or its TLS certificate is
            not trusted (at once, naming the host and the reason).
    """

    price_table = "gcs-standard"

    def __init__(
        self,
        url: str,
        *,
        service_account: str | os.PathLike[str] | None = None,
        service_account_key: str | None = None,
        anonymous: bool = False,
        endpoint: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        ca_bundle: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> None:
        location = parse_object_url(url, "gs")
        settings: dict[str, Any] = {
            "service_account": service_account,
            "service_account_key": service_account_key,
            "anonymous": anonymous,
            "endpoint": endpoint,
            "timeout": timeout,
            "connect_timeout": connect_timeout,
            "ca_bundle": ca_bundle,
        }
        super().__init__(
            location, open_client=lambda: ObstoreObjects(open_gcs_store(location.bucket, **settings), location.name), **options
        )
