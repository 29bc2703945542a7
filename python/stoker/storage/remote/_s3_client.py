"""The S3 client behind `S3Storage` and the uploads: obstore's ``S3Store`` with credentials from
arguments, environment or profile, and which of its errors are worth a retry."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from ..policies import ErrorKind
from ._object_url import parse_object_url

__all__ = ["classify_object_store_error", "classify_s3_error", "open_s3_store", "parse_s3_url"]


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> ``("bucket", "some/prefix")`` (`parse_object_url` for S3).

    Raises:
        ConfigurationError: Not an ``s3://`` URL with a bucket.
    """
    location = parse_object_url(url, "s3")
    return location.bucket, location.prefix


def open_s3_store(
    bucket: str,
    *,
    endpoint: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    profile: str | None = None,
    timeout: float = 30.0,
    connect_timeout: float = 5.0,
) -> Any:
    """An obstore ``S3Store`` for ``bucket``: explicit settings, else environment, else profile.

    Raises:
        ImportError: obstore is not installed (the message says how to get it).
    """
    try:
        from obstore.store import S3Store
    except ImportError as error:
        raise ImportError("S3 storage needs obstore: pip install 'stoker[s3]'") from error

    config: dict[str, Any] = {}
    endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        config["endpoint"] = endpoint
    config["region"] = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    if access_key_id is not None or secret_access_key is not None:
        config["access_key_id"] = access_key_id or ""
        config["secret_access_key"] = secret_access_key or ""
        if session_token:
            config["session_token"] = session_token
    credential_provider = None
    profile = profile or (None if "AWS_ACCESS_KEY_ID" in os.environ or "access_key_id" in config else os.environ.get("AWS_PROFILE"))
    if profile and "access_key_id" not in config:
        try:
            import boto3
        except ImportError as error:
            raise ImportError(f"credentials from the AWS profile {profile!r} need boto3: pip install 'stoker[aws-profiles]'") from error
        from obstore.auth.boto3 import Boto3CredentialProvider

        credential_provider = Boto3CredentialProvider(boto3.Session(profile_name=profile))
    client_options: dict[str, Any] = {
        "timeout": timedelta(seconds=timeout),
        "connect_timeout": timedelta(seconds=connect_timeout),
        "allow_http": bool(endpoint and endpoint.startswith("http://")),
    }
    return S3Store(
        bucket,
        config=config,  # type: ignore[arg-type]
        client_options=client_options,  # type: ignore[arg-type]
        retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=timeout)},
        credential_provider=credential_provider,
    )


def classify_object_store_error(error: BaseException) -> ErrorKind:
    """Any obstore store's errors (S3, GCS, Azure): missing objects and refused credentials are
    final; throttling (S3's 503 SlowDown, GCS's 429, Azure's 503 ServerBusy) is the server asking
    us to slow down; other server and network errors are worth a retry."""
    from obstore import exceptions

    if isinstance(
        error,
        (
            FileNotFoundError,
            exceptions.NotFoundError,
            exceptions.PermissionDeniedError,
            exceptions.UnauthenticatedError,
            exceptions.InvalidPathError,
            exceptions.UnknownConfigurationKeyError,
            KeyError,
            ValueError,
        ),
    ):
        return "fatal"
    text = str(error)
    # The status in words: a bare "429" also turns up in ports and timings ("in 14.29ms").
    if "SlowDown" in text or "TooManyRequests" in text or "Too Many Requests" in text or "ServerBusy" in text:
        return "overload"
    if "403" in text and "Forbidden" in text:
        return "fatal"
    return "retry"


classify_s3_error = classify_object_store_error  # the name it had when S3 was the only object store
