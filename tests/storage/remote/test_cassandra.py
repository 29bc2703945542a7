"""CassandraStorage against a real Cassandra 5.0: ingestion with metadata and resume, reads,
login and schema errors, retries across killed connections and a restart."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from stoker.ingest import upload_to_cassandra
from stoker.storage import CassandraConnection, CassandraStorage, RetryPolicy, StorageError
from stoker_testbed import LatencyProxy
from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.cassandra_server import CassandraServer


def test_upload_then_read_every_sample_with_its_label_and_metadata(keyspace_connection: CassandraConnection) -> None:
    source = dataset(90)
    metadata = {key: {"patient": f"p{index // 4}", "site": "a" if index % 2 else "b"} for index, key in enumerate(source.keys)}
    report = upload_to_cassandra(source, keyspace_connection, metadata=metadata, progress=False, decode_check=False)
    assert report.samples == 90
    with CassandraStorage(keyspace_connection) as storage:
        assert sorted(storage.keys) == sorted(source.keys)
        assert dict(zip(storage.keys, storage.labels)) == dict(zip(source.keys, source.labels))
        assert storage.read_many(storage.keys) == source.read_many(storage.keys)
        session = storage._session
        row = session.execute(f"SELECT patient, site FROM {keyspace_connection.keyspace}.metadata WHERE id = %s", (storage._ids[0],)).one()
        assert storage.keys[0] in source.keys
        assert (row.patient, row.site) == (metadata[storage.keys[0]]["patient"], metadata[storage.keys[0]]["site"])


def test_upload_resumes_and_skips_what_is_committed(keyspace_connection: CassandraConnection) -> None:
    source = dataset(40)
    upload_to_cassandra(source, keyspace_connection, progress=False, decode_check=False)
    again = upload_to_cassandra(source, keyspace_connection, progress=False, decode_check=False)
    assert again.bytes == 0  # every sample had its metadata row: nothing written twice


def test_a_subset_of_keys_reads_only_those(keyspace_connection: CassandraConnection) -> None:
    source = dataset(30)
    upload_to_cassandra(source, keyspace_connection, progress=False, decode_check=False)
    chosen = list(source.keys[5:12])
    with CassandraStorage(keyspace_connection, keys=chosen) as storage:
        assert list(storage.keys) == chosen
        assert storage.read_many(chosen) == source.read_many(chosen)
    with pytest.raises(StorageError, match="no metadata row"):
        CassandraStorage(keyspace_connection, keys=["class_0/missing.jpg"])


def test_bad_credentials_give_a_clear_error(keyspace_connection: CassandraConnection) -> None:
    wrong = replace(keyspace_connection, password="not-the-password")
    with pytest.raises(StorageError, match="login refused for user 'cassandra'"):
        CassandraStorage(wrong)


def test_a_keyspace_without_a_dataset_says_so(keyspace_connection: CassandraConnection) -> None:
    with pytest.raises(StorageError, match="not a stoker dataset"):
        CassandraStorage(replace(keyspace_connection, keyspace="no_such_keyspace"))


def test_a_missing_data_row_is_named(keyspace_connection: CassandraConnection) -> None:
    source = dataset(10)
    upload_to_cassandra(source, keyspace_connection, progress=False, decode_check=False)
    with CassandraStorage(keyspace_connection) as storage:
        victim = storage.keys[2]
        storage._session.execute(f"DELETE FROM {keyspace_connection.keyspace}.data WHERE id = %s", (storage._ids[2],))
        with pytest.raises(StorageError, match=f"{victim}.*no data row"):
            storage.read(victim)
        got = storage.read_many(storage.keys, on_error="skip")
        assert got[2] is None and sum(data is not None for data in got) == 9


def test_reads_survive_killed_connections(cassandra_server: CassandraServer, keyspace_connection: CassandraConnection) -> None:
    source = dataset(150)
    upload_to_cassandra(source, keyspace_connection, progress=False, decode_check=False)
    with LatencyProxy(cassandra_server.host, cassandra_server.port, delay=0.05) as proxy:
        through_proxy = replace(keyspace_connection, hosts=[proxy.address[0]], port=proxy.address[1], request_timeout=5)
        patient = RetryPolicy(attempts=30, base_delay=0.05, max_delay=0.5, deadline=60)
        with CassandraStorage(through_proxy, retry=patient) as storage:
            expected = source.read_many(storage.keys)
            for _ in range(3):
                proxy.cut_responses(2)
                assert storage.read_many(storage.keys) == expected
                assert proxy.cuts_left == 0
            stats = storage.stats()
            assert stats["retries"] + stats["overloads"] > 0


def test_reads_survive_a_restart_and_fail_clearly_when_it_stays_down() -> None:
    source = dataset(30)
    server = CassandraServer()
    try:
        server.start()
        connection = CassandraConnection(
            hosts=[server.host], port=server.port, keyspace="restart", username=server.username, password=server.password, request_timeout=5
        )
        upload_to_cassandra(source, connection, progress=False, decode_check=False)
        patient = RetryPolicy(attempts=200, base_delay=0.1, max_delay=1.0, deadline=120)
        with CassandraStorage(connection, retry=patient) as storage:
            server.stop()
            restart = threading.Timer(0.5, server.start)
            restart.start()
            try:
                assert storage.read_many(storage.keys) == source.read_many(storage.keys)
            finally:
                restart.join()
            assert storage.stats()["retries"] + storage.stats()["overloads"] > 0
            storage.retry = RetryPolicy(attempts=3, base_delay=0.05, max_delay=0.1, deadline=3)
            server.stop()
            with pytest.raises(StorageError, match=r"cassandra://127\.0\.0\.1:\d+/restart/data/class_\d/\d+\.jpg .*gave up after"):
                storage.read(storage.keys[0])
    finally:
        server.close()
