"""A short multi-process JAX training loop over stoker, as a user would write one: each process's
batches assembled into a global sharded array (`global_batches`), a jitted step over it, and an
Orbax `CheckpointManager` saving the parameters and the Loader every 4 steps. CPU, gloo.

    python tests/jax/jax_job.py WORK --process I --processes N --port P --attempt A [--kill-at STEP] [--resume STEP]

Each process appends ``{"step", "epoch", "process", "keys", "local_sum", "global_sum", "rows"}``
per step to ``WORK/log-<attempt>-<process>.jsonl`` (padding left out of the keys).
``--kill-at STEP``: process 0 kills every process of the job (SIGKILL; each wrote its pid to
``WORK/pid-<attempt>-<process>``) and then itself, at that step.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
from pathlib import Path

import jax
import numpy as np
from PIL import Image

SAMPLES = 203


def image(index: int) -> bytes:
    """An 8x8 PNG whose pixels all hold ``index % 251``: its sum names it."""
    out = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), index % 251, np.uint8)).save(out, format="PNG")
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--process", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--kill-at", type=int, default=-1)
    parser.add_argument("--resume", type=int, default=None)
    args = parser.parse_args()
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{args.port}", num_processes=args.processes, process_id=args.process)

    import jax.numpy as jnp
    import orbax.checkpoint as ocp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from stoker import Loader
    from stoker.jax import LoaderRestore, LoaderSave, global_batches
    from stoker.loader import Sampling
    from stoker.ops import ImageTransform
    from stoker.storage import MemoryStorage

    storage = MemoryStorage({f"s{index:04d}": image(index) for index in range(SAMPLES)})
    sampling = Sampling(shuffle="uniform", seed=5, in_order=True, rank=jax.process_index(), world_size=jax.process_count())
    loader = Loader(storage, batch_size=6, transform=ImageTransform(resize=(8, 8)), sampling=sampling)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    params = jax.device_put({"w": jnp.zeros(())}, NamedSharding(mesh, PartitionSpec()))  # replicated
    options = ocp.CheckpointManagerOptions(save_interval_steps=4, enable_async_checkpointing=False)
    manager = ocp.CheckpointManager(args.work / "checkpoints", options=options)
    step = 0
    if args.resume is not None:
        restored = manager.restore(
            args.resume, args=ocp.args.Composite(params=ocp.args.StandardRestore(params), loader=LoaderRestore(loader))
        )
        params, step = restored["params"], args.resume

    @jax.jit
    def train_step(params: dict[str, jax.Array], data: jax.Array) -> tuple[dict[str, jax.Array], jax.Array]:
        pixels = data.astype(jnp.float32)
        gradient = jax.grad(lambda p: jnp.mean((pixels * p["w"] - 1.0) ** 2))(params)
        return {"w": params["w"] - 1e-6 * gradient["w"]}, pixels.sum()

    (args.work / f"pid-{args.attempt}-{args.process}").write_text(str(os.getpid()))
    log = args.work / f"log-{args.attempt}-{args.process}.jsonl"
    for epoch in range(loader.sampler.epoch, 2):
        if loader.sampler.epoch != epoch:
            loader.set_epoch(epoch)
        for batch in global_batches(loader, sharding):
            if step == args.kill_at and args.process == 0:
                for other in args.work.glob(f"pid-{args.attempt}-*"):
                    if int(other.read_text()) != os.getpid():
                        os.kill(int(other.read_text()), signal.SIGKILL)
                os.kill(os.getpid(), signal.SIGKILL)
            params, global_sum = train_step(params, batch.data)
            local = batch.local
            record = {
                "step": step,
                "epoch": epoch,
                "process": args.process,
                "keys": [key for key, padding in zip(local.keys, local.padding) if not padding],
                "local_sum": int(local.data.astype(np.int64).sum()),
                "global_sum": int(global_sum),
                "rows": batch.data.shape[0],
            }
            with open(log, "a") as file:
                file.write(json.dumps(record) + "\n")
            step += 1
            manager.save(step, args=ocp.args.Composite(params=ocp.args.StandardSave(params), loader=LoaderSave(loader)))
    manager.close()


if __name__ == "__main__":
    main()
