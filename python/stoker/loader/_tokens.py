"""`TokenLoader`: tokenized documents -> packed batches, shuffled per epoch, sharded by rank,
exactly resumable with the packer's remainder and window in its state."""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from ..distributed import StepAgreement, discover_world, process_group
from ..ops.packing import PackedBatch, SequencePacker
from ..sampling import Sampler

__all__ = ["TokenLoader"]

_logger = logging.getLogger("stoker.loader")


class TokenSource(Protocol):
    """What `stoker.storage.open_tokens` returns."""

    def __len__(self) -> int: ...

    def documents(self, indices: Sequence[int]) -> list[np.ndarray]: ...


class TokenLoader:
    """Packed batches of ``batch_size`` rows of ``context_length`` tokens.

    Documents are taken in the sampler's order for this rank (a seeded shuffle per epoch),
    read ``read_ahead`` at a time with coalescing, and packed. A document's id inside the packer
    is its position in this rank's plan, so `state_dict` (documents handed to the packer, plus
    the packer's unfinished rows and window as document pieces) resumes exactly.

    Args:
        source: Tokenized documents (`TokenFile`, `TokenShards`).
        context_length: Tokens per row.
        batch_size: Rows per batch.
        shuffle: Shuffle the documents per epoch, as `Sampler` does (ranks get equal document
            counts; padding documents are not repeated here: ``pad=False``).
        seed: Seeds the shuffle, with the epoch.
        rank: This process's rank; left out, found as for `Loader` (`Sampling`).
        world_size: How many ranks share the documents; left out, found as for `Loader`.
        read_ahead: Documents read per storage call.
        equal_steps: End every rank's epoch at the same step, the first where one rank has no
            batch left (`stoker.distributed.StepAgreement`: one small all-reduce a step), so
            DDP never waits on a step another rank does not take. None (default): on with
            several ranks and an initialized process group (several ranks without one: a
            warning); True: required (an error without a process group); False: off.
        packer_options: Passed to `SequencePacker` (strategy, window, long_documents, ...).
    """

    def __init__(
        self,
        source: TokenSource,
        *,
        context_length: int,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        read_ahead: int = 1024,
        equal_steps: bool | None = None,
        **packer_options: Any,
    ) -> None:
        self.source = source
        self.context_length = context_length
        self.batch_size = batch_size
        self.read_ahead = read_ahead
        self.packer_options = packer_options
        rank, world_size, _ = discover_world(rank, world_size)
        self.sampler = Sampler(len(source), shuffle=shuffle, seed=seed, rank=rank, world_size=world_size, pad=False)
        self._agreement = _step_agreement(equal_steps, world_size)
        self.ended_early = 0  # epochs this rank ended at the agreed last step with batches left
        self._new_packer()

    def _new_packer(self) -> None:
        self.packer = SequencePacker(self.context_length, self.batch_size, **self.packer_options)
        self._plan = self.sampler.plan_arrays()[1]

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: a new document order and an empty packer."""
        self.sampler.set_epoch(epoch)
        self._new_packer()

    def __iter__(self) -> Iterator[PackedBatch]:
        """This rank's packed batches for the epoch; with an agreed last step, only as many as
        every rank has (a batch held back is not delivered: the state is as before it)."""
        if self._agreement is None:
            yield from self._batches()
            return
        batches = self._batches()
        while True:
            before = self.state_dict()
            batch = next(batches, None)
            if not self._agreement.all_have_a_batch(batch is not None):
                break
            assert batch is not None
            yield batch
        if batch is not None:
            batches.close()
            self.load_state_dict(before)  # the held-back batch was never delivered
            self.ended_early += 1
            _logger.warning(
                "rank %d: epoch %d ended at the step all %d ranks agreed on (another rank ran out of documents); "
                "this rank's remaining documents are not delivered this epoch (the state says so: a resume would offer them)",
                self.sampler.rank,
                self.sampler.epoch,
                self.sampler.world_size,
            )

    def _batches(self) -> Generator[PackedBatch, None, None]:
        plan = self._plan
        while self.packer.documents_consumed < len(plan):
            start = self.packer.documents_consumed
            indices = plan[start : start + self.read_ahead].tolist()
            documents = self.source.documents(indices)
            lengths = np.array([len(document) for document in documents], dtype=np.int64)
            tokens = np.concatenate(documents) if documents else np.zeros(0, np.uint32)
            self.packer.add_many(tokens, lengths)
            yield from self.packer.batches()
        yield from self.packer.batches(final=True)

    def state_dict(self) -> dict[str, Any]:
        """Epoch, order and packer state; plain data."""
        return {"version": 1, "sampler": self.sampler.state_dict(), "packer": self.packer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict` (same world size)."""
        if state.get("version") != 1:
            raise ValueError(f"token loader state version {state.get('version')} is not 1")
        self.sampler.load_state_dict(state["sampler"])
        self._new_packer()
        plan = self._plan
        self.packer.load_state_dict(state["packer"], fetch=lambda document: self.source.documents([int(plan[document])])[0])

    @property
    def report(self) -> Any:
        """The packer's efficiency report for this epoch."""
        return self.packer.report


def _step_agreement(equal_steps: bool | None, world_size: int) -> StepAgreement | None:
    """The vote that ends every rank's epoch at the same step, where one is needed and possible.

    Raises:
        RuntimeError: ``equal_steps=True`` with several ranks and no process group.
    """
    if world_size == 1 or equal_steps is False:
        return None
    if equal_steps is None and process_group() is None:
        _logger.warning(
            "TokenLoader: %d ranks and no torch.distributed process group: ranks may yield different numbers of batches "
            "(documents differ in length); under DDP initialize the process group before the loader, so they end together",
            world_size,
        )
        return None
    return StepAgreement()
