"""What a saved position means, and proof of what an epoch delivered.

A Loader state says "these positions of epoch E were delivered"; that means something only for the
same dataset in the same order with the same batches. `fingerprint` describes all of it (the
dataset's samples and labels, the sampling and batching, the transform) so `load_state_dict` can
refuse a state saved over something else, saying what differs (`differences`). The world size is
left out: resuming on another number of ranks is supported.

`DeliveryDigest` is a running multiset digest of the positions delivered in an epoch: a count and
the sum, modulo 2**64, of a 64-bit mix of each position. It travels in the state across resumes;
summed over every rank at the end of the epoch it equals the digest of the epoch's positions if
and only if (up to a 2**-64 chance) each was delivered exactly once: a repeat or a gap changes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

from ..._bounded import shown
from ...errors import ConfigurationError, ProvenanceError
from ...sampling import PositionSet

__all__ = [
    "DeliveryDigest",
    "check_resume",
    "check_state_parts",
    "differences",
    "fingerprint",
    "mix_positions",
    "require_parts",
    "verify_deliveries",
]

_MASK = (1 << 64) - 1
_CHUNK = 1 << 22  # positions digested at once by verify_deliveries
_DIGESTED_AT_ONCE = 1 << 16  # keys and labels hashed at once by dataset_digest


def mix_positions(positions: np.ndarray) -> int:
    """Sum (mod 2**64) of splitmix64 of each position: order-free, sensitive to repeats."""
    with np.errstate(over="ignore"):
        mixed = np.asarray(positions, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        mixed = (mixed ^ (mixed >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        mixed = (mixed ^ (mixed >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        mixed = mixed ^ (mixed >> np.uint64(31))
        return int(mixed.sum(dtype=np.uint64))


@dataclass
class DeliveryDigest:
    """The positions delivered in one epoch, as a count and a sum (see the module notes)."""

    epoch: int = 0
    count: int = 0
    total: int = 0

    def add(self, positions: np.ndarray) -> None:
        self.count += len(positions)
        self.total = (self.total + mix_positions(positions)) & _MASK

    def remove(self, positions: np.ndarray) -> None:
        self.count -= len(positions)
        self.total = (self.total - mix_positions(positions)) & _MASK

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "count": self.count, "sum": self.total}

    @classmethod
    def from_states(cls, states: Sequence[dict[str, Any]]) -> DeliveryDigest:
        """The digests of every rank (or one) as one: what the world delivered."""
        epochs = {state["epoch"] for state in states}
        if len(epochs) != 1:
            raise ProvenanceError(f"the delivery digests come from different epochs: {sorted(epochs)}")
        return cls(epochs.pop(), sum(state["count"] for state in states), sum(state["sum"] for state in states) & _MASK)


def dataset_digest(keys: Sequence[str], labels: np.ndarray | Sequence[Any]) -> str:
    """A short hash of every key, in order, and every label (as `stoker.storage.label_array`
    gives them: an array, or a lazy column that takes an index array).

    Taken a chunk at a time, the same hash as of the keys joined by newlines and the labels' bytes
    whole: a key column computed when asked for (a URL list's names) is never held whole (10^7
    names joined took 900 MB), and a lazy label column gives its values, never the addresses of
    Python objects (``None`` where no sample has a label: another hash in every process)."""
    digest = hashlib.blake2b(digest_size=12)
    remaining = iter(keys)
    separator = b""
    while chunk := list(islice(remaining, _DIGESTED_AT_ONCE)):
        digest.update(separator + "\n".join(chunk).encode("utf-8", "surrogatepass"))
        separator = b"\n"
    count = len(labels)
    for start in range(0, count, _DIGESTED_AT_ONCE):
        stop = min(count, start + _DIGESTED_AT_ONCE)
        part = labels[start:stop] if isinstance(labels, np.ndarray) else labels[np.arange(start, stop)]  # type: ignore[call-overload]
        digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()


def fingerprint(
    *, samples: int, dataset: str, sampling: dict[str, Any], batch_size: int, drop_last: bool, transform: Any, where: str | None = None
) -> dict[str, Any]:
    """What a position means, as plain data (saved in the Loader's state)."""
    return {
        "dataset": {"samples": samples, "keys_and_labels_hash": dataset, **({"where": where} if where is not None else {})},
        "sampling": sampling,
        "batch_size": batch_size,
        "drop_last": drop_last,
        "transform": transform,
    }


def differences(saved: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list[str]:
    """Each field that differs, as ``"name: X then, Y now"``."""
    found = []
    for name in sorted(set(saved) | set(current)):
        then, now = saved.get(name), current.get(name)
        if isinstance(then, dict) and isinstance(now, dict):
            found += differences(then, now, f"{prefix}{name}.")
        elif then != now:
            found.append(f"{prefix}{name}: {then!r} then, {now!r} now")
    return found


def check_resume(
    saved: Sequence[dict[str, Any]], current: dict[str, Any], *, allow_changes: bool, adjustable: Sequence[str] = ()
) -> list[str]:
    """What differs between the states' fingerprints and ``current`` (each as ``"name: X then, Y
    now"``); states saved before fingerprints existed pass. A difference in a field named in
    ``adjustable`` (one a resume carries over, as another batch size) is returned, never refused.

    Raises:
        ProvenanceError: Something differs and ``allow_changes`` is False.
    """
    prints = [state["fingerprint"] for state in saved if "fingerprint" in state]
    changed = differences(prints[0], current) if prints else []
    refused = [change for change in changed if change.split(":")[0] not in adjustable]
    if refused and not allow_changes:
        by_key = (
            "; a dataset that gained or lost samples resumes by key with keys_before= (the saved dataset's key list)"
            if any(change.startswith("dataset.") for change in refused)
            else ""
        )
        raise ProvenanceError(
            f"this state was saved over another dataset or configuration: {'; '.join(refused)}. "
            "Resume with the same ones, or pass allow_changes=True to resume anyway (the saved positions "
            f"then refer to the saved order){by_key}"
        )
    return changed


def verify_deliveries(
    digests: Sequence[dict[str, int]],
    *,
    samples: int,
    world_size: int,
    pad: bool,
    batch_size: int,
    drop_last: bool,
    before: PositionSet | None = None,
) -> dict[str, int]:
    """Check that the ranks' digests add up to the epoch's samples, each once, as a world of
    ``world_size`` ranks is dealt them (see `Sampler`): rank r takes positions r, r + W, ...,
    padded or with the uneven tail left out; ``drop_last`` leaves out each rank's short last batch.
    ``before``: positions of the epoch's first order done before its rest was cut again for
    another batch size (a bucketed epoch, `stoker.sampling.RecutOrder`; ``samples`` then counts
    the rest's), each delivered or left out once too.

    Raises:
        ProvenanceError: A sample was missed or delivered more than once.
    """
    world = DeliveryDigest.from_states(digests)
    per_rank = -(-samples // world_size) if pad else samples // world_size
    kept = (per_rank // batch_size) * batch_size if drop_last else per_rank
    truth = DeliveryDigest(world.epoch)
    for start, end in before.ranges() if before is not None else []:
        for first in range(start, end, _CHUNK):
            truth.add(np.arange(first, min(end, first + _CHUNK), dtype=np.int64))
    for rank in range(world_size):
        mine = min(kept, len(range(rank, samples, world_size)))  # padding is never counted
        for start in range(0, mine, _CHUNK):  # a chunk at a time: memory bounded at any epoch size
            truth.add(rank + world_size * np.arange(start, min(mine, start + _CHUNK), dtype=np.int64))
    if (world.count, world.total) != (truth.count, truth.total):
        gap = truth.count - world.count
        what = f"{gap} missing" if gap > 0 else f"{-gap} more than once" if gap < 0 else "as many, but not the same ones"
        raise ProvenanceError(
            f"epoch {world.epoch} did not deliver each sample exactly once: {world.count} deliveries for {truth.count} samples ({what})"
        )
    return {"epoch": world.epoch, "samples": truth.count, "delivered": world.count}


def require_parts(saved: Any, parts: dict[str, type], loader: str) -> None:
    """``saved`` is a dict holding every part in ``parts``, each of its kind: what a state of
    ``loader`` (``"Loader"``, ``"TokenLoader"``) always holds, checked the same way for both
    before anything is read from it (a state without a part would resume on a guess).

    Raises:
        ConfigurationError: Not a dict, or a part missing or of another kind, named.
    """
    if not isinstance(saved, dict):
        raise ConfigurationError(f"not a {loader} state: expected the dict {loader}.state_dict() returns, got {type(saved).__name__}")
    if not any(name in saved for name in parts):  # another object's dict altogether: say what a state is
        held = [shown(str(name)) for name in islice(saved, 20)]
        raise ConfigurationError(
            f"not a {loader} state: expected what {loader}.state_dict() returns (a dict holding {', '.join(parts)}), got {held}"
            + (" ..." if len(saved) > 20 else "")
        )
    for name, kind in parts.items():
        if name not in saved:
            raise ConfigurationError(f"not a whole {loader} state: {name!r} is missing (every state {loader}.state_dict() writes holds it)")
        if not isinstance(saved[name], kind) or isinstance(saved[name], bool):
            raise ConfigurationError(f"{loader} state: {name!r} must be a {kind.__name__}, got {type(saved[name]).__name__}")


def check_state_parts(saved: dict[str, Any], *, max_mixture_changes: int) -> None:
    """The parts of a Loader state this module reads are of the right kinds: a state is input
    (a file from another run, another version, or damaged), and a wrong part must be a clear
    error, not an exception from deep inside the resume.

    Args:
        saved: One rank's state.
        max_mixture_changes: The most changes of a mixture's weights an epoch holds.

    Raises:
        ValueError: A part of the wrong kind, or a mixture changed more often than that, named.
    """

    def integer(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if "fingerprint" in saved and not isinstance(saved["fingerprint"], dict):
        raise ConfigurationError(f"Loader state: 'fingerprint' must be a dict, got {type(saved['fingerprint']).__name__}")
    # At most int64's largest: the provenance ledger writes steps as int64, and a larger one
    # was loaded without a word and failed the loop's first batch with numpy's OverflowError.
    if "step" in saved and not (integer(saved["step"]) and 0 <= saved["step"] < 2**63):
        raise ConfigurationError(f"Loader state: 'step' must be an int from 0 to 2**63 - 1, got {saved['step']!r}")
    for part in ("delivered_digest", "excluded_digest"):
        digest = saved.get(part)
        if part in saved and not (
            isinstance(digest, dict) and all(integer(digest.get(name)) and digest[name] >= 0 for name in ("epoch", "count", "sum"))
        ):
            raise ConfigurationError(f"Loader state: {part!r} must hold ints epoch, count and sum, got {digest!r}"[:300])
    mixture = saved.get("mixture")
    if "mixture" in saved:
        changes = mixture.get("changes") if isinstance(mixture, dict) else None
        if isinstance(changes, list) and len(changes) > max_mixture_changes:  # each replayed redraws the epoch's rest
            raise ConfigurationError(
                f"Loader state: its mixture's weights changed {len(changes):,} times in the epoch, more than the "
                f"{max_mixture_changes:,} a Loader makes (a change by hand or by a schedule redraws the epoch's rest, and a "
                "resume replays each): not a state a Loader saved"
            )
        valid = (
            isinstance(mixture, dict)
            and integer(mixture.get("epoch"))
            and isinstance(mixture.get("weights"), dict)
            and isinstance(changes, list)
            and all(
                isinstance(change, dict)
                and isinstance(change.get("weights"), dict)
                and (
                    # spans of delivered positions (checked against the epoch when resolved), or
                    # storage indices (as states saved before spans were)
                    isinstance(change.get("delivered_record"), list)
                    or isinstance(change.get("delivered"), list)
                    and all(integer(index) and index >= 0 for index in change["delivered"])
                )
                for change in changes
            )
        )
        if not valid:
            raise ConfigurationError(f"Loader state: 'mixture' must hold its epoch, weights and changes, got {mixture!r}"[:300])
