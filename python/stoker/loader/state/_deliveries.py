"""What a Loader delivered: the sampler's record, the epoch's delivery digest, the step count and
the provenance ledger, kept together under one lock so a checkpoint never falls between them.

That lock (`Deliveries.lock`, the record lock) is reentrant: the Loader also holds it across each
change that moves the record and the digest together (a new epoch, a loaded state, an exclusion,
new mixture weights), and `LoaderState.state_dict` holds it while it writes the state, so a state
taken from another thread is of one moment, never of a change half made.

A batch counts as delivered when the Loader yields it, unless a read-ahead wrapper holds
deliveries (`hold`): then it counts once the wrapper hands it on (`release`), and batches still
held when the wrapper stops were never delivered (a continued epoch reads them again).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ...observe import ProvenanceLedger
from ...sampling import Sampler
from .._batch import Batch
from ._fingerprint import DeliveryDigest

__all__ = ["Deliveries"]


class Deliveries:
    """The delivery record of one Loader.

    Args:
        sampler: The Loader's sampler (told what was delivered).
        seed_of: A sample's augmentation seed from its position (for the ledger).
    """

    def __init__(self, sampler: Sampler, seed_of: Callable[[int], int]) -> None:
        self.sampler = sampler
        self.seed_of = seed_of
        self.lock = threading.RLock()  # the record lock (see the module notes)
        self.step = 0  # batches this rank delivered since the run began (carried by the state)
        self.digest = DeliveryDigest(epoch=sampler.epoch)
        # Positions left out on purpose (`exclude`): in `digest` too, so the epoch's proof
        # accounts for them, and here, so it can say how many were left out.
        self.excluded = DeliveryDigest(epoch=sampler.epoch)
        self.ledger: ProvenanceLedger | None = None
        self._holders: list[int | None] = []  # each holder's declared read-ahead (see `hold`)
        self._held: dict[int, tuple[Batch, int]] = {}  # id(batch) -> (batch, epoch)

    @property
    def next_step(self) -> int:
        """The step of the next batch the Loader yields: those delivered and those a read-ahead
        wrapper holds (each will be a step once handed on)."""
        with self.lock:
            return self.step + len(self._held)

    @property
    def held(self) -> int:
        """Batches a read-ahead wrapper holds (yielded, not handed on yet)."""
        with self.lock:
            return len(self._held)

    @property
    def holding(self) -> bool:
        """Whether a read-ahead wrapper holds deliveries now (`hold`)."""
        with self.lock:
            return bool(self._holders)

    def slot_beyond_reach(self, batch_size: int) -> int | None:
        """The first slot of this rank's plan that no batch yielded so far, nor any a read-ahead
        wrapper yields before the training loop's next step, can hold: the slots the loop has
        (its steps of this epoch, batches delivered in order) and ``batch_size`` more for each
        batch the wrapper may read ahead. The same on every rank at the same step of the loop.
        None: a wrapper holds deliveries without saying how far it reads ahead."""
        with self.lock:
            if any(ahead is None for ahead in self._holders):
                return None
            ahead = max((ahead for ahead in self._holders if ahead is not None), default=0)
            held = sum(len(batch.positions) for batch, _ in self._held.values())
            return self.sampler.delivered_count - held + ahead * batch_size

    def new_epoch(self, epoch: int) -> None:
        with self.lock:
            self.digest = DeliveryDigest(epoch=epoch)
            self.excluded = DeliveryDigest(epoch=epoch)

    def exclude(self, positions: np.ndarray, padding: np.ndarray) -> None:
        """Leave the samples at ``positions`` out of this epoch: recorded as done, never read
        (``padding`` flags the ones that only pad this rank, as in a batch)."""
        with self.lock:
            self.sampler.mark_delivered(positions, padding)
            real = positions[~padding]
            self.digest.add(real)
            self.excluded.add(real)

    def left_out(self, positions: np.ndarray) -> None:
        """Positions the sampler left out for every rank (`Sampler.leave_out`: cut out by key),
        accounted as excluded by this rank, the one that carries the world's record."""
        with self.lock:
            self.digest.add(positions)
            self.excluded.add(positions)

    def delivered(self, batch: Batch) -> None:
        """The Loader yields ``batch``: delivered now, or once released while deliveries are held."""
        with self.lock:
            if not self._holders:
                # Recorded first: a ledger that cannot be written stops the run with this batch
                # not delivered (a resume reads it again), never delivered without its record.
                self._record(batch, self.sampler.epoch)
            self.sampler.mark_delivered(batch.positions, batch.padding)
            self.digest.add(batch.positions[~batch.padding])
            if self._holders:
                self._held[id(batch)] = (batch, self.sampler.epoch)

    @contextlib.contextmanager
    def hold(self, ahead: int | None = None) -> Iterator[None]:
        """See `Loader.hold_deliveries`."""
        with self.lock:
            self._holders.append(ahead)
        try:
            yield
        finally:
            with self.lock:
                self._holders.remove(ahead)
                if not self._holders:
                    for batch, _ in self._held.values():
                        self.sampler.unmark_delivered(batch.positions, batch.padding)
                        self.digest.remove(batch.positions[~batch.padding])
                    self._held.clear()

    def release(self, batch: Batch) -> None:
        """A held batch reached the training loop; a batch not held is ignored."""
        with self.lock:
            held = self._held.pop(id(batch), None)
            if held is None:
                return
            try:
                self._record(*held)
            except BaseException:  # not recorded, so not delivered: a resume reads it again
                self.sampler.unmark_delivered(batch.positions, batch.padding)
                self.digest.remove(batch.positions[~batch.padding])
                raise

    def _record(self, batch: Batch, epoch: int) -> None:
        """Under the lock: one more step, written to the ledger if one is kept."""
        if self.ledger is not None:
            rows = batch._ledger_rows
            if rows is None:
                rows = self.ledger.prepare(epoch=epoch, batch=batch, seeds=self.seeds(batch))
            self.ledger.write(rows, step=self.step)
        self.step += 1

    def seeds(self, batch: Batch) -> list[int]:
        """Each sample's augmentation seed."""
        return [self.seed_of(position) for position in batch.positions.tolist()]

    def state(self) -> tuple[dict[str, Any], dict[str, int], dict[str, int], int]:
        """(the sampler's state, the delivery digest, the exclusion digest, the step), held
        batches left out."""
        with self.lock:
            held = [(batch.positions, batch.padding) for batch, _ in self._held.values()]
            sampler = self.sampler.state_dict(holding=held)
            digest = DeliveryDigest(**vars(self.digest))
            excluded = self.excluded.state()
            step = self.step
        for positions, padding in held:
            digest.remove(np.asarray(positions)[~np.asarray(padding)])
        return sampler, digest.state(), excluded, step

    def restore(self, digests: Sequence[dict[str, int]], excluded: Sequence[dict[str, int]], *, carried: bool, step: int) -> None:
        """After the sampler loaded a state: the digests it carried (or fresh ones) and the step."""
        with self.lock:
            fresh = DeliveryDigest(epoch=self.sampler.epoch)
            self.digest = DeliveryDigest.from_states(digests) if carried and digests else fresh
            self.excluded = DeliveryDigest.from_states(excluded) if carried and excluded else DeliveryDigest(epoch=self.sampler.epoch)
            self.step = step

    def close(self) -> None:
        """Finish the ledger, if one is kept."""
        if self.ledger is not None:
            self.ledger.close()
