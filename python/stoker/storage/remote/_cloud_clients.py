"""The clients behind `GCSStorage` and `AzureStorage`: obstore's ``GCSStore`` and ``AzureStore``
(Rust's ``object_store``, the client `S3Storage` measured fastest), with credentials the way
each ecosystem expects them, and emulators (fake-gcs-server, Azurite) by endpoint. (Web servers
have a client of stoker's own: `HTTPStorage`.)

Google Cloud Storage: a service account file (``service_account=`` or
``GOOGLE_APPLICATION_CREDENTIALS``), a service account key (JSON text), else the machine's
application default credentials; ``anonymous=True`` reads a public bucket unsigned.
``STORAGE_EMULATOR_HOST`` (the variable Google's own client libraries read) points at an
emulator, as ``endpoint=`` does.

Azure Blob Storage: an account and its key (``AZURE_STORAGE_ACCOUNT_NAME``,
``AZURE_STORAGE_ACCOUNT_KEY``), a SAS token, a connection string
(``AZURE_STORAGE_CONNECTION_STRING``, as the portal shows it; ``UseDevelopmentStorage=true``
means Azurite), else the environment's Azure identity; ``anonymous=True`` reads a public
container unsigned.

Credentials are handed to the client only: never logged, never part of a name or a message.

TLS: certificates verified always, against the system's roots (or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR``) and those of ``ca_bundle=``, else of the SDK's setting: for GCS
``CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE`` (gcloud's), then ``REQUESTS_CA_BUNDLE`` (Google's Python
clients, through requests); for Azure ``REQUESTS_CA_BUNDLE`` (the Azure SDK's and CLI's).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from ..._deprecation import warn_deprecated
from ...errors import ConfigurationError
from ._s3_client import trusted_ca

__all__ = [
    "AZURE_CA_VARIABLES",
    "AZURITE_ACCOUNT",
    "GCS_CA_VARIABLES",
    "open_azure_store",
    "open_gcs_store",
    "open_http_store",
    "parse_connection_string",
]

# Azurite's well-known development account (public, documented by Microsoft; not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"

GCS_CA_VARIABLES = ("CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "REQUESTS_CA_BUNDLE")
"""Where Google's tools read a CA bundle (gcloud's setting, then requests'), first set first."""
AZURE_CA_VARIABLES = ("REQUESTS_CA_BUNDLE",)
"""Where the Azure SDK and CLI read a CA bundle (requests')."""


