"""The diagnosis knows when the CPU is held elsewhere. Recorded stats of a decode stage that looks
latency-bound (slots busy, little CPU) are told apart by the kernel's accounting: other processes
on the cores, an affinity mask (taskset), a cgroup CPU quota. Each real case is reproduced: a CPU
hog, `os.sched_setaffinity`, and a cgroup with a quota (where this machine lets us make one)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from stoker.observe import Contention, CpuLimits, CpuSnapshot, CpuWatch, diagnose

from .test_diagnosis import loader_stats, meter, stage

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's accounting read here is Linux's")

# A decode stage with its 4 slots busy and its tasks on the CPU only 30% of their time: from the
# stage's own clocks, latency-bound ("raise decode concurrency").
# Decode's 3.9 tasks at 15% CPU keep 0.6 of a core busy: waiting, not taking turns on the GIL
# (at 30%, 1.2 cores between them, the figures are the GIL's pattern: tests/pipeline/test_tuner_gil.py).
LOOKS_LATENCY_BOUND = loader_stats(
    stage("fetch", concurrency=4, busy=0.5, cpu_share=0.1), stage("decode", concurrency=4, busy=3.9, cpu_share=0.15)
)


def contention(limits: CpuLimits, waited: float, others: float, throttled: float | None = None) -> Contention:
    return Contention(limits, 20.0, waited, others, throttled)


def test_without_contention_the_verdict_is_unchanged() -> None:
    calm = contention(CpuLimits(2, 2, None), waited=0.05, others=0.02)
    verdict = diagnose(LOOKS_LATENCY_BOUND, cpu_fraction=0.6, cores=2, meter=meter(0.5), contention=calm)
    assert verdict.kind == "latency" and "raise decode concurrency" in verdict.message


@pytest.mark.parametrize(
    "busy, expected",
    [
        (contention(CpuLimits(2, 2, None), waited=0.6, others=0.5), "because other processes use the cores (50% of the machine's 2 cores)"),
        (
            contention(CpuLimits(8, 2, None), waited=0.6, others=0.0),
            "may run on 2 of the machine's 8 cores (its CPU affinity, e.g. taskset)",
        ),
        (
            contention(CpuLimits(8, 8, 1.5), waited=0.6, others=0.0, throttled=4.2),
            "limited to 1.5 cores (its cgroup's CPU quota, held back 4.2 s by it) of the machine's 8",
        ),
    ],
    ids=["other processes", "affinity", "cgroup quota"],
)
def test_contention_is_named_instead_of_more_concurrency(busy: Contention, expected: str) -> None:
    verdict = diagnose(LOOKS_LATENCY_BOUND, cpu_fraction=0.6, cores=2, meter=meter(0.5), contention=busy)
    assert verdict.kind == "contention", verdict.message
    assert expected in verdict.message and "short of CPU, not of concurrency" in verdict.message
    assert "raise" not in verdict.message.split("More threads")[0]
    assert verdict.facts["contention"]["runqueue_wait_share"] == busy.runqueue_wait_share


def _hash_for(seconds: float, threads: int) -> None:
    """CPU work in ``threads`` threads at once (hashing releases the GIL on large inputs)."""
    data = b"x" * 4_000_000

    def work() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            hashlib.sha256(data).digest()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_a_cpu_hog_is_seen_as_other_processes_on_the_cores() -> None:
    cores = os.cpu_count() or 1
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        time.sleep(0.5)
        with CpuWatch(interval=0.1) as watch:
            _hash_for(3.0, cores)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    measured = watch.contention
    assert measured is not None and measured.runqueue_wait_share is not None and measured.others_share is not None
    assert measured.runqueue_wait_share > 0.3, measured
    assert measured.others_share > 0.3, measured
    explained = measured.explanation()
    assert explained is not None and "other processes use the cores" in explained, measured


AFFINITY = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from stoker.observe import CpuWatch
    from tests.observe.test_contention import _hash_for
    with CpuWatch(interval=0.1) as watch:
        _hash_for(2.0, 3)
    print(json.dumps({"affinity": watch.contention.limits.affinity, "waited": watch.contention.runqueue_wait_share,
                      "explained": watch.contention.explanation()}))
    """
)


