"""`TokenLoader`: tokenized documents -> packed batches, shuffled per epoch, sharded by rank,
exactly resumable with the packer's remainder and window in its state."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from ..distributed import discover_world
from ..ops.packing import PackedBatch, SequencePacker
from ..sampling import Sampler

__all__ = ["TokenLoader"]


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
        context_length, batch_size: Row length and rows per batch.
        shuffle, seed, rank, world_size: As for `Sampler` (ranks get equal document counts;
            padding documents are not repeated here: ``pad=False``); left out, rank and world
            size are found as for `Loader`.
        read_ahead: Documents read per storage call.
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
        **packer_options: Any,
    ) -> None:
        self.source = source
        self.context_length = context_length
        self.batch_size = batch_size
        self.read_ahead = read_ahead
        self.packer_options = packer_options
        rank, world_size, _ = discover_world(rank, world_size)
        self.sampler = Sampler(len(source), shuffle=shuffle, seed=seed, rank=rank, world_size=world_size, pad=False)
        self._new_packer()

    def _new_packer(self) -> None:
        self.packer = SequencePacker(self.context_length, self.batch_size, **self.packer_options)
        self._plan = self.sampler.plan_arrays()[1]

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: a new document order and an empty packer."""
        self.sampler.set_epoch(epoch)
        self._new_packer()

    def __iter__(self) -> Iterator[PackedBatch]:
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
