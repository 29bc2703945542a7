"""`stoker convert` to S3 and Cassandra, `stoker split` from Cassandra's metadata table, and
`stoker bench` on network storage, as a user runs them."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from stoker.cli import main
from stoker.sampling import read_split
from stoker.storage import CassandraConnection, S3Storage
from stoker_testbed.data.datasets import make_folder
from stoker_testbed.servers.cassandra_server import CassandraServer
from stoker_testbed.servers.s3_server import S3Server


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, tuple[bytes, int]]]:
    root = tmp_path / "folder"
    return root, make_folder(root, classes=3, per_class=12)


def test_convert_to_s3_then_bench_it(s3_server: S3Server, bucket: str, folder, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    root, samples = folder
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    assert main(["convert", str(root), f"s3://{bucket}/images", "--quiet", "--no-decode-check"]) == 0
    with S3Storage(f"s3://{bucket}/images") as storage:  # credentials from the environment
        assert {key: (data, label) for key, data, label in zip(storage.keys, storage.read_many(storage.keys), storage.labels)} == samples
    assert main(["bench", f"s3://{bucket}/images", "--duration", "1", "--quiet", "--json", str(root.parent / "run.json")]) == 0
    run = json.loads((root.parent / "run.json").read_text())
    assert run["results"][0]["images"] > 0
    printed = capsys.readouterr().out
    assert "diagnosis" in printed
    # What reading the bucket took: requests by kind, priced, per run and per epoch.
    storage = run["diagnosed_run"]["storage"]
    assert storage["requests"]["GET"] >= run["diagnosed_run"]["images"]
    assert storage["cost"]["prices"].startswith("AWS S3 Standard") and storage["dollars_per_epoch"] > 0
    assert "storage over the run: " in printed and " GET; " in printed and "an epoch" in printed
    assert main(["report", str(root.parent / "run.json"), "--out", str(root.parent / "report")]) == 0
    assert 'id="storage"' in (root.parent / "report" / "index.html").read_text()


def test_convert_to_cassandra_with_metadata_then_split_by_patient(
    cassandra_server: CassandraServer,
    keyspace_connection: CassandraConnection,
    folder,
    tmp_path: Path,
    monkeypatch,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    root, samples = folder
    monkeypatch.setenv("STOKER_CASSANDRA_USERNAME", cassandra_server.username)
    monkeypatch.setenv("STOKER_CASSANDRA_PASSWORD", cassandra_server.password)
    metadata = tmp_path / "metadata.csv"
    patient_of = {key: f"patient{index // 3}" for index, key in enumerate(sorted(samples))}
    with open(metadata, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["key", "patient"])
        writer.writerows(sorted(patient_of.items()))
    url = f"cassandra://{cassandra_server.host}:{cassandra_server.port}/{keyspace_connection.keyspace}"
    assert main(["convert", str(root), url, "--metadata", str(metadata), "--quiet", "--no-decode-check"]) == 0
    splits = tmp_path / "splits.json"
    assert main(["split", url, "-o", str(splits), "--group-column", "patient", "--ratios", "train=2,test=1", "--seed", "7"]) == 0
    train, test = read_split(splits, "train"), read_split(splits, "test")
    assert sorted(train + test) == sorted(samples)
    assert not {patient_of[key] for key in train} & {patient_of[key] for key in test}
    assert main(["split", url, "-o", str(tmp_path / "folds.json"), "--folds", "3"]) == 0
    validation = Counter(key for fold in range(3) for key in read_split(tmp_path / "folds.json", f"fold{fold}/val"))
    assert validation == Counter(list(samples))
    assert main(["split", url, "-o", str(splits), "--group-column", "ward"]) == 1
    assert "its columns" in capsys.readouterr().err
