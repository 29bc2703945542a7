"""An S3-compatible server on loopback: s3proxy (Maven Central) over a folder of files.

s3proxy speaks the S3 REST API with SigV2/SigV4 authentication, ranged GETs and multipart
uploads; with the ``filesystem-nio2`` backend its objects are plain files in the work folder.
"""

from __future__ import annotations

import hashlib
import os
import signal
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stoker_testbed.servers.server import ServerError, ServerProcess, free_port, installing, require_java, server_cache, wait_for_port

__all__ = ["S3Server", "S3_PROXY_VERSION"]

S3_PROXY_VERSION = "4.1.0"
MAVEN_CENTRAL = os.environ.get("STOKER_MAVEN_REPOSITORY", "https://repo1.maven.org/maven2")


def download_checked(url: str, target: Path) -> Path:
    """Download ``url`` to ``target`` unless there, checking the repository's SHA-1.

    Raises:
        ServerError: The download failed or its checksum does not match.
    """
    if target.exists():
        return target
    with installing(target.parent):
        if not target.exists():
            _download(url, target)
    return target


def _download(url: str, target: Path) -> None:
    partial = target.with_suffix(target.suffix + ".part")
    try:
        with urllib.request.urlopen(url + ".sha1", timeout=60) as response:
            expected = response.read().decode().split()[0]
        digest = hashlib.sha1()
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except OSError as error:
        raise ServerError(f"cannot download {url}: {error}") from error
    if digest.hexdigest() != expected:
        partial.unlink(missing_ok=True)
        raise ServerError(f"{url}: SHA-1 {digest.hexdigest()} does not match the repository's {expected}")
    partial.replace(target)


def s3proxy_jar() -> Path:
    """The s3proxy jar with its dependencies, downloaded once."""
    name = f"s3proxy-{S3_PROXY_VERSION}-jar-with-dependencies.jar"
    url = f"{MAVEN_CENTRAL}/org/gaul/s3proxy/{S3_PROXY_VERSION}/{name}"
    return download_checked(url, server_cache() / name)


class S3Server(ServerProcess):
    """``with S3Server() as server:`` then use ``server.endpoint`` with ``server.access_key`` /
    ``server.secret_key`` (test credentials; region ``us-east-1``).

    Args:
        port: Port (default: a free one). A restart keeps the port and the objects.
        host: The address it listens on: loopback, or a test host's (testbed/stoker_testbed/hosts.py).
    """

    name = "s3proxy"
    # Every acknowledged PUT is already a file: nothing to flush, so no graceful shutdown to wait for.
    stop_signal = signal.SIGKILL
    startup_timeout = 60.0
    region = "us-east-1"

    def __init__(
        self, port: int | None = None, access_key: str = "stoker-test", secret_key: str = "stoker-secret", *, host: str = "127.0.0.1"
    ) -> None:
        super().__init__()
        self.host = host
        self.port = port or free_port()
        self.access_key = access_key
        self.secret_key = secret_key
        self.data_dir = self.workdir / "objects"
        self.data_dir.mkdir()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _command(self) -> Sequence[str]:
        properties = self.workdir / "s3proxy.conf"
        properties.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.endpoint}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={self.access_key}",
                    f"s3proxy.credential={self.secret_key}",
                    "jclouds.provider=filesystem-nio2",
                    f"jclouds.filesystem.basedir={self.data_dir}",
                    "",
                ]
            )
        )
        return [require_java(), "-Xmx512m", "-XX:+UseSerialGC", "-jar", str(s3proxy_jar()), "--properties", str(properties)]

    def _ready(self) -> bool:
        return wait_for_port(self.host, self.port, 0.2)

    def environment(self) -> dict[str, str]:
        """The ``AWS_*`` variables that point a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
        }

    def client(self) -> Any:
        """A boto3 S3 client for this server (boto3 is a dev and bench dependency)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (3-63 lowercase letters, digits, hyphens) through the S3 API."""
        self.client().create_bucket(Bucket=name)

    def options(self) -> dict[str, str]:
        """`S3Storage` keyword arguments for this server."""
        return {"endpoint": self.endpoint, "access_key_id": self.access_key, "secret_access_key": self.secret_key, "region": self.region}
