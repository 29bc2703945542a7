"""A Google Cloud Storage emulator on loopback: fake-gcs-server (Go), built once from its source
with ``go install`` (the Go module proxy is a package registry) into the server cache.

It serves GCS's JSON API and the XML API's reads (ranged GETs), the calls `GCSStorage` makes;
objects are files under its work folder, so a restart on the same port keeps them. Its XML API
takes no plain PUT, so `put` writes through the JSON API's media upload, as Google's own client
libraries do.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from stoker_testbed.servers.server import ServerError, ServerProcess, free_port, installing, server_cache, wait_for_port

__all__ = ["FAKE_GCS_SERVER_VERSION", "GcsServer"]

FAKE_GCS_SERVER_VERSION = "v1.56.1"
_MODULE = "github.com/fsouza/fake-gcs-server"


def fake_gcs_server_binary() -> Path:
    """The fake-gcs-server executable, built once by ``go install`` at the pinned version.

    Raises:
        ServerError: No ``go`` on PATH, or the build failed (its output in the message).
    """
    folder = server_cache(f"fake-gcs-server-{FAKE_GCS_SERVER_VERSION}")
    binary = folder / "fake-gcs-server"
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise ServerError("go is not installed (it builds the GCS emulator, fake-gcs-server, from source)")
    with installing(folder):
        if not binary.exists():
            _build(go, binary)
    return binary


def _build(go: str, binary: Path) -> None:
    # Built into a folder of its own, then moved: a build cut short never passes for a binary.
    with tempfile.TemporaryDirectory(dir=binary.parent) as scratch:
        done = subprocess.run(
            [go, "install", f"{_MODULE}@{FAKE_GCS_SERVER_VERSION}"],
            env={**os.environ, "GOBIN": scratch, "GOFLAGS": "-mod=mod"},
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            raise ServerError(f"go install {_MODULE}@{FAKE_GCS_SERVER_VERSION} failed:\n{done.stderr[-3000:]}")
        os.replace(Path(scratch) / "fake-gcs-server", binary)


class GcsServer(ServerProcess):
    """``with GcsServer() as server:`` then `GCSStorage` with ``server.options()`` (or
    ``STORAGE_EMULATOR_HOST`` from ``server.environment()``).

    Args:
        port: Port (default: a free one). A restart keeps the port and the objects.
        host: The address it listens on.
        public_host: The ``host:port`` its clients name (default: where it listens); it routes
            requests by it, so a proxy in front of it (TLS) names the proxy's.
    """

    name = "fake-gcs-server"
    stop_signal = signal.SIGKILL  # every acknowledged upload is already a file
    startup_timeout = 60.0

    def __init__(self, port: int | None = None, *, host: str = "127.0.0.1", public_host: str | None = None) -> None:
        super().__init__()
        self.host = host
        self.port = port or free_port()
        self.public_host = public_host or f"{self.host}:{self.port}"
        self.data_dir = self.workdir / "objects"
        self.data_dir.mkdir()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _command(self) -> Sequence[str]:
        return [
            str(fake_gcs_server_binary()),
            "-scheme",
            "http",
            "-host",
            self.host,
            "-port",
            str(self.port),
            "-public-host",
            self.public_host,
            "-backend",
            "filesystem",
            "-filesystem-root",
            str(self.data_dir),
            "-log-level",
            "warn",
        ]

    def _ready(self) -> bool:
        if not wait_for_port(self.host, self.port, 0.2):
            return False
        try:
            with urllib.request.urlopen(f"{self.endpoint}/storage/v1/b", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def environment(self) -> dict[str, str]:
        """What points Google's clients (and `GCSStorage`) at this server."""
        return {"STORAGE_EMULATOR_HOST": self.endpoint}

    def options(self) -> dict[str, object]:
        """`GCSStorage` keyword arguments for this server (it checks no credentials)."""
        return {"endpoint": self.endpoint, "anonymous": True}

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` through the JSON API."""
        self._call("POST", "/storage/v1/b", json.dumps({"name": name}).encode(), "application/json")

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """Write object ``key`` (a media upload of the JSON API)."""
        query = urllib.parse.urlencode({"uploadType": "media", "name": key})
        self._call("POST", f"/upload/storage/v1/b/{urllib.parse.quote(bucket)}/o?{query}", data, "application/octet-stream")

    def _call(self, method: str, path: str, body: bytes, content_type: str) -> None:
        request = urllib.request.Request(self.endpoint + path, data=body, method=method, headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
        except OSError as error:
            raise ServerError(f"{self.name}: {method} {path.split('?')[0]} failed: {error}") from error
