"""An Azure Blob Storage emulator on loopback: Azurite (Microsoft's, from npm), installed once with
``npm install`` into the server cache and run by the machine's Node.js.

It speaks the Blob service's REST API with shared-key authentication, ranged GETs and block
uploads; its data lives under its work folder, so a restart on the same port keeps it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stoker_testbed.servers.server import ServerError, ServerProcess, free_port, installing, server_cache, wait_for_port

__all__ = ["AZURITE_ACCOUNT", "AZURITE_KEY", "AZURITE_VERSION", "AzuriteServer"]

AZURITE_VERSION = "3.37.0"
# Azurite's well-known development account and key, published by Microsoft for the emulator.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_blob_command() -> list[str]:
    """The command that runs Azurite's blob service, installed once by npm at the pinned version.

    Raises:
        ServerError: No ``node`` or ``npm`` on PATH, or the install failed.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise ServerError("Node.js and npm are not installed (they run the Azure emulator, Azurite)")
    folder = server_cache(f"azurite-{AZURITE_VERSION}")
    main = folder / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    with installing(folder):
        if not main.exists():
            _install(npm, folder)
    if not main.exists():
        raise ServerError(f"azurite@{AZURITE_VERSION} installed no {main.relative_to(folder)}")
    return [node, str(main)]


def _install(npm: str, folder: Path) -> None:
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", scratch, f"azurite@{AZURITE_VERSION}"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            raise ServerError(f"npm install azurite@{AZURITE_VERSION} failed:\n{done.stderr[-3000:]}")
        shutil.rmtree(folder / "node_modules", ignore_errors=True)
        (Path(scratch) / "node_modules").rename(folder / "node_modules")


class AzuriteServer(ServerProcess):
    """``with AzuriteServer() as server:`` then `AzureStorage` with ``server.options()``.

    Args:
        port: Port (default: a free one). A restart keeps the port and the blobs.
        host: The address it listens on.
    """

    name = "azurite"
    startup_timeout = 60.0
    account = AZURITE_ACCOUNT
    account_key = AZURITE_KEY

    def __init__(self, port: int | None = None, *, host: str = "127.0.0.1") -> None:
        super().__init__()
        self.host = host
        self.port = port or free_port()
        self.data_dir = self.workdir / "blobs"
        self.data_dir.mkdir()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}/{self.account}"

    def _command(self) -> Sequence[str]:
        return [
            *azurite_blob_command(),
            "--blobHost",
            self.host,
            "--blobPort",
            str(self.port),
            "--location",
            str(self.data_dir),
            "--silent",
            "--skipApiVersionCheck",
            "--loose",
        ]

    def _ready(self) -> bool:
        return wait_for_port(self.host, self.port, 0.2)

    def kill(self) -> None:
        """Stop Azurite at once, its blobs kept: SIGTERM, which it answers by saving its blob
        index and exiting (well under a second), then SIGKILL if it has not.

        A SIGKILL, as other servers get, loses what Azurite's index (LokiJS, saved every 5 s)
        gained or changed since its last save: after a kill mid-epoch 258 of 300 blobs were left,
        and a resume was refused as over another dataset. Azure itself loses nothing in an
        outage, and the outage tests test stoker's side of one, so the emulator's own loss is
        kept out of them.
        """
        self.stop(timeout=10.0)

    def connection_string(self) -> str:
        """The connection string that points Azure's clients at this server."""
        return f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.account_key};BlobEndpoint={self.endpoint};"

    def options(self) -> dict[str, object]:
        """`AzureStorage` keyword arguments for this server."""
        return {"account": self.account, "account_key": self.account_key, "endpoint": self.endpoint}

    def _store(self, container: str) -> Any:
        from stoker.storage.remote import open_azure_store

        return open_azure_store(container, account=self.account, account_key=self.account_key, endpoint=self.endpoint)

    def create_bucket(self, name: str) -> None:
        """Create container ``name`` (Azure's bucket) through the Blob service's REST API."""
        from azure.storage.blob import BlobServiceClient

        BlobServiceClient.from_connection_string(self.connection_string()).create_container(name)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """Write blob ``key`` in container ``bucket``."""
        import obstore

        obstore.put(self._store(bucket), key, data)
