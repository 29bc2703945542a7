"""One handle on a bucket of any of the test object stores (s3proxy, fake-gcs-server, Azurite), so
a test of what every store must do is written once and run against each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from stoker_testbed.data.datasets import unique

__all__ = ["TestBucket", "new_bucket"]


class _BucketServer(Protocol):
    def create_bucket(self, name: str) -> None: ...

    def options(self) -> Any: ...


@dataclass
class TestBucket:
    """A fresh bucket (a container on Azure) on a running test server.

    Attributes:
        store: ``"s3"``, ``"gs"`` or ``"az"``, the URL scheme.
        name: The bucket.
        server: The server it lives on.
    """

    __test__ = False  # a pytest-collected name, not a test

    store: str
    name: str
    server: Any

    def url(self, prefix: str = "") -> str:
        """``<store>://bucket/prefix``."""
        return f"{self.store}://{self.name}/{prefix}" if prefix else f"{self.store}://{self.name}"

    def options(self) -> dict[str, Any]:
        """The storage's keyword arguments that reach this server."""
        return dict(self.server.options())

    def put(self, key: str, data: bytes) -> None:
        """Write one object."""
        if self.store == "s3":
            self.server.client().put_object(Bucket=self.name, Key=key, Body=data)
        else:
            self.server.put(self.name, key, data)

    def put_folder(self, folder: Path, prefix: str) -> None:
        """Copy every file under ``folder`` to ``prefix/<relative path>``."""
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                self.put(f"{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes())


def new_bucket(store: str, server: _BucketServer) -> TestBucket:
    """A fresh bucket on ``server``."""
    name = unique("bucket-")
    server.create_bucket(name)
    return TestBucket(store, name, server)
