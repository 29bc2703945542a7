"""How image loading scales with cores: the same ImageFolder into uint8 CHW batches (Resize(256),
CenterCrop(224), batches of 32) with 1, 2, 4, 8 and 16 cores, each method in a process allowed
only those cores (its affinity mask, as ``taskset -c 0-N`` sets it) and sized for them as its
user would: stoker and DALI find the cores themselves (a thread per usable core), PyTorch's
DataLoader gets a worker per core, SPDL a load stage that wide.

Reported: images/s at each core count and the scaling efficiency, images/s over (cores x the
method's own images/s on one core); the goal is stoker within 90% of linear to 16 cores. Core
counts this machine does not have are named as unmeasured, never guessed.

Run:  python benchmarks/images/scaling.py [--count 3000] [--cores 1,2,4,8,16] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from stoker.bench import SCALING, available_peers, image_folder, require_optimized_core, run_in_subprocess


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000, help="images (500x375 JPEGs, ImageNet-like)")
    parser.add_argument("--cores", default="1,2,4,8,16", help="core counts, comma-separated")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    here = len(os.sched_getaffinity(0))
    wanted = [int(count) for count in args.cores.split(",")]
    counts = [count for count in wanted if count <= here]
    root = Path(image_folder(args.count))
    rates: dict[str, dict[int, float]] = {}
    for name, missing in available_peers(SCALING).items():
        if missing:
            print(f"  not compared: {name} ({missing})")
            continue
        rates[name] = {}
        for cores in counts:
            print(f"  {name} on {cores} core(s) ...", file=sys.stderr, flush=True)
            rates[name][cores] = run_in_subprocess(name, root, "uint8", cores=cores)["images_per_second"]
    print(f"\nimages/s (scaling efficiency against the method's own 1-core rate x cores), {here} cores here")
    print(f"  {'method':<40}" + "".join(f"{f'{cores} core' + ('s' if cores > 1 else ''):>18}" for cores in counts))
    for name, by_cores in rates.items():
        one = by_cores.get(1)
        cells = [f"{rate:8.0f} ({rate / (cores * one):4.0%})" if one else f"{rate:8.0f}" for cores, rate in by_cores.items()]
        print(f"  {name:<40}" + "".join(f"{cell:>18}" for cell in cells))
    unmeasured = [count for count in wanted if count > here]
    if unmeasured:
        print(f"  unmeasured: {', '.join(map(str, unmeasured))} cores (this machine lets this process use {here})")
    if args.json:
        result: dict[str, Any] = {"cores_here": here, "images_per_second": rates, "unmeasured": unmeasured}
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
