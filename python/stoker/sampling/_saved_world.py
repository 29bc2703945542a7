"""What a saved world did in an epoch, read from its states: where `Sampler.load_state_dict`
continues.

One rank's state (the same world size) is this rank's record as it was: slots of its plan.
Every rank's states (any world size) are merged into the positions the saved world delivered or
left out, which the new world leaves out of the rest of the epoch: a plain epoch's by slots every
rank delivered (one range) and the few in flight (one by one), a bucketed epoch's a whole batch at
a time (`merged_whole_batches`). The states are untrusted input: everything is worked out and
checked here before the sampler changes, so a state refused leaves it as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError, ProvenanceError
from ._bucket_order import BucketOrder
from ._ranges import PositionSet
from ._sampler_state import check_state, spans
from ._whole_batch_plan import WholeBatchPlan, batches_of_positions, merged_whole_batches

__all__ = ["SamplerSettings", "SavedWorld", "read_saved_world"]

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
    bucket_order: Callable[[int, int, int], BucketOrder] | None


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
    order: BucketOrder | None  # the bucketed order just built for the merge, to keep


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
    order: BucketOrder | None = None
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
) -> tuple[BucketOrder, PositionSet | None]:
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
