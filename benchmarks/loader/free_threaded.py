"""stoker on free-threaded CPython (3.14t) against a GIL build, each configuration in its own process.

The SPDL paper's last experiment (section 7, Table 3): a thread-based loader whose heavy work
releases the GIL runs on a free-threaded interpreter unchanged, and a stage of the user's own
Python code, held to one core by the GIL, scales with threads there. Two configurations:

  native path       the Loader over an ImageFolder into uint8 batches (JPEG decode, Resize(256),
                    CenterCrop(224), batches of 32), `stoker bench`'s own method, on the GIL build
                    and on 3.14t                                  [goal: 3.14t >= 0.95x the GIL build]
  Python transform  a pipeline whose stage runs the user's pure-Python function on each item, with
                    1 and 2 threads, on both builds; SPDL's pipeline with the same stage on 3.14t
                    [goals on 3.14t: 2 threads >= 1.8x 1 thread; stoker >= 1.2x SPDL]

Each configuration runs ``--repeats`` times, interleaved with the others (the machine is shared and
noisy); the table gives the median. An interpreter or a peer that is not there is named and left
out, never shown as 0.

Run:  python benchmarks/loader/free_threaded.py [--gil PYTHON] [--free-threaded PYTHON]
          [--count 1000] [--items 4000] [--work 20000] [--repeats 3] [--json F]
(defaults: this Python, and .venv-freethreaded/bin/python, which make test-free-threaded makes)

The fair GIL side is the same CPython source built with the GIL, with the abi3 wheel:
  gil=$(bash packaging/free_threaded_python.sh --gil)       # CPython 3.14.7, GIL on (minutes, once)
  .venv/bin/uv venv --python "$gil" .venv-gil && .venv/bin/uv pip install --python .venv-gil/bin/python \
      dist/stoker-*-abi3-*.whl pillow -e testbed
  .venv/bin/uv pip install --python .venv-freethreaded/bin/python "spdl==0.8.*"   # the peer, on 3.14t
  .venv/bin/python benchmarks/loader/free_threaded.py --gil .venv-gil/bin/python
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


WORK = 20_000  # the transform's loop length (--work): about 1 ms a item on this machine kind


def user_transform(item: int) -> int:
    """A user's own per-item Python work (``WORK`` steps of bytecode, no call that lets the GIL
    go): what a GIL build runs on one core however many threads the stage has."""
    total = item
    for value in range(WORK):
        total = (total * 31 + value) % 1_000_003
    return total


def run_stoker(items: int, threads: int) -> int:
    from stoker.pipeline import PipelineBuilder

    pipeline = PipelineBuilder().add_source(range(items)).pipe(user_transform, concurrency=threads).add_sink(8).build()
    return sum(1 for _ in pipeline)


def run_spdl(items: int, threads: int) -> int:
    from spdl.pipeline import PipelineBuilder as SpdlBuilder

    pipeline = SpdlBuilder().add_source(range(items)).pipe(user_transform, concurrency=threads).add_sink(8).build(num_threads=threads)
    count = 0
    with pipeline.auto_stop():
        for _ in pipeline:
            count += 1
    return count


def child(engine: str, items: int, threads: int, work: int) -> None:
    """One configuration in this process: items/s of the Python-transform pipeline."""
    global WORK
    WORK = work
    run = {"stoker": run_stoker, "spdl": run_spdl}[engine]
    started = time.perf_counter()
    count = run(items, threads)
    seconds = time.perf_counter() - started
    assert count == items, f"{engine} delivered {count} of {items} items"
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(json.dumps({"items_per_second": items / seconds, "gil": gil}))


def describe(interpreter: str) -> str | None:
    """``3.14.7 free-threaded`` or ``3.11.7 GIL``; None where it cannot run stoker."""
    probe = "import sys, stoker._native; print(sys.version.split()[0], 'GIL' if getattr(sys, '_is_gil_enabled', lambda: True)() else 'free-threaded')"
    try:
        done = subprocess.run([interpreter, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    described = done.stdout.strip()
    return described if done.returncode == 0 and described.endswith(("GIL", "free-threaded")) else None


def has_module(interpreter: str, module: str) -> bool:
    done = subprocess.run([interpreter, "-c", f"import {module}"], capture_output=True, timeout=120)
    return done.returncode == 0


def transform_rate(interpreter: str, engine: str, items: int, threads: int, work: int) -> float:
    command = [interpreter, __file__, "--child", engine, str(items), str(threads), str(work)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{engine} on {interpreter}: {done.stderr.strip().splitlines()[-1:]}")
    return float(json.loads(done.stdout.splitlines()[-1])["items_per_second"])


def main() -> None:
    from stoker.cli import whole_number

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", nargs=4, metavar=("ENGINE", "ITEMS", "THREADS", "WORK"), help=argparse.SUPPRESS)
    parser.add_argument("--gil", default=sys.executable, help="a GIL build with stoker installed (default: this Python)")
    parser.add_argument("--free-threaded", default=str(ROOT / ".venv-freethreaded" / "bin" / "python"), help="a 3.14t build with stoker")
    parser.add_argument("--count", type=whole_number(1, 10**7), default=1000, help="images of the native path (500x375 JPEGs)")
    parser.add_argument("--items", type=whole_number(1, 10**9), default=4000, help="items of the Python-transform pipeline")
    parser.add_argument(
        "--work",
        type=whole_number(1, 10**9),
        default=WORK,
        help="loop steps of the transform per item (default about 1 ms; 3000, about 0.14 ms, shows the engine's own per-item cost)",
    )
    parser.add_argument("--repeats", type=whole_number(1, 1000), default=3)
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()
    if args.json is not None and not args.json.parent.is_dir():
        parser.error(f"--json {args.json}: no folder {args.json.parent}")
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]), int(args.child[3]))
        return

    from stoker.bench import image_folder, run_in_subprocess

    builds = {"GIL": args.gil, "free-threaded": args.free_threaded}
    versions: dict[str, str] = {}
    for build, interpreter in builds.items():
        described = describe(interpreter)
        if described is None:
            print(f"  not measured: the {build} build ({interpreter}: no such interpreter with stoker)", file=sys.stderr)
        elif not described.endswith(build):  # a GIL interpreter given as --free-threaded, or the reverse
            print(f"  not measured: the {build} build ({interpreter} is {described})", file=sys.stderr)
        else:
            versions[build] = described
    if not versions:
        sys.exit("no interpreter to measure: give --gil and --free-threaded ones with stoker installed")
    images = Path(image_folder(args.count))
    runs: dict[str, tuple[str, Any]] = {}  # label -> (build, how to measure once)
    for build in versions:
        interpreter = builds[build]
        runs[f"native path, {build}"] = (
            build,
            lambda i=interpreter: run_in_subprocess("stoker.Loader", images, interpreter=i)["images_per_second"],
        )
        for threads in (1, 2):
            runs[f"Python transform, stoker, {threads} thread(s), {build}"] = (
                build,
                lambda i=interpreter, t=threads: transform_rate(i, "stoker", args.items, t, args.work),
            )
    if "free-threaded" in versions:
        if has_module(builds["free-threaded"], "spdl.pipeline"):
            runs["Python transform, SPDL, 2 thread(s), free-threaded"] = (
                "free-threaded",
                lambda: transform_rate(builds["free-threaded"], "spdl", args.items, 2, args.work),
            )
        else:
            print("  not compared: SPDL on the free-threaded build (not installed there: pip install spdl)", file=sys.stderr)
    measured: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(args.repeats):
        for label, (_, measure) in runs.items():
            print(f"  {label} ...", file=sys.stderr, flush=True)
            measured[label].append(measure())
    rates = {label: statistics.median(values) for label, values in measured.items()}

    print(f"\nfree-threaded against GIL, median of {args.repeats} runs each in its own process")
    for build, version in versions.items():
        print(f"  {build:<14} {version}  ({builds[build]})")
    print(f"  {'configuration':<58}{'rate':>12}")
    for label, rate in rates.items():
        unit = "images/s" if label.startswith("native") else "items/s"
        print(f"  {label:<58}{rate:>12.0f} {unit}")
    ratios = ratios_of(rates)
    for name, (value, goal) in ratios.items():
        print(f"  {name:<58}{value:>11.2f}x  " + (f"(goal >= {goal}x)" if goal else "(for contrast: threads take turns)"))
    if args.json:
        args.json.write_text(json.dumps({"versions": versions, "rates": rates, "ratios": ratios}, indent=2))


def ratios_of(rates: dict[str, float]) -> dict[str, tuple[float, float | None]]:
    """The issue's three ratios, each with its goal, where both of its rates were measured."""
    pairs: dict[str, tuple[str, str, float | None]] = {
        "native path: free-threaded / GIL": ("native path, free-threaded", "native path, GIL", 0.95),
        "Python transform on 3.14t: 2 threads / 1 thread": (
            "Python transform, stoker, 2 thread(s), free-threaded",
            "Python transform, stoker, 1 thread(s), free-threaded",
            1.8,
        ),
        "Python transform on 3.14t, 2 threads: stoker / SPDL": (
            "Python transform, stoker, 2 thread(s), free-threaded",
            "Python transform, SPDL, 2 thread(s), free-threaded",
            1.2,
        ),
        "Python transform on the GIL build: 2 threads / 1 thread": (
            "Python transform, stoker, 2 thread(s), GIL",
            "Python transform, stoker, 1 thread(s), GIL",
            None,
        ),
    }
    return {name: (rates[top] / rates[bottom], goal) for name, (top, bottom, goal) in pairs.items() if top in rates and bottom in rates}


if __name__ == "__main__":
    main()
