"""The straggler named across hosts: a synchronous job of one rank on h0 and one on h1
(tests/distributed/straggler_job.py, gloo over the hosts' network, an all-reduce per step), watched
by `StragglerWatch`. Three ways one host holds the other back, each found with its own cause, and
no verdict when the hosts are alike:

- h1's link to the store is slow (a latency proxy on its route): its storage reads, over the network;
- h1's CPU is taken by a hog (each host a core of its own, h1's shared with three busy loops):
  other processes use its cores;
- h1's disk is slow (its data on a loop device whose reads a blkio cgroup throttles): its storage
  reads, from local disk.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from stoker_testbed.data.datasets import dataset
from stoker_testbed.hosts import HostNetwork
from stoker_testbed.servers.s3_server import S3Server

pytest.importorskip("torch.distributed")

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "distributed" / "straggler_job.py"
BLKIO = Path("/sys/fs/cgroup/blkio")


def job(
    network: HostNetwork,
    work: Path,
    options: dict[str, list[str]],
    prefix: dict[str, list[str]] | None = None,
    h1_cgroup: Path | None = None,
) -> dict:
    """Run one rank on h0 and one on h1 through an epoch (h1's in ``h1_cgroup``, joined as it
    starts, before any thread of its own); rank 0's verdicts and figures."""
    out = work / "verdicts.json"
    out.unlink(missing_ok=True)
    environment = {
        "MASTER_ADDR": network["h0"].address, "MASTER_PORT": "29511", "WORLD_SIZE": "2",
        "GLOO_SOCKET_IFNAME": "eth0", "PYTHONPATH": str(ROOT),
    }  # fmt: skip
    ranks = []
    for number, host in enumerate(("h0", "h1")):
        command = [
            *(prefix or {}).get(host, []),
            sys.executable,
            str(JOB),
            str(out),
            "--step-seconds",
            "0.02",
            "--batch-size",
            "2",
            *options[host],
        ]
        log = work / f"{host}.log"
        log.unlink(missing_ok=True)
        process = network.run(host, command, env={**environment, "RANK": str(number)}, log=log, cwd=ROOT)
        if host == "h1" and h1_cgroup is not None:
            # From here: in its namespace /sys is the namespace's own, without the cgroups.
            (h1_cgroup / "cgroup.procs").write_text(str(process.pid))
        ranks.append((process, log))
    for process, log in ranks:
        assert process.wait(timeout=300) == 0, log.read_text()[-3000:]
    result = json.loads(out.read_text())
    shares = [round(figures["others_cpu_share"], 2) for figures in result["figures"]]
    print(
        f"{options} (others' share of each rank's cores {shares}): {result['verdicts'][-1]}"
    )  # the verdict as logged (pytest -s shows it)
    return result


def test_the_straggler_is_named_with_its_cause_for_a_slow_link_a_cpu_hog_and_a_slow_disk(
    store_and_hosts: tuple[HostNetwork, S3Server], tmp_path: Path
) -> None:
    network, server = store_and_hosts
    # By the store's own name: `delayed_route` points h1's ``store.from-h1`` at its proxy.
    direct = {host: ["--s3", f"http://store:{server.port}"] for host in ("h0", "h1")}

    alike = job(network, tmp_path, direct)
    assert alike["verdicts"] == [None] * len(alike["verdicts"]) and alike["verdicts"], alike

    slow = network.delayed_route("h1", "store", server.port, delay=0.25)
    link = job(network, tmp_path, {"h0": direct["h0"], "h1": ["--s3", f"http://store.from-h1:{slow}"]})
    verdict = link["verdicts"][-1]
    assert verdict and verdict.startswith("rank 1 (host h1) waits for data"), link
    assert "its storage reads (over the network, s3://hosts/d) take" in verdict and "its CPU is taken" not in verdict, verdict

    # Each host has a core of its own (the store idle: both read files already in memory), and
    # h1's is shared with two busy loops.
    fast = tmp_path / "fast"
    write_files(fast)
    # Decoding a batch takes 80% of a step on a core of its own (measured here, before the hogs
    # start: a faster machine decodes faster and needs more rounds): h1's, with a quarter of a
    # core, cannot keep up.
    rounds = decode_rounds(fast, share=0.8, step_seconds=0.04)
    with hogs(network, "h1", core=1, count=3):
        pinned = {"h0": ["taskset", "-c", "0"], "h1": ["taskset", "-c", "1"]}
        heavy = ["--files", str(fast), "--decode-work", str(rounds), "--step-seconds", "0.04"]
        cpu = job(network, tmp_path, {host: heavy for host in direct}, prefix=pinned)
    verdict = cpu["verdicts"][-1]
    assert verdict and verdict.startswith("rank 1 (host h1) waits for data"), cpu
    assert "other processes on host h1 use" in verdict and "its CPU is taken" in verdict, verdict

    with slow_disk(tmp_path / "slow") as (folder, cgroup):
        write_files(folder)
        drop_caches()
        disk = job(network, tmp_path, {"h0": ["--files", str(fast)], "h1": ["--files", str(folder)]}, h1_cgroup=cgroup)
    verdict = disk["verdicts"][-1]
    assert verdict and verdict.startswith("rank 1 (host h1) waits for data"), disk
    assert f"its storage reads (from local disk, files at {folder})" in verdict and "its CPU is taken" not in verdict, verdict


@contextmanager
def hogs(network: HostNetwork, host: str, *, core: int, count: int) -> Iterator[None]:
    """``count`` busy loops on ``host``, pinned to ``core``."""
    hog = ["taskset", "-c", str(core), sys.executable, "-c", "while True: pass"]
    started = [network.run(host, hog) for _ in range(count)]
    try:
        yield
    finally:
        for process in started:
            process.kill()
            process.wait()


@contextmanager
def slow_disk(mount: Path) -> Iterator[tuple[Path, Path]]:
    """An ext4 file system on a loop device mounted at ``mount``, and a blkio cgroup whose
    processes read it at 64 KB/s and 20 reads/s: (the data folder, the cgroup)."""
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        pytest.fail("cgroup v1 blkio throttling is not available here (a slow disk needs it)")
    image = mount.with_suffix(".img")
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    device = subprocess.run(["losetup", "-f", "--show", str(image)], check=True, capture_output=True, text=True).stdout.strip()
    cgroup = BLKIO / f"stoker-slow-{image.parent.name}"
    mount.mkdir()
    try:
        subprocess.run(["mount", device, str(mount)], check=True)
        number = subprocess.run(["lsblk", "-dno", "MAJ:MIN", device], check=True, capture_output=True, text=True).stdout.strip()
        cgroup.mkdir()
        (cgroup / "blkio.throttle.read_bps_device").write_text(f"{number} {64 << 10}")
        (cgroup / "blkio.throttle.read_iops_device").write_text(f"{number} 20")
        yield mount / "data", cgroup
    finally:
        subprocess.run(["umount", str(mount)], check=False)
        subprocess.run(["losetup", "-d", device], check=False)
        if cgroup.exists():
            cgroup.rmdir()


def decode_rounds(folder: Path, *, share: float, step_seconds: float) -> int:
    """The job's decode rounds that take ``share`` of a step per batch of 2 on a free core here."""
    command = [sys.executable, str(JOB), "-", "--files", str(folder), "--calibrate", str(share)]
    command += ["--step-seconds", str(step_seconds), "--batch-size", "2"]
    rounds = int(subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip())
    print(f"decode rounds for {share:.0%} of a {step_seconds} s step: {rounds}")
    return rounds


def write_files(root: Path) -> None:
    for key, data in dataset(320).iter_sequential():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)


def drop_caches() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3")