def test_an_affinity_mask_is_seen_as_fewer_cores() -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs a machine of 2 cores or more, to allow this process fewer")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", AFFINITY, str(root)], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["affinity"] == 1
    assert seen["waited"] > 0.3, seen  # three busy threads on one core: each waits about 2/3 of the time
    assert "may run on 1 of the machine's" in seen["explained"], seen


def _cpu_cgroup() -> Path | None:
    """A folder where a CPU cgroup can be made here (root, a writable cgroup v1 cpu or v2 tree)."""
    for base in (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct"), Path("/sys/fs/cgroup")):
        if (base / "cpu.cfs_quota_us").exists() or (base / "cgroup.subtree_control").exists():
            if os.access(base, os.W_OK):
                return base
    return None


def test_a_cgroup_quota_is_seen_as_a_limit() -> None:
    base = _cpu_cgroup()
    if base is None:
        pytest.skip("no writable CPU cgroup here (needs root and a cgroup v1 cpu or v2 hierarchy)")
    group = base / f"stoker-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        if (group / "cpu.cfs_quota_us").exists():
            (group / "cpu.cfs_quota_us").write_text("50000")  # half a core, every 100 ms
        else:
            (group / "cpu.max").write_text("50000 100000")
    except OSError as error:
        pytest.skip(f"cannot make a CPU cgroup with a quota here: {error}")
    root = Path(__file__).resolve().parents[2]
    script = AFFINITY.replace("os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})", "")
    script = script.replace(
        '"affinity": watch.contention.limits.affinity',
        '"affinity": watch.contention.limits.quota, "throttled": watch.contention.throttled_seconds',
    )
    child = subprocess.Popen(
        [sys.executable, "-c", f"import os, sys; open({str(group / 'cgroup.procs')!r}, 'w').write(str(os.getpid())); exec(sys.stdin.read())", str(root)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root,
    )  # fmt: skip
    try:
        output, errors = child.communicate(script, timeout=120)
    finally:
        child.kill()
        child.wait()
        _remove_when_empty(group)
    assert child.returncode == 0, errors
    seen = json.loads(output.splitlines()[-1])
    assert seen["affinity"] == 0.5, seen
    assert "limited to 0.5 cores (its cgroup's CPU quota" in seen["explained"], seen
    # The kernel holds the group back only when it reaches its quota: on a machine busy with
    # other work its threads may get less than half a core anyway (then they waited on the others).
    assert seen["throttled"] is not None, seen
    assert ("held back" in seen["explained"]) == (seen["throttled"] >= 0.05), seen


def _remove_when_empty(group: Path) -> None:
    """A cgroup folder goes once the kernel has let its last process go (a moment after it exits)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_snapshot_reads_this_process() -> None:
    snapshot = CpuSnapshot.take()
    assert threading.get_native_id() in snapshot.threads
    assert snapshot.machine_busy is not None and snapshot.machine_busy > 0


def test_the_default_thread_counts_follow_the_cores_this_process_may_use() -> None:
    """Under ``taskset`` (or a job's cpuset) the machine has more cores than the process may use:
    the Loader's default decode concurrency, the tuner's range and the size scans follow the
    latter."""
    child = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from stoker import Loader; from stoker.observe import CpuLimits; from stoker.storage import MemoryStorage; "
        "loader = Loader(MemoryStorage({'a': b'x'}), batch_size=1, decode=bytes); "
        "print(CpuLimits.read().threads, loader.decode_concurrency, os.cpu_count())"
    )
    threads, decode, machine = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.split()
    assert (threads, decode) == ("1", "1")
    assert CpuLimits(online=8, affinity=4, quota=0.5).threads == 1
    assert CpuLimits(online=8, affinity=4, quota=2.5).threads == 3
    assert CpuLimits(online=8, affinity=4, quota=None).threads == 4
    assert int(machine) >= 1
