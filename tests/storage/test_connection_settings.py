"""Settings of network stores, without a server: URLs, credentials from the environment and
never shown, TLS contexts, identifiers that go into CQL text, S3 URLs."""

from __future__ import annotations

import ssl

import pytest

from stoker.storage import CassandraConnection
from stoker.storage.remote import parse_s3_url


def test_a_cassandra_url_names_hosts_port_keyspace_and_tables() -> None:
    connection = CassandraConnection.from_url("cassandra://10.0.0.1,10.0.0.2:9142/imagenet?data=blobs&metadata=rows&tls=1")
    assert connection.hosts == ["10.0.0.1", "10.0.0.2"]
    assert (connection.port, connection.keyspace) == (9142, "imagenet")
    assert (connection.data_table, connection.metadata_table) == ("blobs", "rows")
    assert connection.tls


def test_credentials_come_from_the_environment_and_are_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOKER_CASSANDRA_USERNAME", "trainer")
    monkeypatch.setenv("STOKER_CASSANDRA_PASSWORD", "s3cret-value")
    connection = CassandraConnection.from_url("cassandra://db:9042/ds")
    assert (connection.username, connection.password) == ("trainer", "s3cret-value")
    assert "s3cret-value" not in repr(connection) and "s3cret-value" not in connection.describe()


def test_a_password_in_the_url_is_refused() -> None:
    with pytest.raises(ValueError, match="STOKER_CASSANDRA_PASSWORD"):
        CassandraConnection.from_url("cassandra://user:pw@db/ds")


def test_names_that_would_go_into_cql_must_be_plain_identifiers() -> None:
    with pytest.raises(ValueError, match="not a plain CQL identifier"):
        CassandraConnection(keyspace="ds; DROP KEYSPACE x")


def test_tls_verifies_the_server_by_default() -> None:
    context = CassandraConnection(tls=True).ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert CassandraConnection().ssl_context() is None


def test_s3_urls() -> None:
    assert parse_s3_url("s3://bucket/a/b/") == ("bucket", "a/b")
    assert parse_s3_url("s3://bucket") == ("bucket", "")
    with pytest.raises(ValueError, match="not an s3://"):
        parse_s3_url("https://bucket/a")
