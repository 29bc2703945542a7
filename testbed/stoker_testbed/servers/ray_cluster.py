"""A real local Ray cluster for the tests: a head and a second node joined to it, on 127.0.0.1.

Each node is a ``ray start --block`` in a process group of its own, stopped by signalling that
group: never ``ray stop``, which would stop every Ray cluster on the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from stoker_testbed.availability import unavailable
from stoker_testbed.servers.server import free_port, wait_for_port


@contextlib.contextmanager
def local_ray_cluster(temp: Path) -> Iterator[str]:
    """Start the two nodes, connect this process (``ray.init``) and yield the address; a missing
    ``ray`` command or a node that does not come up is `unavailable` (a skip, a failure in CI)."""
    import ray

    command = shutil.which("ray", path=str(Path(sys.executable).parent))  # the venv's own
    if command is None:
        unavailable("a local Ray cluster", "the ray command is not installed")
    port = free_port()
    address = f"127.0.0.1:{port}"
    common = ["--block", "--num-cpus=1", "--object-store-memory=150000000", "--disable-usage-stats", "--node-ip-address=127.0.0.1"]
    nodes: list[subprocess.Popen[bytes]] = []
    # The nodes get a home of their own: a token that a local ``ray.init()`` once left in
    # ~/.ray would turn authentication on for the head and not for the node joining it.
    environment = {**os.environ, "HOME": str(temp)}

    def node(*arguments: str) -> None:
        log = open(temp / f"node-{len(nodes)}.log", "wb")  # noqa: SIM115 - the node's lifetime
        nodes.append(
            subprocess.Popen(
                [command, "start", *arguments, *common], stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=environment
            )
        )

    try:
        node("--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}")
        if not wait_for_port("127.0.0.1", port, 120):
            unavailable("a local Ray cluster", f"the Ray head did not open {address}: {(temp / 'node-0.log').read_text()[-2000:]}")
        node(f"--address={address}")
        _connect(address, deadline=time.monotonic() + 150)
        deadline = time.monotonic() + 120
        while len([entry for entry in ray.nodes() if entry["Alive"]]) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        if len([entry for entry in ray.nodes() if entry["Alive"]]) < 2:
            unavailable("a local Ray cluster", f"the second Ray node did not join: {(temp / 'node-1.log').read_text()[-2000:]}")
        yield address
    finally:
        # Bounded: ray.shutdown() once waited past pytest's 300 s on a driver connection; the
        # processes are stopped below whatever it does.
        stopping = threading.Thread(target=ray.shutdown, name="ray-shutdown", daemon=True)
        stopping.start()
        stopping.join(30)
        # Each ``ray start`` is asked to stop (it stops its own processes, the head last); all of
        # its process group signalled at once, it waited past 30 s for children already gone.
        for process in reversed(nodes):
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # what is left of it
            process.wait()


def _connect(address: str, deadline: float) -> None:
    """``ray.init`` to the cluster, again until ``deadline`` when it fails: it gives the head's
    GCS 60 s to answer, and a head started on two cores at load 10 (the end of a parallel test
    run) did not answer in time once ("Timed out while waiting for GCS to become available")."""
    import ray

    while True:
        try:
            ray.init(address=address, log_to_driver=False)
            return
        except (ConnectionError, RuntimeError) as error:
            ray.shutdown()  # what the failed attempt set up, before the next one
            if time.monotonic() >= deadline:
                unavailable("a local Ray cluster", f"this process could not connect to {address}: {error}")
            time.sleep(2)
