"""S3 and S3-compatible stores (AWS S3, MinIO, Ceph, s3proxy, R2...) as `ObjectStorage`.

Credentials: the arguments, else the ``AWS_*`` environment variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``), else a
profile of the AWS config files (``profile=`` or ``AWS_PROFILE``, through boto3). They are never
logged or shown: `describe` names the bucket and prefix only. TLS: certificates verified always,
against the system's roots (or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``) and those of ``ca_bundle=``,
else of ``AWS_CA_BUNDLE`` (as the AWS SDKs and CLI read it): an on-premise store (MinIO, Ceph,
VAST) behind a private CA.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..local import SHARD_IMAGE_EXTENSIONS
from ..policies import RetryPolicy
from ._object_client import ObstoreObjects
from ._object_storage import OBJECTS_FORMAT, ObjectStorage
from ._object_url import parse_object_url
from ._s3_client import open_s3_store

__all__ = ["OBJECTS_FORMAT", "S3Storage"]


class S3Storage(ObjectStorage):
    """Samples in an S3-compatible bucket (every layout of `ObjectStorage`).

    Args:
        url: ``s3://bucket/prefix``.
        endpoint: The store's URL, for S3-compatible stores other than AWS.
        region: The region.
        access_key_id: Credentials, where the environment's are not to be used (see the module
            notes for the fallbacks; never logged).
        secret_access_key: Its secret.
        session_token: A temporary session's token.
        profile: An AWS config profile to take them from (``stoker[aws-profiles]``).
        timeout: Seconds per request.
        connect_timeout: Seconds to connect.
        ca_bundle: A PEM file of CA certificates trusted besides the system's (default:
            ``AWS_CA_BUNDLE``); certificates are verified whatever it is.
        options: `ObjectStorage`'s (payload, image_extensions, verify, cache_dir, cache_bytes,
            block_bytes, block_cache_bytes, max_in_flight, retry).

    Raises:
        ConfigurationError: Not an ``s3://`` URL, or a CA bundle without certificates.
        StorageUnreachableError: The endpoint's name does not resolve, or its TLS certificate is
            not trusted (at once, naming the host and the reason).
        StorageError: Nothing there, access refused, or a manifest or index that cannot be read;
            the message names the object.
    """

    price_table = "aws-s3-standard"

    def __init__(
        self,
        url: str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        profile: str | None = None,
        payload: str | None = None,
        label: str | None = None,
        image_extensions: Sequence[str] = SHARD_IMAGE_EXTENSIONS,
        verify: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_bytes: int = 10 << 30,
        block_bytes: int = 8 << 20,
        block_cache_bytes: int = 1 << 30,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        ca_bundle: str | os.PathLike[str] | None = None,
        max_in_flight: int = 256,
        retry: RetryPolicy | None = None,
    ) -> None:
        location = parse_object_url(url, "s3")
        settings: dict[str, Any] = {
            "endpoint": endpoint,
            "region": region,
            "access_key_id": access_key_id,
            "secret_access_key": secret_access_key,
            "session_token": session_token,
            "profile": profile,
            "timeout": timeout,
            "connect_timeout": connect_timeout,
            "ca_bundle": ca_bundle,
        }
        super().__init__(
            location,
            open_client=lambda: ObstoreObjects(open_s3_store(location.bucket, **settings), location.name),
            payload=payload,
            label=label,
            image_extensions=image_extensions,
            verify=verify,
            cache_dir=cache_dir,
            cache_bytes=cache_bytes,
            block_bytes=block_bytes,
            block_cache_bytes=block_cache_bytes,
            max_in_flight=max_in_flight,
            retry=retry,
        )