def _client_options(endpoint: str | None, timeout: float, connect_timeout: float, ca: str | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {
        "timeout": timedelta(seconds=timeout),
        "connect_timeout": timedelta(seconds=connect_timeout),
        "allow_http": bool(endpoint and endpoint.startswith("http://")),
    }
    if ca is not None:  # added to the roots the client trusts (obstore's root_certificate)
        options["root_certificate"] = ca
    return options


def _no_retries(timeout: float) -> dict[str, Any]:
    # `RetryPolicy` retries every backend alike and names the object when it gives up.
    return {"max_retries": 0, "retry_timeout": timedelta(seconds=timeout)}


def _import_obstore_store(name: str, store_name: str, extra: str) -> Any:
    try:
        from obstore import store
    except ImportError as error:
        raise ImportError(f"{store_name} storage needs obstore: pip install 'stoker[{extra}]'") from error
    return getattr(store, name)


def open_gcs_store(
    bucket: str,
    *,
    service_account: str | os.PathLike[str] | None = None,
    service_account_key: str | None = None,
    anonymous: bool = False,
    endpoint: str | None = None,
    timeout: float = 30.0,
    connect_timeout: float = 5.0,
    ca_bundle: str | os.PathLike[str] | None = None,
) -> Any:
    """An obstore ``GCSStore`` for ``bucket``.

    Args:
        bucket: The bucket.
        service_account: A service account file (default: ``GOOGLE_APPLICATION_CREDENTIALS``).
        service_account_key: A service account key, as JSON text.
        anonymous: Send requests unsigned (public buckets, emulators).
        endpoint: Another server than Google's (an emulator); default ``STORAGE_EMULATOR_HOST``.
        timeout: Seconds per request.
        connect_timeout: Seconds to connect.
        ca_bundle: A PEM file of CA certificates trusted besides the system's (default:
            ``CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE``, then ``REQUESTS_CA_BUNDLE``).

    Raises:
        ImportError: obstore is not installed.
        ConfigurationError: Both a file and a key given; a CA bundle without certificates.
    """
    store_class = _import_obstore_store("GCSStore", "Google Cloud Storage", "gcs")
    if service_account is not None and service_account_key is not None:
        raise ConfigurationError("give service_account (a file) or service_account_key (its JSON), not both")
    config: dict[str, Any] = {}
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if endpoint is None and emulator:
        endpoint = emulator if "://" in emulator else f"http://{emulator}"
        anonymous = anonymous or (service_account is None and service_account_key is None)
    if endpoint:
        config["base_url"] = endpoint.rstrip("/")
    if service_account is not None:
        config["service_account"] = os.fspath(service_account)
    if service_account_key is not None:
        config["service_account_key"] = service_account_key
    if anonymous:
        config["skip_signature"] = True
    return store_class(
        bucket,
        config=config,
        client_options=_client_options(endpoint, timeout, connect_timeout, trusted_ca(ca_bundle, GCS_CA_VARIABLES)),
        retry_config=_no_retries(timeout),
    )


def parse_connection_string(text: str) -> dict[str, str]:
    """An Azure Storage connection string (``Key=value;...``) as a dict; values keep their ``=``.

    Raises:
        ConfigurationError: A part that is not ``Key=value`` (named by position, never by content).
    """
    parts: dict[str, str] = {}
    for number, part in enumerate(filter(None, (piece.strip() for piece in text.split(";"))), 1):
        key, equals, value = part.partition("=")
        if not equals or not key.strip():
            # By position only: the part may be a key cut loose from its name.
            raise ConfigurationError(f"part {number} of the Azure connection string is not Key=value")
        parts[key.strip()] = value.strip()
    return parts


def open_azure_store(
    container: str,
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
) -> Any:
    """An obstore ``AzureStore`` for ``container``.

    Args:
        container: The container.
        account: The storage account (default: ``AZURE_STORAGE_ACCOUNT_NAME``, or the
            connection string's).
        account_key: Its key (default: ``AZURE_STORAGE_ACCOUNT_KEY``).
        sas_token: A shared access signature, instead of the key.
        connection_string: All of it in one (default: ``AZURE_STORAGE_CONNECTION_STRING``).
        anonymous: Send requests unsigned (public containers).
        endpoint: The blob service's URL, for Azurite or a private endpoint
            (``http://127.0.0.1:10000/devstoreaccount1``).
        timeout: Seconds per request.
        connect_timeout: Seconds to connect.
        ca_bundle: A PEM file of CA certificates trusted besides the system's (default:
            ``REQUESTS_CA_BUNDLE``).

    Raises:
        ImportError: obstore is not installed.
        ConfigurationError: A malformed connection string; a CA bundle without certificates.
    """
    store_class = _import_obstore_store("AzureStore", "Azure Blob", "azure")
    connection_string = connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    config: dict[str, Any] = {}
    if connection_string:
        parts = parse_connection_string(connection_string)
        if parts.get("UseDevelopmentStorage", "").lower() == "true":  # Azurite at its default port
            config["use_emulator"] = True
            account = account or AZURITE_ACCOUNT
        account = account or parts.get("AccountName")
        account_key = account_key or parts.get("AccountKey")
        sas_token = sas_token or parts.get("SharedAccessSignature")
        endpoint = endpoint or parts.get("BlobEndpoint")
    if account:
        config["account_name"] = account
    if account_key:
        config["account_key"] = account_key
    if sas_token:
        config["sas_token"] = sas_token.lstrip("?")
    if endpoint:  # the account is in its path for Azurite (http://127.0.0.1:10000/devstoreaccount1)
        config["endpoint"] = endpoint.rstrip("/")
    if anonymous:
        config["skip_signature"] = True
    return store_class(
        container,
        config=config,
        client_options=_client_options(endpoint, timeout, connect_timeout, trusted_ca(ca_bundle, AZURE_CA_VARIABLES)),
        retry_config=_no_retries(timeout),
    )


def open_http_store(base: str, *, headers: dict[str, str] | None = None, timeout: float = 30.0, connect_timeout: float = 5.0) -> Any:
    """An obstore ``HTTPStore`` on ``base`` (``https://host/``). Deprecated: `HTTPStorage` reads
    web servers through stoker's own client now, since this one sizes a whole GET by the length
    the server declares, follows 10 redirects and carries every header but ``Authorization`` and
    ``Cookie`` to another host.

    Args:
        base: The server, ``scheme://host[:port]/``.
        headers: Sent with every request; never logged.
        timeout: Seconds per request.
        connect_timeout: Seconds to connect.

    Raises:
        ImportError: obstore is not installed.
    """
    warn_deprecated(
        "open_http_store (obstore's HTTPStore) is unsafe with an untrusted server; HTTPStorage reads web servers through "
        "stoker's own client (stoker._bounded.HttpClient)"
    )
    store_class = _import_obstore_store("HTTPStore", "HTTP", "s3")
    options = _client_options(base, timeout, connect_timeout)
    if headers:
        options["default_headers"] = dict(headers)
    return store_class.from_url(base, client_options=options, retry_config=_no_retries(timeout))
