"""The peers of `benchmarks/storage/remote.py`, as our users run them today.

- PyTorch DataLoader over a map-style Dataset whose ``__getitem__`` GETs one object with boto3
  (or reads one row with the Cassandra driver): each worker fetches the samples of a batch one
  after another.
- ConcurrentDataloader-style (the paper on high-latency storage): the same DataLoader, but each
  worker requests every sample of its batch at once from a thread pool (``__getitems__``).

Clients are made lazily in each worker process (they do not survive a fork).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["CassandraRowDataset", "S3ObjectDataset", "keep_list"]


def keep_list(samples: list[bytes]) -> list[bytes]:
    """A collate function that keeps a batch as its list of bytes (no decoding is measured)."""
    return samples


class _PerProcessClient:
    """Builds its client on first use in each process."""

    concurrent = False

    def __init__(self, keys: list[str], *, concurrent: bool = False) -> None:
        self.keys = keys
        self.concurrent = concurrent
        self._owner = -1
        self._client: Any = None
        self._threads: ThreadPoolExecutor | None = None

    def _connect(self) -> Any:
        raise NotImplementedError

    def _get(self, client: Any, key: str) -> bytes:
        raise NotImplementedError

    def client(self) -> Any:
        if self._owner != os.getpid():
            self._client, self._owner, self._threads = self._connect(), os.getpid(), None
        return self._client

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> bytes:
        return self._get(self.client(), self.keys[index])

    def __getitems__(self, indices: list[int]) -> list[bytes]:
        if not self.concurrent:
            return [self[index] for index in indices]
        client = self.client()
        if self._threads is None:
            self._threads = ThreadPoolExecutor(64)
        return list(self._threads.map(lambda index: self._get(client, self.keys[index]), indices))


class S3ObjectDataset(_PerProcessClient):
    """One object per sample, fetched with boto3."""

    def __init__(self, keys: list[str], *, bucket: str, prefix: str, options: dict[str, str], concurrent: bool = False) -> None:
        super().__init__(keys, concurrent=concurrent)
        self.bucket, self.prefix, self.options = bucket, prefix, options

    def _connect(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.options["endpoint"],
            aws_access_key_id=self.options["access_key_id"],
            aws_secret_access_key=self.options["secret_access_key"],
            region_name=self.options.get("region", "us-east-1"),
            config=Config(max_pool_connections=64, retries={"max_attempts": 5, "mode": "standard"}),
        )

    def _get(self, client: Any, key: str) -> bytes:
        return client.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")["Body"].read()


class CassandraRowDataset(_PerProcessClient):
    """One row per sample, read with the driver's blocking ``execute`` (or from threads)."""

    def __init__(self, keys: list[str], *, connection: Any, concurrent: bool = False) -> None:
        super().__init__(keys, concurrent=concurrent)
        self.connection = connection

    def _connect(self) -> Any:
        _, session = self.connection.connect(executor_threads=2)
        statement = session.prepare(f"SELECT data FROM {self.connection.keyspace}.{self.connection.data_table} WHERE id = ?")
        return session, statement

    def _get(self, client: Any, key: str) -> bytes:
        from stoker.storage.remote import sample_id

        session, statement = client
        return session.execute(statement, (sample_id(key),)).one().data
