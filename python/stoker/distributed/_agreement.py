"""An agreed last step: ranks whose loaders can yield different numbers of batches (a
`TokenLoader` packs each rank's documents, and documents differ in length) end the epoch together,
at the first step where one of them has nothing left. Without it, the rank with more batches
waits forever in the gradient all-reduce of a step the others never take (the DDP hang).

Each step costs one all-reduce of one integer over a gloo group (the default group if it is
gloo, else one made for this: the loader's vote never touches the accelerator's stream).
"""

from __future__ import annotations

from typing import Any

from ._ranks import process_group

__all__ = ["StepAgreement"]


class StepAgreement:
    """Each rank says whether it has a batch for the next step; all go on only if all have one.

    Made on every rank in the same order (it may create a process group: a collective call).

    Raises:
        RuntimeError: No initialized ``torch.distributed`` process group to vote through.
    """

    def __init__(self) -> None:
        distributed = process_group()
        if distributed is None:
            raise RuntimeError(
                "an agreed last step needs an initialized torch.distributed process group (call "
                "torch.distributed.init_process_group first, or pass equal_steps=False)"
            )
        import torch

        self._distributed = distributed
        self._group: Any = None if distributed.get_backend() == "gloo" else distributed.new_group(backend="gloo")
        self._vote = torch.zeros(1, dtype=torch.int32)
        self.steps = 0  # steps agreed on so far

    def all_have_a_batch(self, mine: bool) -> bool:
        """True if every rank has a batch for the next step (a collective call on every rank)."""
        self._vote.fill_(1 if mine else 0)
        self._distributed.all_reduce(self._vote, op=self._distributed.ReduceOp.MIN, group=self._group)
        agreed = bool(self._vote.item())
        self.steps += agreed
        return agreed
