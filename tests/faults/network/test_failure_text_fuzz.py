"""Fuzz targets for the outside input the failure classification reads: a CA bundle named by
``ca_bundle=`` or an SDK's variable (any bytes in the file), and the text of an object store's
error (obstore's message, which carries what the server and the resolver said). Each ends in
certificates or a `ConfigurationError` naming the setting and the file, or in one line of at most
a bounded length that names the host: never another exception, a traceback's worth of text, or a
control character a terminal would act on."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stoker._bounded import ca_certificates
from stoker.errors import ConfigurationError, StorageError

from ..test_fuzz import EXAMPLES, FRESH

pytest.importorskip("obstore")

_PEM = "-----BEGIN CERTIFICATE-----"

# Pieces of what obstore says, and what may be around them: a debug dump over many lines, a
# server's XML, a resolver's words, bytes no one sends.
_FRAGMENTS = st.sampled_from(
    [
        "Error performing GET ",
        "Error performing HEAD ",
        "https://",
        "http://",
        "127.0.0.1:9000/bucket/key",
        "[::1]:8443/a",
        "host.invalid",
        " in 1.2ms - ",
        "Server returned non-2xx status code: ",
        "400 Bad Request",
        "429",
        "451",
        "<Code>",
        "</Code>",
        "SlowDown",
        "InvalidCertificate(",
        "UnknownIssuer",
        "NotValidForName",
        "AlertReceived(",
        "HandshakeFailure",
        ")",
        "dns error: ",
        "failed to lookup address information: ",
        "Name or service not known",
        "\n",
        "\r\n\x1b[2J",
        "\x00",
        " ",
        "Debug source: ",
    ]
)
_ERROR_TEXT = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=40)), max_size=30).map("".join)


def _one_line_named(message: str, name: str) -> None:
    assert message.startswith(name + ": "), message
    assert "\n" not in message and "\r" not in message and "\x1b" not in message and "\x00" not in message, repr(message)
    assert len(message) < len(name) + 1_000, len(message)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not FRESH, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=2_048), st.binary(max_size=1_024).map(lambda body: _PEM.encode() + b"\n" + body)))
def test_any_ca_bundle_file_is_read_or_refused_by_name(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ca.pem"
        path.write_bytes(data)
        try:
            text = ca_certificates(path, setting="AWS_CA_BUNDLE")
        except ConfigurationError as error:
            message = str(error)
            assert message.startswith(f"AWS_CA_BUNDLE={str(path)!r}: "), message
            assert "\n" not in message and "\x1b" not in message, repr(message)
        else:
            assert _PEM in text


@settings(max_examples=EXAMPLES * 4, deadline=None, derandomize=not FRESH, database=None)
@given(text=_ERROR_TEXT)
# Each way a text is named, with what a hostile server or resolver could put in it.
@example(text="Error performing GET https://h\x1bost:1/k in 1ms - InvalidCertificate(\n UnknownIssuer)")
@example(text="Error performing GET https://h\x00ost/k - AlertReceived(\n HandshakeFailure\x1b[2J)")
@example(text="Error performing GET http://a.invalid/k dns error: failed to lookup address information: Name or service not known\x1b[2J\r")
@example(text="Error performing GET http://a/k Server returned non-2xx status code: 451 <Code>Evil\x1b</Code> <Code>Blocked</Code>")
def test_any_object_store_error_text_is_named_in_one_line_or_left_as_it_is(text: str) -> None:
    from obstore.exceptions import GenericError

    from stoker.storage.remote._s3_client import classify_object_store_error, object_store_failure

    error = GenericError(text)
    name = "s3://bucket/data/key"
    named = object_store_failure(error, name)
    if named is not error:
        assert isinstance(named, StorageError) or isinstance(named, OSError), type(named)
        _one_line_named(str(named), name)
    assert classify_object_store_error(error) in ("retry", "overload", "fatal")
