"""Live autotuning against a grid search of fixed settings, one scenario at a time, in one run.

Scenarios (JPEGs of 320x240, random-resized-crop 224 + flip into uint8 batches of 32):

- ``a`` local JPEGs, compute-bound (the training step takes no time);
- ``b`` an S3-compatible server (s3proxy) behind the latency proxy at 50 ms round trip;
- ``c`` the same at 150 ms with a heavy tail (one connection in ten 10x slower);
- ``d`` local JPEGs and a consumer with a 30 ms step (a GPU), where few threads suffice;
- ``e`` local JPEGs, a 30 ms step, and a CPU hog (another process spinning on one core) started a
  third of the way into the run: the consumer is fed, so the tuner leaves the hog its core;
- ``f`` local JPEGs, compute-bound, a hog on one core from the start: the consumer waits, so the
  tuner takes threads enough to win the cores' share a fixed setting would;
- ``g`` the same with a hog on each core.

For each: every fixed configuration of the grid (``Throughput(autotune=False)``) runs for
``--seconds``; then the Loader from its defaults, tuning itself, runs for ``--tune-seconds``. The
best of the grid is the fastest (in ``d`` and ``e``: the cheapest that keeps the consumer's wait
under 2%; in ``f`` and ``g``: the fastest with the hogs running). Reported: images/s over the first 5 s and over
the last half of each run (the steady state), the consumer's wait, threads (decode + fetch), reads in flight, the memory the settings hold (batches
in flight and kept ready, as the tuner counts them, the same formula for every row), the ratio
autotune/grid-best, and the time autotune took to reach 95% of the grid-best rate (in ``d``: the
wait target) over a 2 s sliding window. With hogs, also how much of the cores they got.

Run:  python benchmarks/loader/autotune.py [--scenarios abcdefg] [--seconds 6] [--tune-seconds 20] [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stoker import Loader
from stoker.bench import image_folder, require_optimized_core
from stoker.loader import Reads, Throughput
from stoker.ops import ImageTransform
from stoker.ops.batch import allocate_batch
from stoker.storage import S3Storage, Storage, open_storage

BATCH = 32
TRANSFORM = ImageTransform(random_resized_crop=224, flip_probability=0.5, layout="CHW")
WAIT_TARGET = 0.02
FIRST_SECONDS = 5.0  # the start, reported apart from the steady state


@dataclass
class Run:
    """One loader run: what it delivered and what its settings held."""

    label: str
    rate: float  # images/s over the last half
    first_rate: float  # images/s over the first 5 s
    wait: float  # the consumer's wait share over the last half
    threads: int
    requests: int  # batches of requests in flight at most (network storage), else 0
    memory_mb: float
    converged_s: float | None = None
    moves: int = 0
    backed_off_s: float | None = None  # seconds from the hog's start to the tuner's back-off


def measure(loader: Loader, seconds: float, step: float, *, target: Callable[[float, float], bool] | None = None) -> Run:
    """Iterate ``loader`` epoch after epoch for ``seconds``, sleeping ``step`` per batch; rate and
    wait over the last half, and (with ``target``) when a 2 s sliding window first met it."""
    arrivals: list[tuple[float, float]] = []  # (time, seconds waited for this batch)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        batches = iter(loader)
        while True:
            asked = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                break
            now = time.perf_counter()
            arrivals.append((now - started, now - asked))
            del batch
            if step:
                time.sleep(step)
            if now - started >= seconds:
                break
        if hasattr(batches, "close"):
            batches.close()
    half = [entry for entry in arrivals if entry[0] >= seconds / 2]
    span = max(half[-1][0] - seconds / 2, 1e-9) if half else seconds / 2
    converged = None
    if target is not None:
        for index, (moment, _) in enumerate(arrivals):
            window = [entry for entry in arrivals[index:] if entry[0] <= moment + 2.0]
            if moment + 2.0 > arrivals[-1][0]:
                break
            if target(len(window) * BATCH / 2.0, sum(waited for _, waited in window) / 2.0):
                converged = moment + 2.0
                break
    fetched = loader._assembler.bytes_fetched / max(loader._assembler.batches_fetched, 1)
    decoded = allocate_batch(TRANSFORM, BATCH).nbytes
    remote = loader.sample_prefetch
    memory = (loader.decode_concurrency + loader.prefetch) * decoded + loader.fetch_concurrency * fetched
    stats = loader.stats()
    first = [entry for entry in arrivals if entry[0] < FIRST_SECONDS]
    return Run(
        label="",
        rate=len(half) * BATCH / span,
        first_rate=len(first) * BATCH / min(FIRST_SECONDS, seconds),
        wait=min(1.0, sum(waited for _, waited in half) / span),
        threads=loader.decode_concurrency + (0 if remote else loader.fetch_concurrency),
        requests=loader.fetch_concurrency if remote else 0,
        memory_mb=memory / 1e6,
        converged_s=converged,
        moves=len(stats.tuning) if stats is not None else 0,
    )


@dataclass
class Scenario:
    name: str
    title: str
    grid: list[dict[str, int]]
    step: float = 0.0
    remote: bool = False
    hog_at: float | None = None  # share of a run after which the hogs start
    hogs: int = 1  # processes spinning, one core each


SCENARIOS = {
    "a": Scenario("a", "local JPEGs, compute-bound", [{"decode": d, "fetch": f} for d in (1, 2, 3, 4) for f in (1, 4)]),
    "b": Scenario("b", "S3 at 50 ms", [{"decode": 2, "fetch": r} for r in (2, 4, 8, 16, 32)], remote=True),
    "c": Scenario("c", "S3 at 150 ms, heavy tail", [{"decode": 2, "fetch": r} for r in (4, 8, 16, 32, 64)], remote=True),
    "d": Scenario(
        "d",
        "local, 30 ms training step",
        [{"decode": d, "fetch": f, "prefetch": p} for d in (1, 2) for f in (1, 4) for p in (1, 2)],
        step=0.03,
    ),
    "e": Scenario(
        "e", "local, 30 ms training step, CPU hog from a third in", [{"decode": d, "fetch": 1} for d in (1, 2, 4)], step=0.03, hog_at=1 / 3
    ),
    "f": Scenario("f", "local, a hog on one core from the start", [{"decode": d, "fetch": 1} for d in (1, 2, 3, 4, 6)], hog_at=0.0),
    "g": Scenario(
        "g", "local, a hog on every core from the start", [{"decode": d, "fetch": 1} for d in (1, 2, 3, 4, 6)], hog_at=0.0, hogs=0
    ),
}


@contextmanager
def cpu_hog(after: float, count: int = 1) -> Iterator[list[float]]:
    """``count`` other processes, each spinning on a core from ``after`` seconds on (0: one per
    core); yields [their CPU seconds, their wall seconds each], filled in when they end."""
    code = f"import time\ntime.sleep({after})\nwhile True:\n    pass\n"
    processes = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count or len(os.sched_getaffinity(0)))]
    started = time.perf_counter()
    result: list[float] = []
    try:
        yield result
    finally:
        cpu = 0.0
        for process in processes:
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            process.kill()
            process.wait()
        result.extend([cpu, max(time.perf_counter() - started - after, 1e-9)])


def run_scenario(
    scenario: Scenario, open_store: Callable[[], AbstractContextManager[Storage]], seconds: float, tune_seconds: float
) -> list[Run]:
    runs: list[Run] = []
    for config in scenario.grid:
        hog = cpu_hog(0.0, scenario.hogs) if scenario.hog_at is not None else nullcontext([])
        with open_store() as storage, hog as hog_share:
            loader = Loader(
                storage,
                batch_size=BATCH,
                transform=TRANSFORM,
                reads=Reads(fetch_concurrency=config["fetch"]),
                throughput=Throughput(decode_concurrency=config["decode"], prefetch=config.get("prefetch", 2), autotune=False),
            )
            run = measure(loader, seconds, scenario.step)
        run.label = " ".join(f"{name} {value}" for name, value in config.items())
        if hog_share:
            run.label += f" (hogs got {hog_share[0] / hog_share[1]:.2f} cores)"
        runs.append(run)
        print(
            f"  {scenario.name} {run.label:<44} {run.first_rate:>7.0f} img/s first {FIRST_SECONDS:g} s, {run.rate:>7.0f} steady, "
            f"wait {run.wait:>5.1%}",
            file=sys.stderr,
            flush=True,
        )
    best = pick_best(scenario, runs)

    def reached(rate: float, wait: float) -> bool:
        return wait <= WAIT_TARGET if scenario.step else rate >= 0.95 * best.rate

    hog = cpu_hog(tune_seconds * scenario.hog_at, scenario.hogs) if scenario.hog_at is not None else nullcontext([])
    with open_store() as storage, hog as hog_share:
        loader = Loader(storage, batch_size=BATCH, transform=TRANSFORM)
        tuned = measure(loader, tune_seconds, scenario.step, target=reached)
    tuned.label = "autotune from defaults"
    if hog_share:
        tuned.label += f" (hogs got {hog_share[0] / hog_share[1]:.2f} cores once started)"
    stats = loader.stats()
    for move in stats.tuning if stats is not None else []:
        print(f"    {move.describe()}")
        if scenario.hog_at is not None and tuned.backed_off_s is None and move.reason.startswith("other processes"):
            tuned.backed_off_s = move.seconds - tune_seconds * scenario.hog_at
    runs.append(tuned)
    return runs


def pick_best(scenario: Scenario, runs: list[Run]) -> Run:
    """The grid's best: the fastest (within 2%, the cheapest), or in ``d`` the cheapest that meets
    the wait target."""
    if scenario.step:
        meeting = [run for run in runs if run.wait <= WAIT_TARGET] or runs
        return min(meeting, key=lambda run: (run.threads, run.memory_mb, -run.rate))
    fastest = max(run.rate for run in runs)
    return min((run for run in runs if run.rate >= 0.98 * fastest), key=lambda run: (run.threads, run.requests, run.memory_mb))


def report(scenario: Scenario, runs: list[Run]) -> None:
    best = pick_best(scenario, runs[:-1])
    tuned = runs[-1]
    print(f"\n({scenario.name}) {scenario.title}")
    print(f"| setting | images/s, first {FIRST_SECONDS:g} s | images/s, steady | wait | threads | reads in flight | memory MB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for run in runs:
        mark = " **grid best**" if run is best else ""
        requests = f"{run.requests} x {BATCH}" if run.requests else "-"
        print(
            f"| {run.label}{mark} | {run.first_rate:,.0f} | {run.rate:,.0f} | {run.wait:.1%} | {run.threads} | {requests} | {run.memory_mb:.0f} |"
        )
    converged = f"{tuned.converged_s:.1f} s" if tuned.converged_s is not None else "not within the run"
    goal = "the 2% wait target" if scenario.step else "95% of the grid-best rate"
    print(
        f"autotune / grid best: {tuned.first_rate / best.first_rate:.2f}x images/s over the first {FIRST_SECONDS:g} s, "
        f"{tuned.rate / best.rate:.2f}x steady, threads {tuned.threads} vs {best.threads}, "
        f"memory {tuned.memory_mb:.0f} vs {best.memory_mb:.0f} MB; reached {goal} at {converged}; {tuned.moves} moves"
    )
    if scenario.hog_at is not None and scenario.hog_at > 0:
        after = f"{tuned.backed_off_s:.1f} s after the hog started" if tuned.backed_off_s is not None else "never"
        print(f"backed off to the cores the hog left: {after}")


@contextmanager
def local(root: Path) -> Iterator[Storage]:
    with open_storage(root) as storage:
        yield storage


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default="abcdefg", help="letters of the scenarios to run (default abcde)")
    parser.add_argument("--images", type=int, default=6000)
    parser.add_argument("--seconds", type=float, default=6.0, help="each fixed configuration")
    parser.add_argument("--tune-seconds", type=float, default=20.0, help="the autotuned run")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 600 images, 1.5 s and 4 s, the first two settings")
    args = parser.parse_args()
    if args.quick:
        args.images, args.seconds, args.tune_seconds = 600, 1.5, 4.0
    root = image_folder(args.images, 320, 240, progress=True)
    print(f"{args.images} JPEGs of 320x240; batches of {BATCH}; {os.cpu_count()} cores", flush=True)
    needs_s3 = any(SCENARIOS[letter].remote for letter in args.scenarios)
    servers: Any = nullcontext(None)
    if needs_s3:
        from stoker_testbed.servers.s3_server import S3Server

        servers = S3Server()
    with servers as s3:
        if s3 is not None:
            from stoker.ingest import upload_to_s3
            from stoker_testbed.servers.proxy_process import ProxyProcess

            s3.create_bucket("tune")
            with open_storage(root) as source:
                upload_to_s3(source, "s3://tune/images", progress=False, **s3.options())
        for letter in args.scenarios:
            scenario = SCENARIOS[letter]
            if args.quick:
                scenario.grid = scenario.grid[:2]
            if scenario.remote:
                slow = {"slow_fraction": 0.1, "slow_factor": 10.0, "seed": 1} if letter == "c" else {}
                delay = 0.075 if letter == "c" else 0.025

                @contextmanager
                def through_proxy(delay: float = delay, slow: dict[str, Any] = slow) -> Iterator[Storage]:
                    with ProxyProcess(s3.port, delay=delay, **slow) as proxy:
                        with S3Storage("s3://tune/images", **{**s3.options(), "endpoint": f"http://127.0.0.1:{proxy.port}"}) as storage:
                            yield storage

                opener: Callable[[], AbstractContextManager[Storage]] = through_proxy
            else:
                opener = lambda: local(root)  # noqa: E731
            report(scenario, run_scenario(scenario, opener, args.seconds, args.tune_seconds))


if __name__ == "__main__":
    main()
