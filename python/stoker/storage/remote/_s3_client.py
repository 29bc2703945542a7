"""The S3 client behind `S3Storage` and the uploads: obstore's ``S3Store`` with credentials from
arguments, environment or profile, and the CA it trusts besides the system's (``ca_bundle=``,
else ``AWS_CA_BUNDLE``, as the AWS SDKs read it); and, for every obstore store (S3, GCS, Azure),
what its errors mean (`object_store_failure`, `classify_object_store_error`)."""

from __future__ import annotations

import http
import os
import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from ..._bounded import (
    HttpStatusError,
    ca_certificates,
    ca_from_environment,
    handshake_failure,
    name_does_not_resolve,
    name_failure,
    rustls_certificate_failure,
    status_error_of,
)
from ...errors import StorageError
from ..policies import ErrorKind
from ._object_url import parse_object_url

__all__ = [
    "classify_object_store_error",
    "classify_s3_error",
    "object_store_failure",
    "open_s3_store",
    "parse_s3_url",
    "trusted_ca",
]


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
    ca_bundle: str | os.PathLike[str] | None = None,
) -> Any:
    """An obstore ``S3Store`` for ``bucket``: explicit settings, else environment, else profile.
    Its certificates are verified against the system's roots (or ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``) and those of ``ca_bundle`` (default: ``AWS_CA_BUNDLE``).

    Raises:
        ImportError: obstore is not installed (the message says how to get it).
        ConfigurationError: ``ca_bundle`` (or ``AWS_CA_BUNDLE``) holds no certificate.
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
    ca = trusted_ca(ca_bundle, ("AWS_CA_BUNDLE",))
    if ca is not None:
        client_options["root_certificate"] = ca
    return S3Store(
        bucket,
        config=config,  # type: ignore[arg-type]
        client_options=client_options,  # type: ignore[arg-type]
        retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=timeout)},
        credential_provider=credential_provider,
    )


def trusted_ca(ca_bundle: str | os.PathLike[str] | None, environment: tuple[str, ...]) -> str | None:
    """The PEM certificates an obstore store trusts besides the system's: ``ca_bundle``'s, else
    those of the first of the SDK's ``environment`` variables that is set, else None.

    Raises:
        ConfigurationError: The file holds no certificate (named, with where it came from).
    """
    if ca_bundle is not None:
        return ca_certificates(ca_bundle)
    return ca_from_environment(environment)


# What obstore (Rust's object_store over reqwest and rustls) says of a failed request: the
# request's URL on the first line, then a debug dump of the causes, read here for the one that
# names the failure (a message shows none of the dump).
_PERFORMING = re.compile(r"Error performing [A-Z]+ (\S+)")
_STATUS = re.compile(r"non-2xx status code: (\d{3})")
_CERTIFICATE = re.compile(r"InvalidCertificate\(\s*(\w+)")
_HANDSHAKE = re.compile(r"\b(InvalidMessage|AlertReceived|PeerIncompatible|PeerMisbehaved|NoCertificatesPresented)\b(?:\(\s*(\w+))?")
_LOOKUP = re.compile(r"failed to lookup address information: ([^\"\n]{0,200})")
_ERROR_CODE = re.compile(r"<Code>(\w{1,64})</Code>")
# Error codes a store answers with a 4xx that are worth another try all the same: S3's
# RequestTimeout (400: the connection went quiet), and the throttling of each store.
_TRANSIENT_CODES = frozenset({"RequestTimeout", "SlowDown", "TooManyRequests", "ServerBusy", "OperationTimedOut"})


def object_store_failure(error: BaseException, name: str) -> BaseException:
    """An obstore error as stoker names it where waiting does not change it, in one line: a
    certificate not trusted, a TLS handshake refused or a host name that does not resolve
    (`StorageUnreachableError`, naming the host), and a 4xx other than 404, 401, 403, 408, 429
    and a store's throttling codes (`HttpStatusError` naming ``name``, the status and the
    store's error code). Any other error is given back as it is (obstore's own types for a
    missing object and refused credentials; an outage, retried).

    Args:
        error: What obstore raised.
        name: What was read (``s3://bucket/key``).
    """
    text = str(error)
    performing = _PERFORMING.search(text)
    if performing is None:  # not a request that failed (a configuration, a path)
        return error
    try:
        parts = urlsplit(performing[1])
        hostname = parts.hostname or "?"
        host = f"{hostname}:{parts.port}" if parts.port else hostname
    except ValueError:
        hostname = host = "?"
    certificate = _CERTIFICATE.search(text)
    if certificate is not None:
        return rustls_certificate_failure(name, host, certificate[1])
    handshake = _HANDSHAKE.search(text)
    if handshake is not None:
        return handshake_failure(name, host, handshake[1] + (f"({handshake[2]})" if handshake[2] else ""))
    lookup = _LOOKUP.search(text)
    if lookup is not None and "dns error" in text and name_does_not_resolve(lookup[1]):
        return name_failure(name, hostname, lookup[1].strip())
    status = _STATUS.search(text)
    if status is not None:
        number = int(status[1])
        code = _ERROR_CODE.search(text)
        if 400 <= number < 500 and number not in (401, 403, 404, 408, 429) and (code is None or code[1] not in _TRANSIENT_CODES):
            try:
                words = http.HTTPStatus(number).phrase
            except ValueError:
                words = "an unknown status"
            return status_error_of(name, number, f"{words}: {code[1]}" if code is not None else words)
    return error


def classify_object_store_error(error: BaseException) -> ErrorKind:
    """Any obstore store's errors (S3, GCS, Azure): missing objects and refused credentials are
    final, and so is what waiting does not change (`object_store_failure`: TLS, a name that does
    not resolve, another 4xx); throttling (S3's 503 SlowDown, GCS's 429, Azure's 503 ServerBusy)
    is the server asking us to slow down; other server and network errors are worth a retry."""
    from obstore import exceptions

    if isinstance(error, HttpStatusError):  # one `object_store_failure` named
        return error.kind if error.kind in ("overload", "retry") else "fatal"
    if isinstance(error, StorageError) or object_store_failure(error, "") is not error:
        return "fatal"
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
