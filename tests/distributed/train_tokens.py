"""`TokenLoader` under `torchrun` (gloo) with documents of very uneven length: each rank packs
its own documents, so ranks hold different numbers of batches; with the process group there the
loader ends every rank's epoch at the same step. An all-reduce per step stands in for DDP's
gradient sync (a rank with a step more would wait in it forever).

    torchrun --standalone --nproc-per-node=3 tests/distributed/train_tokens.py TOKENS OUT

Each rank writes its step count to ``OUT/steps-<rank>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

from stoker import TokenLoader
from stoker.storage import open_tokens


def main() -> None:
    tokens, out = Path(sys.argv[1]), Path(sys.argv[2])
    dist.init_process_group("gloo")
    loader = TokenLoader(open_tokens(tokens, dtype="uint32"), context_length=64, batch_size=4, seed=2)
    steps = 0
    for _batch in loader:
        dist.all_reduce(torch.ones(1))
        steps += 1
    (out / f"steps-{dist.get_rank()}").write_text(f"{steps} {loader.ended_early}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
