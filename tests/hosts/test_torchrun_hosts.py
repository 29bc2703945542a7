"""`torchrun` across hosts: an elastic job of 2 hosts x 2 ranks, rendezvous (c10d) on h0's
address, the image path reading the store host through each host's node cache. A host is lost
mid-epoch (every process on it killed, its link down): the survivors' collective times out, the
agent on h0 meets the rendezvous again, now of one host, and restarts its 2 ranks, which resume
from the DCP checkpoint; across both rounds every sample is delivered exactly once (the first
round counted up to the checkpoint the second resumed from)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from stoker_testbed.data.datasets import dataset
from stoker_testbed.data.training_logs import delivered
from stoker_testbed.hosts import HOST_DISK, HostNetwork
from stoker_testbed.servers.s3_server import S3Server
from tests.hosts.conftest import SAMPLES

pytest.importorskip("torch.distributed.checkpoint")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "distributed" / "train.py"


def torchrun(network: HostNetwork, host: str, work: Path, endpoint: str) -> subprocess.Popen:
    """torchrun on ``host``: an elastic job of 1 to 2 hosts of 2 ranks each (rendezvous on h0),
    which restarts its workers once when one fails."""
    rendezvous = [
        "--rdzv-backend=c10d", f"--rdzv-endpoint={network['h0'].address}:29400", "--rdzv-id=stoker-hosts",
        "--rdzv-conf=last_call_timeout=2",
    ]  # fmt: skip
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1:2", "--nproc-per-node=2", *rendezvous,
        f"--local-addr={network[host].address}", "--max-restarts=1",
        str(SCRIPT), str(work), "--s3", endpoint, f"--cache={HOST_DISK / 'cache'}",
        "--checkpoint-every=4", "--step-seconds=0.1", "--timeout=20",
    ]  # fmt: skip
    environment = {
        "GLOO_SOCKET_IFNAME": "eth0",  # gloo takes the host's own interface (every host has the machine's name)
        # The store the agent shares with its ranks outlives a restart, keys and all: a restarted
        # rank could read a dead rank's gloo address from the first round and fail on "Connection
        # refused" (seen here; pytorch/pytorch#135712). Without sharing, each round has its own.
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "PYTHONPATH": str(ROOT),
    }
    return network.run(host, command, env=environment, log=work / f"torchrun-{host}.log", cwd=ROOT)


def last_step(path: Path) -> int:
    lines = path.read_text().splitlines() if path.exists() else []
    return json.loads(lines[-1])["step"] if lines else 0


def test_a_host_lost_mid_epoch_and_the_elastic_restart_on_the_survivor_deliver_every_sample_once(
    store_and_hosts: tuple[HostNetwork, S3Server], tmp_path: Path
) -> None:
    network, server = store_and_hosts
    endpoints = {host: f"http://store.from-{host}:{server.port}" for host in ("h0", "h1")}
    job = {host: torchrun(network, host, tmp_path, endpoints[host]) for host in ("h0", "h1")}
    deadline = time.monotonic() + 240
    while last_step(tmp_path / "log-0-2.jsonl") < 6 and time.monotonic() < deadline:
        assert job["h0"].poll() is None, (tmp_path / "torchrun-h0.log").read_text()[-3000:]
        time.sleep(0.1)
    assert last_step(tmp_path / "log-0-2.jsonl") >= 6, (tmp_path / "torchrun-h1.log").read_text()[-3000:]
    network.kill("h1")  # the host is gone: its ranks, its agent, its link
    # h0's ranks fail once their all-reduce times out; its agent meets the rendezvous again,
    # now of one host, and restarts them: 2 ranks resume from the last DCP checkpoint.
    assert job["h0"].wait(timeout=300) == 0, (tmp_path / "torchrun-h0.log").read_text()[-3000:]
    assert (tmp_path / "finished-1").exists(), "the job finished in its second round, on h0 alone"
    saved_step = int((tmp_path / "step-of-run-1").read_text())
    counts = delivered(tmp_path, 0, up_to_step=saved_step) + delivered(tmp_path, 1, up_to_step=None)
    assert counts == Counter({key: 1 for key in dataset(SAMPLES).keys}), "every sample exactly once across the host's loss"
    steps = {len(path.read_text().splitlines()) for path in tmp_path.glob("log-1-*.jsonl")}
    assert len(steps) == 1 and len(list(tmp_path.glob("log-1-*.jsonl"))) == 2, "the 2 ranks of the second round took the same steps"
