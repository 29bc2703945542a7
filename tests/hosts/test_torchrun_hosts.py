"""`torchrun` across hosts: 2 hosts x 2 ranks, rendezvous (c10d) on h0's address, the image path
reading the store host through each host's node cache. A host is lost mid-epoch (every process
on it killed, its link down): the survivors' collective times out and the job fails; it is
restarted on the surviving host with 2 ranks from the DCP checkpoint, and across both runs every
sample is delivered exactly once (each run counted up to its last checkpoint)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.hosts.conftest import SAMPLES
from tests.support.datasets import dataset
from tests.support.hosts import HOST_DISK, HostNetwork
from tests.support.s3_server import S3Server
from tests.support.training_logs import delivered

pytest.importorskip("torch.distributed.checkpoint")

SCRIPT = Path(__file__).with_name("train_s3.py")
ROOT = Path(__file__).resolve().parents[2]


def torchrun(network: HostNetwork, host: str, work: Path, endpoint: str, *, nodes: int) -> subprocess.Popen:
    """torchrun on ``host`` as one of ``nodes`` hosts of 2 ranks each (rendezvous on h0)."""
    rendezvous = ["--rdzv-backend=c10d", f"--rdzv-endpoint={network['h0'].address}:29400", "--rdzv-id=stoker-hosts"]
    command = [
        sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}", "--nproc-per-node=2", *rendezvous,
        f"--local-addr={network[host].address}", "--max-restarts=0",
        str(SCRIPT), str(work), endpoint, str(HOST_DISK / "cache"),
    ]  # fmt: skip
    # gloo takes the host's own interface (every namespace has the machine's one hostname).
    return network.run(
        host, command, env={"GLOO_SOCKET_IFNAME": "eth0", "PYTHONPATH": str(ROOT)}, log=work / f"torchrun-{host}.log", cwd=ROOT
    )


def last_step(path: Path) -> int:
    lines = path.read_text().splitlines() if path.exists() else []
    return json.loads(lines[-1])["step"] if lines else 0


def test_a_host_lost_mid_epoch_and_a_restart_on_the_survivor_deliver_every_sample_once(
    store_and_hosts: tuple[HostNetwork, S3Server], tmp_path: Path
) -> None:
    network, server = store_and_hosts
    endpoints = {host: f"http://store.from-{host}:{server.port}" for host in ("h0", "h1")}
    first = {host: torchrun(network, host, tmp_path, endpoints[host], nodes=2) for host in ("h0", "h1")}
    deadline = time.monotonic() + 240
    while last_step(tmp_path / "log-0-2.jsonl") < 6 and time.monotonic() < deadline:
        assert first["h0"].poll() is None, (tmp_path / "torchrun-h0.log").read_text()[-3000:]
        time.sleep(0.1)
    assert last_step(tmp_path / "log-0-2.jsonl") >= 6, (tmp_path / "torchrun-h1.log").read_text()[-3000:]
    network.kill("h1")  # the host is gone: its ranks, its agent, its link
    assert first["h0"].wait(timeout=180) != 0, "the survivors' job fails once its collective times out"
    checkpoint = (tmp_path / "latest").read_text()
    saved_step = int(checkpoint.removeprefix("step-"))
    assert saved_step >= 4
    second = torchrun(network, "h0", tmp_path, endpoints["h0"], nodes=1)
    assert second.wait(timeout=300) == 0, (tmp_path / "torchrun-h0.log").read_text()[-3000:]
    assert (tmp_path / "finished-1").exists()
    counts = delivered(tmp_path, 0, up_to_step=saved_step) + delivered(tmp_path, 1, up_to_step=None)
    assert counts == Counter({key: 1 for key in dataset(SAMPLES).keys}), "every sample exactly once across the host's loss"
    steps = {len(path.read_text().splitlines()) for path in tmp_path.glob("log-1-*.jsonl")}
    assert len(steps) == 1, "both ranks of the restarted job took the same steps"
