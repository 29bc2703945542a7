"""Host-to-device transfer on a CUDA GPU (run it on the device machine when one is lent).

1. Pinned vs pageable host memory: GB/s of a 32 x 3 x 224 x 224 float32 batch copy.
2. Copy/compute overlap (Data Journey section 6): a matmul loop standing in for a training step,
   fed (a) synchronously from pageable memory and (b) through `stoker.device.to_device` from
   pinned buffers on a side stream; step time and data-wait % of each.
Without CUDA it says so and measures nothing.

Run:  python benchmarks/loader/gpu_transfer.py [--steps 200]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from stoker.bench import require_optimized_core


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing measured")
        return
    if not torch.cuda.is_available():
        print("no CUDA device here: nothing measured (run this on the device machine)")
        return
    from stoker.device import to_device
    from stoker.loader import Batch
    from stoker.observe import DataWaitMeter

    shape = (32, 3, 224, 224)
    pageable = torch.randn(shape)
    pinned = torch.randn(shape).pin_memory()
    gigabytes = pageable.numel() * 4 / 1e9
    for name, host in (("pageable", pageable), ("pinned", pinned)):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(50):
            host.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        print(f"{name:>9}: {50 * gigabytes / (time.perf_counter() - started):6.1f} GB/s host-to-device")

    weights = torch.randn(4096, 4096, device="cuda")

    def step(data: torch.Tensor) -> None:
        activation = data.reshape(32, -1)[:, :4096]
        for _ in range(8):
            activation = activation @ weights
        torch.cuda.synchronize()

    def host_batches(memory: torch.Tensor):  # type: ignore[no-untyped-def]
        for index in range(args.steps):
            yield Batch(memory.numpy(), np.zeros(32, np.int64), [""] * 32, np.ones(32, bool), np.zeros(32, bool), np.arange(32), index)

    synchronous = DataWaitMeter(batch.data for batch in host_batches(pageable))
    started = time.perf_counter()
    for data in synchronous:
        step(torch.from_numpy(data).to("cuda"))
    plain_seconds = time.perf_counter() - started
    overlapped = DataWaitMeter(to_device(host_batches(pinned), "cuda"))
    started = time.perf_counter()
    for moved in overlapped:
        step(moved.data)
    stoker_seconds = time.perf_counter() - started
    print(f"synchronous pageable copies: {plain_seconds / args.steps * 1e3:.2f} ms/step, {synchronous.report().verdict}")
    print(f"stoker side-stream, pinned:  {stoker_seconds / args.steps * 1e3:.2f} ms/step, {overlapped.report().verdict}")


if __name__ == "__main__":
    main()
