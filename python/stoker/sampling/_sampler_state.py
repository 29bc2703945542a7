"""A sampler state is input: checked part by part before anything is built from it.

A state comes from a file written by another run, another version, a damaged disk or someone
hostile. Each part is checked for its kind and its range here, and a wrong one is a ValueError
that names it, before a set, a plan or an array is made from the state: a span past the epoch or
reversed, a negative position (which once made positions 0-2 delivered twice), a seed that is
text, an absurd number of spans.

What a saved world did in an epoch is then read from its states (`read_saved_world`), where
`Sampler.load_state_dict` continues. One rank's state (the same world size) is this rank's
record as it was: slots of its plan. Every rank's states (any world size) are merged into the positions the saved world delivered or
left out, which the new world leaves out of the rest of the epoch: a plain epoch's by slots every
rank delivered (one range) and the few in flight (one by one), a bucketed epoch's a whole batch at
a time (`merged_whole_batches`). The states are untrusted input: everything is worked out and
checked here before the sampler changes, so a state refused leaves it as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigurationError, ProvenanceError
from ._bucket_order import BucketOrder
from ._ranges import PositionSet
from ._whole_batch_plan import RecutOrder, WholeBatchPlan, batches_of_positions, merged_whole_batches

__all__ = [
    "MAX_SPANS",
    "SAMPLER_STATE_VERSION",
    "SamplerSettings",
    "SavedWorld",
    "check_seed",
    "check_state",
    "cut_state",
    "read_cut",
    "read_saved_world",
    "spans",
]

SAMPLER_STATE_VERSION = 2
# A delivery record is a handful of spans (out-of-order delivery leaves a few holes); a state with
# more than this many is not one stoker wrote, and is refused before it is read.
MAX_SPANS = 1 << 22
_SCHEMES = ("sequential", "uniform", "block", "bucket")
_PARTS = (
    "version",
    "num_samples",
    "shuffle",
    "seed",
    "epoch",
    "rank",
    "world_size",
    "delivered",
    "padding_delivered",
    "excluded",
    "scheme",
    "window",
    "order_ranks",
    "blocks_crc",
)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fail(field: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"sampler state: {field!r} must be {expected}, got {str(value)[:80]!r}")


def check_seed(seed: Any) -> int:
    """``seed`` if it is a whole number in [0, 2**64).

    Raises:
        ValueError: Anything else (text, a float, a negative number), named.
    """
    if not _whole(seed) or not 0 <= seed < 1 << 64:
        raise ConfigurationError(f"seed must be a whole number from 0 to 2**64 - 1, got {str(seed)[:80]!r}")
    return int(seed)


def spans(value: Any, field: str, limit: int) -> np.ndarray:
    """``value`` as an (n, 2) int64 array of sorted, disjoint [start, end) spans inside
    [0, ``limit``).

    Raises:
        ValueError: Not a list of pairs of whole numbers, too many, or a span that is empty,
            reversed, negative, past ``limit`` or out of order (the first such one named).
    """
    if not isinstance(value, (list, tuple)):
        raise _fail(field, value, "a list of [start, end] spans")
    if len(value) > MAX_SPANS:
        raise _fail(field, f"{len(value):,} spans", f"at most {MAX_SPANS:,} spans")
    if not value:
        return np.zeros((0, 2), np.int64)
    try:
        array = np.array(value)
    except (ValueError, TypeError, OverflowError):
        raise _fail(field, value, "a list of [start, end] spans of whole numbers") from None
    if array.ndim != 2 or array.shape[1] != 2 or array.dtype.kind not in "iu":
        raise _fail(field, value[:3], "a list of [start, end] spans of whole numbers")
    array = array.astype(np.int64)
    starts, ends = array[:, 0], array[:, 1]
    bad = (starts < 0) | (ends <= starts) | (ends > limit)
    bad[1:] |= starts[1:] <= ends[:-1]
    if bad.any():
        at = int(np.argmax(bad))
        raise _fail(
            f"{field}[{at}]", array[at].tolist(), f"a span with 0 <= start < end <= {limit:,}, after the span before it (sorted, disjoint)"
        )
    return array


def check_state(state: Any) -> None:
    """Each part of one rank's sampler state is of its kind and in range.

    Raises:
        ValueError: The first part that is not, named.
    """
    if not isinstance(state, dict):
        raise ConfigurationError(f"sampler state: expected the dict Sampler.state_dict() returns, got {type(state).__name__}")
    version = state.get("version")
    if version == 1:
        raise ConfigurationError(
            "sampler state version 1 was saved by an earlier stoker, whose shuffled order this one does not compute; "
            "resume with that version, or start the epoch again"
        )
    if version != SAMPLER_STATE_VERSION:
        raise _fail("version", version, str(SAMPLER_STATE_VERSION))
    missing = [part for part in _PARTS if part not in state]
    if missing:
        raise ConfigurationError(f"sampler state: no {', '.join(repr(part) for part in missing)} (not a state Sampler.state_dict() wrote)")
    samples = state.get("num_samples")
    if not isinstance(samples, int) or isinstance(samples, bool) or not 1 <= samples <= 1 << 62:
        raise _fail("num_samples", samples, "a whole number from 1 to 2**62")
    if not isinstance(state.get("shuffle"), bool):
        raise _fail("shuffle", state.get("shuffle"), "true or false")
    try:
        check_seed(state.get("seed"))
    except ValueError:
        raise _fail("seed", state.get("seed"), "a whole number from 0 to 2**64 - 1") from None
    for field, low, high in (("epoch", 0, 1 << 62), ("world_size", 1, 1 << 24), ("order_ranks", 1, 1 << 24), ("window", 1, 1 << 30)):
        if not _whole(state.get(field)) or not low <= state[field] <= high:
            raise _fail(field, state.get(field), f"a whole number from {low} to {high:,}")
    if not _whole(state.get("rank")) or not 0 <= state["rank"] < state["world_size"]:
        raise _fail("rank", state.get("rank"), f"a rank of the world of {state['world_size']}")
    if not _whole(state.get("padding_delivered")) or not 0 <= state["padding_delivered"] <= samples:
        raise _fail("padding_delivered", state.get("padding_delivered"), f"a whole number from 0 to {samples:,}")
    if state.get("scheme") not in _SCHEMES or (state["scheme"] == "sequential") == state["shuffle"]:
        raise _fail("scheme", state.get("scheme"), "sequential without shuffle, uniform, block or bucket with it")
    crc = state.get("blocks_crc")
    if crc is not None and not (_whole(crc) and 0 <= crc < 1 << 32):
        raise _fail("blocks_crc", crc, "a CRC-32 or null")
    spans(state.get("delivered"), "delivered", samples)
    spans(state.get("excluded"), "excluded", samples)


# What every rank's state of one world must agree on.
_SHARED = ("num_samples", "shuffle", "seed", "epoch", "scheme", "window", "order_ranks", "blocks_crc", "world_size", "excluded")


@dataclass(frozen=True)
class SamplerSettings:
    """What of the resuming sampler a saved state must match (see `read_saved_world`)."""

    num_samples: int
    scheme: str
    blocks_digest: int | None
    window: int
    rank: int
    world_size: int
    batch_size: int
    # The bucketed order a saved state's positions refer to, from its seed, epoch and order ranks.
    bucket_order: Callable[[int, int, int], BucketOrder | RecutOrder] | None


@dataclass(frozen=True)
class SavedWorld:
    """Where the epoch continues: the saved order's seed, epoch and layout, the positions done
    for every rank (``excluded``), and this rank's own record (one rank's state only)."""

    shuffle: bool
    seed: int
    epoch: int
    order_ranks: int
    excluded: PositionSet | None
    delivered: PositionSet
    padding_delivered: int
    order: BucketOrder | RecutOrder | None  # the bucketed order just built for the merge, to keep


def read_saved_world(state: dict[str, Any] | Sequence[dict[str, Any]], settings: SamplerSettings) -> SavedWorld:
    """Read one rank's state, or merge every rank's.

    Raises:
        ValueError: A state that is not one (a part missing, of the wrong kind or out of
            range), states of different worlds, one state for another rank or world size, or a
            bucketed record holding part of a batch: named.
        ProvenanceError: States from another dataset size, shuffle, block layout or buckets.
    """
    if not isinstance(state, (dict, list, tuple)):
        raise ConfigurationError(f"sampler state: expected a state or a list of every rank's, got {type(state).__name__}")
    states = [state] if isinstance(state, dict) else list(state)
    if not states:
        raise ConfigurationError("no state to load")
    for saved in states:
        check_state(saved)
    first = states[0]
    for saved in states:
        if any(saved[name] != first[name] for name in _SHARED):
            raise ProvenanceError("the states come from different epochs, datasets or worlds")
    if any(saved.get("cut") != first.get("cut") for saved in states):
        raise ProvenanceError("the states come from different cuts of one bucketed epoch (resumes with other batch sizes)")
    _check_matches(first, settings)
    if isinstance(state, dict) and (state["world_size"] != settings.world_size or state["rank"] != settings.rank):
        raise ConfigurationError(
            f"one state from rank {state['rank']} of {state['world_size']} cannot resume rank {settings.rank} of "
            f"{settings.world_size}; pass every rank's state to change the world size"
        )
    ranks = sorted(saved["rank"] for saved in states)
    if not isinstance(state, dict) and ranks != list(range(first["world_size"])):
        raise ConfigurationError(f"expected the states of ranks 0..{first['world_size'] - 1}, got ranks {ranks}")
    excluded = spans(first["excluded"], "excluded", settings.num_samples)
    old_excluded = PositionSet((excluded[:, 0], excluded[:, 1])) if len(excluded) else None
    records = []
    for saved in states:
        delivered = spans(saved["delivered"], "delivered", settings.num_samples)
        records.append(PositionSet((delivered[:, 0], delivered[:, 1])))
    bucketed = first["scheme"] == "bucket"
    if bucketed:
        for saved, record in zip(states, records):
            starts, ends = record.arrays()
            if ((starts % settings.batch_size) | (ends % settings.batch_size)).any():
                raise ConfigurationError(
                    f"sampler state: rank {saved['rank']}'s record of a bucketed epoch holds part of a batch "
                    "(its batches are delivered whole): the state is damaged"
                )
    order: BucketOrder | RecutOrder | None = None
    merged: PositionSet | None = old_excluded
    if bucketed and (old_excluded is not None or not isinstance(state, dict)):
        # One rank's state: its record stays in its own plan's slots; what was done before it is checked.
        order, merged = _merged_batches(first, old_excluded, None if isinstance(state, dict) else records, settings)
    elif not isinstance(state, dict):
        merged = _merged_excluded(old_excluded, records, first["world_size"], settings.num_samples)
    one_rank = isinstance(state, dict)
    return SavedWorld(
        shuffle=first["shuffle"],
        seed=first["seed"],
        epoch=first["epoch"],
        order_ranks=first["order_ranks"],
        excluded=merged,
        delivered=records[0] if one_rank else PositionSet(),
        padding_delivered=first["padding_delivered"] if one_rank else 0,
        order=order,
    )


def _check_matches(first: dict[str, Any], settings: SamplerSettings) -> None:
    """The saved order is one this sampler can continue: the same samples, shuffle and layout."""
    if first["num_samples"] != settings.num_samples:
        raise ProvenanceError(f"the state is for {first['num_samples']} samples, this storage has {settings.num_samples}")
    if first["shuffle"] and first["scheme"] != settings.scheme:
        raise ProvenanceError(f"the state comes from a {first['scheme']} shuffle; this sampler uses a {settings.scheme} shuffle")
    if first["scheme"] == "block" and (first["blocks_crc"], first["window"]) != (settings.blocks_digest, settings.window):
        raise ProvenanceError("the state comes from another block layout or window; resume with the same storage and window")
    if first["scheme"] == "bucket" and first["blocks_crc"] != settings.blocks_digest:
        raise ProvenanceError("the state comes from other buckets or another batch size; resume with the same buckets and batch size")


def _merged_batches(
    saved: dict[str, Any], excluded: PositionSet | None, records: list[PositionSet] | None, settings: SamplerSettings
) -> tuple[BucketOrder | RecutOrder, PositionSet | None]:
    """The saved bucketed order, and what its world did before (``excluded``) and delivered
    (each old rank's ``records`` read through the plan it had, see `WholeBatchPlan`; None: one
    rank's own state, whose record stays as it is) as positions, all whole batches.

    Raises:
        ConfigurationError: Positions past the epoch's full batches, or part of a batch.
    """
    assert settings.bucket_order is not None
    order = settings.bucket_order(saved["seed"], saved["epoch"], saved["order_ranks"])
    if excluded is not None and int(excluded.arrays()[1][-1]) > order.length:
        raise ConfigurationError(f"sampler state: 'excluded' reaches past the {order.length} positions of bucketed epoch {saved['epoch']}")
    if records is None:
        if excluded is not None:
            batches_of_positions(excluded, order_ranks=saved["order_ranks"], batch_size=settings.batch_size)
        return order, excluded
    plans = [
        WholeBatchPlan(
            order,
            num_samples=order.length,
            rank=rank,
            world_size=saved["world_size"],
            excluded=excluded,
            delivered=PositionSet(),
            padding_delivered=0,
            batch_size=settings.batch_size,
            order_ranks=saved["order_ranks"],
        )
        for rank in range(saved["world_size"])
    ]
    merged = merged_whole_batches(plans, records)
    return order, merged if len(merged) else None


def _merged_excluded(excluded: PositionSet | None, records: list[PositionSet], world_size: int, num_samples: int) -> PositionSet:
    """Every position the old world delivered, as ranges: its excluded positions and each old
    rank's delivered slots mapped back to positions. Ranks deliver in near step, so a slot every
    rank delivered covers a whole run of ``world_size`` positions, kept as one range; only the
    slots some ranks delivered and others not (what was in flight) are listed one by one."""
    common = records[0]
    for record in records[1:]:
        common = common.intersection(record)
    starts, ends = common.arrays()
    taken = PositionSet((starts * world_size, ends * world_size))  # ranks of the remaining order
    for rank, record in enumerate(records):
        taken.add_many(rank + record.difference(common).members(num_samples) * world_size)
    ranks_start, ranks_end = taken.arrays()
    if excluded is None:
        return taken
    # A run of remaining ranks [c, d) is the positions from the c-th to the (d-1)-th outside
    # `excluded`: one range once the excluded positions are added back.
    first = excluded.select_outside(ranks_start)
    last = excluded.select_outside(ranks_end - 1) + 1
    return excluded.union(PositionSet((first, last)))


def cut_state(cut: RecutOrder) -> dict[str, Any]:
    """How a bucketed epoch was cut again for another batch size, as plain data (in the state of
    every rank until the epoch ends): the batch size and layout it began with, and the positions
    of that order done before the cut."""
    done = cut.done.ranges() if cut.done is not None else []
    return {"batch_size": cut.batch_size_before, "order_ranks": cut.ranks_before, "done": [list(span) for span in done]}


def read_cut(state: Any, num_samples: int, bucket_order: Callable[[int, int], BucketOrder]) -> tuple[BucketOrder, PositionSet | None]:
    """The order a cut bucketed epoch began with and the positions done in it before the cut,
    from a state's ``cut`` (see `cut_state`), checked: ``bucket_order(batch_size, order_ranks)``
    builds that order for the state's seed and epoch.

    Raises:
        ValueError: The state, or its ``cut``, is not one (named).
    """
    check_state(state)
    cut = state["cut"]
    if not isinstance(cut, dict) or set(cut) != {"batch_size", "order_ranks", "done"}:
        raise _fail("cut", cut, "a dict of batch_size, order_ranks and done")
    for field, high in (("batch_size", 1 << 30), ("order_ranks", 1 << 24)):
        if not _whole(cut[field]) or not 1 <= cut[field] <= high:
            raise _fail(f"cut.{field}", cut[field], f"a whole number from 1 to {high:,}")
    done = spans(cut["done"], "cut.done", num_samples)
    order = bucket_order(cut["batch_size"], cut["order_ranks"])
    if len(done) and int(done[-1, 1]) > order.length:
        raise ConfigurationError(f"sampler state: 'cut.done' reaches past the {order.length} positions of bucketed epoch {state['epoch']}")
    return order, PositionSet((done[:, 0], done[:, 1])) if len(done) else None
