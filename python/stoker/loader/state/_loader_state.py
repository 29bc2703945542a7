"""The Loader's state: what it saves (`state_dict`), what it accepts (`load_state_dict`, refusing
another dataset or configuration) and what it proves (`verify_epoch`). A part of the Loader,
given what it reads (the storage, the sampler, the delivery bookkeeping, the batching) and a
callback for what a loaded state changes outside it (the storage's epoch)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigurationError
from ...ops.batch import transform_description
from ...sampling import Sampler
from ...storage import EpochStorage, FilteredStorage, MixedStorage, Storage
from .._assembly import BatchAssembler, label_array
from .._options import Sampling
from ._deliveries import Deliveries
from ._fingerprint import check_resume, check_state_parts, dataset_digest, fingerprint, verify_deliveries
from ._mixture_schedule import MixtureSchedule
from ._mixture_weights import MixtureWeights

__all__ = ["Batching", "LoaderState"]

_logger = logging.getLogger("stoker.loader")


@dataclass(frozen=True)
class Batching:
    """How a Loader makes batches, as its state's fingerprint records it."""

    batch_size: int
    drop_last: bool
    sampling: Sampling
    transform: Any
    decode: Any
    where: str | None = None  # the filter (`Loader(where=...)`), as written

    def describe_transform(self) -> Any:
        """The transform as plain data, or the decode function's name."""
        return transform_description(self.transform) or getattr(self.decode, "__qualname__", None)


def _digest_of(storage: Storage) -> str:
    """What a storage holds, as a short hash: the storage's own content digest where it keeps one
    (taken from its index, in constant time, and covering the samples' bytes), else a hash of
    every key and label (time in the number of samples, once per Loader)."""
    if isinstance(storage, FilteredStorage):  # what was filtered, and what the filter kept
        kept = hashlib.blake2b(storage.kept.tobytes(), digest_size=12).hexdigest()
        return f"{_digest_of(storage.base)}+kept:{kept}"
    content = getattr(storage, "content_digest", None)
    if callable(content):
        return f"content:{content()}"
    return dataset_digest(storage.keys, label_array(storage.labels))


