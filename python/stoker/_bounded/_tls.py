"""TLS as users have it: the certificates a server may be trusted by, and a failure to trust it
named in one line.

Certificates are verified always; nothing here turns that off. Three ways to trust a private CA
(a corporate proxy's, an on-premise MinIO's, Ceph's, VAST's), the same for every store:

- ``SSL_CERT_FILE`` (a PEM bundle) and ``SSL_CERT_DIR`` (a folder of hashed certificates, as
  ``openssl rehash`` names them): the trusted roots in place of the system's, as OpenSSL reads
  them (web servers: Python's ``ssl``) and as rustls-native-certs does (object stores: obstore);
- a store's SDK setting where it has one (`ca_from_environment`: ``AWS_CA_BUNDLE`` for S3...);
- ``ca_bundle=`` on the storage: the certificates of one PEM file added to the trusted roots,
  for that store alone.

A certificate that is not trusted, a handshake that fails and a host name that does not resolve
are not outages: waiting does not change them, so they are raised at once as
`StorageUnreachableError`, naming the host and the cause (`certificate_failure`,
`handshake_failure`, `name_failure`), never retried to the deadline.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from ..errors import ConfigurationError, StorageError, StorageUnreachableError
from ._files import read_regular
from ._shown_text import shown

if TYPE_CHECKING:
    import ssl

__all__ = [
    "CA_BUNDLE_HINT",
    "ca_certificates",
    "ca_from_environment",
    "certificate_failure",
    "handshake_failure",
    "handshake_refused",
    "name_does_not_resolve",
    "name_failure",
    "openssl_certificate_failure",
    "rustls_certificate_failure",
    "ssl_context",
]

_CA_BUNDLE_LIMIT = 16 << 20  # a CA bundle: the system's is about 200 KB
_PEM_BEGIN = "-----BEGIN CERTIFICATE-----"

CA_BUNDLE_HINT = "trust the CA that signed it with ca_bundle= (or SSL_CERT_FILE); docs/storage.md, 'TLS and private CAs'"
"""What a person does about a certificate signed by a CA this machine does not trust."""

# OpenSSL's verification results (ssl.SSLCertVerificationError.verify_code) of a certificate
# signed by a CA not trusted here: the ones ``ca_bundle=`` mends.
_UNTRUSTED_ISSUER_CODES = frozenset({2, 18, 19, 20, 21})
# rustls's (obstore's) words for the same.
_UNTRUSTED_ISSUER_WORDS = frozenset({"UnknownIssuer"})
_RUSTLS_WORDS = {
    "UnknownIssuer": "no CA this machine trusts signed it",
    "Expired": "it has expired",
    "ExpiredContext": "it has expired",
    "NotValidYet": "it is not valid yet",
    "NotValidYetContext": "it is not valid yet",
    "NotValidForName": "it is not valid for this host name",
    "NotValidForNameContext": "it is not valid for this host name",
    "Revoked": "it was revoked",
    "BadSignature": "its signature does not verify",
    "BadEncoding": "it does not parse",
    "InvalidPurpose": "it is not for a server",
    "InvalidPurposeContext": "it is not for a server",
    "UnhandledCriticalExtension": "it has a critical extension that is not understood",
}

# getaddrinfo's answers that say the name does not exist (waiting does not change them); a
# resolver that cannot be reached now (EAI_AGAIN) is an outage, retried.
_NO_SUCH_NAME = frozenset(code for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None)) if code is not None)
_NO_SUCH_NAME_WORDS = ("Name or service not known", "No address associated with hostname", "nodename nor servname provided")


def ca_certificates(path: str | os.PathLike[str], *, setting: str = "ca_bundle") -> str:
    """The PEM certificates of the file at ``path`` (``ca_bundle=``, ``AWS_CA_BUNDLE``...),
    checked to hold at least one certificate OpenSSL reads.

    Args:
        path: A PEM file of one or more certificates.
        setting: Where the path came from, for the error (``"ca_bundle"``, ``"AWS_CA_BUNDLE"``).

    Raises:
        ConfigurationError: Nothing there, not a regular file, over 16 MiB, or no certificate in
            it; names ``setting`` and the path.
    """
    import ssl

    where = f"{setting}={os.fspath(path)!r}"
    try:
        text = read_regular(path, limit=_CA_BUNDLE_LIMIT, what="a CA bundle").decode("ascii")
    except FileNotFoundError:
        raise ConfigurationError(f"{where}: no such file (a PEM file of the CA certificates to trust)") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"{where}: not a PEM file (binary; a DER certificate converts with openssl x509 -inform der)") from None
    except (StorageError, OSError) as error:
        raise ConfigurationError(f"{where}: {error}") from None
    if _PEM_BEGIN not in text:
        raise ConfigurationError(f"{where}: no certificate in it (a PEM file holds '{_PEM_BEGIN}' blocks)")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=text)
    except (ssl.SSLError, ValueError) as error:
        raise ConfigurationError(f"{where}: a certificate in it does not read ({shown(str(error), 100)})") from None
    return text


def ca_from_environment(names: tuple[str, ...]) -> str | None:
    """The certificates of the first of the environment variables ``names`` that is set (a
    store's SDK setting: ``AWS_CA_BUNDLE``...), or None.

    Raises:
        ConfigurationError: The file it names does not hold certificates (`ca_certificates`).
    """
    for name in names:
        path = os.environ.get(name)
        if path:
            return ca_certificates(path, setting=name)
    return None


def ssl_context(ca: str | None = None) -> ssl.SSLContext:
    """A client context that verifies the server's certificate and host name: the trusted roots
    of the system (or of ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, read now), and ``ca`` (PEM text)
    added to them."""
    import ssl

    context = ssl.create_default_context()
    if ca is not None:
        context.load_verify_locations(cadata=ca)
    return context


def certificate_failure(name: str, host: str, reason: str, *, untrusted_issuer: bool) -> StorageUnreachableError:
    """The error for a server certificate that does not verify.

    Args:
        name: What was read (a URL shown, an object's name).
        host: ``host:port``.
        reason: Why, in words (the TLS library's).
        untrusted_issuer: Whether a CA this machine does not trust signed it (``ca_bundle=`` is
            then the remedy; an expired certificate or another host's is the server's to fix).
    """
    host = shown(host, 200)  # from the TLS library's text: outside input
    cause = f"the TLS certificate of {host} is not trusted ({shown(reason, 120)})"
    hint = CA_BUNDLE_HINT if untrusted_issuer else "the server's certificate needs fixing; stoker always verifies it"
    return StorageUnreachableError(f"{name}: {cause}; {hint}", store=host, cause=cause)


def openssl_certificate_failure(name: str, host: str, error: BaseException) -> StorageUnreachableError:
    """`certificate_failure` for Python's ``ssl.SSLCertVerificationError``."""
    code = getattr(error, "verify_code", None)
    reason = getattr(error, "verify_message", None) or str(error)
    return certificate_failure(name, host, reason, untrusted_issuer=code in _UNTRUSTED_ISSUER_CODES)


def rustls_certificate_failure(name: str, host: str, word: str) -> StorageUnreachableError:
    """`certificate_failure` for rustls's ``InvalidCertificate(word)`` (obstore)."""
    reason = f"{word}: {_RUSTLS_WORDS[word]}" if word in _RUSTLS_WORDS else word
    return certificate_failure(name, host, reason, untrusted_issuer=word in _UNTRUSTED_ISSUER_WORDS)


def handshake_failure(name: str, host: str, reason: str) -> StorageUnreachableError:
    """The error for a TLS handshake that fails for another reason than the certificate (a
    plain-HTTP server on the port, no protocol or cipher in common)."""
    said, host = shown(reason, 120), shown(host, 200)
    if "WRONG_VERSION_NUMBER" in reason or "InvalidContentType" in reason or "corrupt message" in reason:
        said += ": is it a plain http:// server?"
    cause = f"the TLS handshake with {host} failed ({said})"
    return StorageUnreachableError(f"{name}: {cause}", store=host, cause=cause)


def handshake_refused(error: BaseException | None) -> bool:
    """Whether a failed TLS handshake (Python's ``ssl.SSLError``) is a refusal that waiting does
    not change (no protocol in common, a plain-HTTP server, an alert from the server), not a
    connection cut short during it (an EOF or a reset: retried as an outage)."""
    import ssl

    if not isinstance(error, ssl.SSLError) or isinstance(error, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)):
        return False
    return "EOF" not in (error.reason or str(error))


def name_does_not_resolve(error: BaseException | str) -> bool:
    """Whether a failed name lookup says the name does not exist (not that the resolver is out
    of reach: that is retried)."""
    if isinstance(error, BaseException):
        if getattr(error, "errno", None) in _NO_SUCH_NAME:
            return True
        error = str(error)
    return any(words in error for words in _NO_SUCH_NAME_WORDS)


def name_failure(name: str, host: str, reason: str) -> StorageUnreachableError:
    """The error for a host name that does not resolve."""
    host = shown(host, 200)
    cause = f"the host name {host} does not resolve ({shown(reason, 100)})"
    return StorageUnreachableError(f"{name}: {cause}; check the URL (or the endpoint)", store=host, cause=cause)