class LoaderState:
    """Saves, loads and proves one Loader's place in its epochs.

    Args:
        storage: The Loader's storage.
        sampler: Its sampler (positions, epoch, world).
        assembler: Its batch assembler (the sample count the fingerprint records).
        deliveries: Its delivery bookkeeping (the digest and step saved with the state).
        batching: Its batching (`Batching`).
        mixture: Its `MixtureWeights` when the storage is a mixture.
        after_load: Called once a state is loaded (the Loader brings the storage to the
            sampler's epoch).
    """

    def __init__(
        self,
        storage: Storage,
        sampler: Sampler,
        assembler: BatchAssembler,
        deliveries: Deliveries,
        batching: Batching,
        *,
        mixture: MixtureWeights | None,
        after_load: Callable[[], None],
    ) -> None:
        self.storage, self.sampler, self.assembler, self.deliveries = storage, sampler, assembler, deliveries
        self.batching, self.mixture, self.after_load = batching, mixture, after_load
        self._dataset_digest: str | None = None  # worked out at the first state saved or loaded

    def state_dict(self) -> dict[str, Any]:
        """See `Loader.state_dict`."""
        sampler, digest, excluded, step = self.deliveries.state()
        return {
            "version": 1,
            "sampler": sampler,
            "batch_size": self.batching.batch_size,
            "step": step,
            "fingerprint": self.fingerprint(),
            "delivered_digest": digest,
            "excluded_digest": excluded,
            **({"mixture": self.storage.state()} if isinstance(self.storage, MixedStorage) else {}),
            **({"mixture_schedule": self.mixture.schedule.state()} if self.mixture is not None and self.mixture.schedule else {}),
        }

    def fingerprint(self) -> dict[str, Any]:
        """See `Loader.fingerprint`."""
        if self._dataset_digest is None:
            # A storage whose samples change per epoch (a mixture, whose weights may change too)
            # is described by its sources; any other by its own samples.
            sources = getattr(self.storage, "sources", None) if isinstance(self.storage, EpochStorage) else None
            parts = sources.values() if isinstance(sources, dict) else [self.storage]
            self._dataset_digest = "-".join(_digest_of(part) for part in parts)
        options = self.batching.sampling
        return fingerprint(
            samples=len(self.assembler.keys),
            dataset=self._dataset_digest,
            sampling={"shuffle": options.shuffle, "seed": options.seed, "pad": options.pad, "shuffle_window": options.shuffle_window},
            batch_size=self.batching.batch_size,
            drop_last=self.batching.drop_last,
            transform=self.batching.describe_transform(),
            where=self.batching.where,
        )

    def load_state_dict(self, state: dict[str, Any] | Sequence[dict[str, Any]], *, allow_changes: bool = False) -> None:
        """See `Loader.load_state_dict`."""
        if not isinstance(state, (dict, list, tuple)):
            raise ConfigurationError(
                f"not a Loader state: expected what Loader.state_dict() returns (a dict), or a list of them, got {type(state).__name__}"
            )
        states = [state] if isinstance(state, dict) else list(state)
        if not states:
            raise ConfigurationError("not a Loader state: an empty list of states")
        for saved in states:
            if not isinstance(saved, dict) or not {"version", "sampler"} <= saved.keys():
                found = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
                raise ConfigurationError(
                    f"not a Loader state: expected what Loader.state_dict() returns (keys 'version', 'sampler', 'batch_size'), got {found}"
                )
            if saved["version"] != 1:
                raise ConfigurationError(
                    f"Loader state version {saved['version']!r}: this stoker reads version 1; save the state again with it"
                )
            check_state_parts(saved)
        changed = check_resume(states, self.fingerprint(), allow_changes=allow_changes, adjustable=self._adjustable())
        rebatched = [change for change in changed if change.startswith("batch_size:")]
        if rebatched and "batch_size" in self._adjustable():
            changed.remove(rebatched[0])
            _logger.info(
                "resuming epoch %s with another batch size (%s): the rest of the epoch is dealt in batches of %d over %d ranks",
                states[0]["sampler"].get("epoch"),
                rebatched[0],
                self.batching.batch_size,
                self.sampler.world_size,
            )
        if changed:
            _logger.warning("resuming with changes (allow_changes=True): %s", "; ".join(changed))
        sampler_states = [saved["sampler"] for saved in states]
        self.sampler.load_state_dict(sampler_states[0] if isinstance(state, dict) else sampler_states)
        mixtures = [saved["mixture"] for saved in states if "mixture" in saved]
        if mixtures and self.mixture is not None:
            self.mixture.load(mixtures, ranks=len(states))
        schedules = [saved["mixture_schedule"] for saved in states if "mixture_schedule" in saved]
        if schedules and self.mixture is not None:
            # Every rank saved the same schedule; where it stood is the same on all (lockstep).
            self.mixture.schedule = MixtureSchedule.from_state(schedules[0], self.mixture.check)
        self.after_load()
        digests = [saved["delivered_digest"] for saved in states if "delivered_digest" in saved]
        # After a change of world size, rank 0 carries what the old world delivered, so the new
        # ranks' digests still sum to the world's.
        carried = len(digests) == len(states) and (isinstance(state, dict) or self.sampler.rank == 0)
        excluded = [saved["excluded_digest"] for saved in states if "excluded_digest" in saved]
        excluded = excluded if len(excluded) == len(states) else []  # states saved before exclusions were
        self.deliveries.restore(digests, excluded, carried=carried, step=max(int(saved.get("step", 0)) for saved in states))

    def _adjustable(self) -> tuple[str, ...]:
        """What a resume may change without ``allow_changes``: the batch size, where positions do
        not depend on it. Not with buckets (a bucketed order deals whole batches of one size) nor
        with ``drop_last`` (which samples an epoch leaves out depends on the batch size)."""
        return () if self.sampler.buckets is not None or self.batching.drop_last else ("batch_size",)

    def verify_epoch(self, states: Sequence[dict[str, Any]] | None = None) -> dict[str, int]:
        """See `Loader.verify_epoch`."""
        states = [self.state_dict()] if states is None else list(states)
        proof = verify_deliveries(
            [saved["delivered_digest"] for saved in states],
            samples=self.sampler.num_samples,
            world_size=int(states[0]["sampler"]["world_size"]),
            pad=self.sampler.pad,
            batch_size=self.batching.batch_size,
            drop_last=self.batching.drop_last,
        )
        # Left out on purpose (`Loader.exclude`): accounted for by the proof, not delivered.
        excluded = sum(
            int(saved["excluded_digest"]["count"])
            for saved in states
            if isinstance(saved.get("excluded_digest"), dict) and saved["excluded_digest"].get("epoch") == proof["epoch"]
        )
        return {**proof, "delivered": proof["delivered"] - excluded, "excluded": excluded}
