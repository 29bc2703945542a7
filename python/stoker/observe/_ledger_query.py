"""Questions a run's provenance ledger answers for an operator: which samples were in the
batches of some steps (around a loss spike), to leave them out of a resumed run
(`stoker.loader.Loader.exclude(keys=...)`)."""

from __future__ import annotations

import os

from .._bounded import key_text
from ..errors import ConfigurationError, StorageError
from ._ledger import read_ledger

__all__ = ["ledger_keys"]


def ledger_keys(directory: str | os.PathLike[str], *, steps: range, rank: int | None = None) -> list[str]:
    """The keys of every real sample (padding left out) the run's ranks delivered at ``steps``,
    each once, in the order the ledger holds them (rank by rank, step by step).

    Example::

        spike = ledger_keys("runs/42/ledger", steps=range(183_390, 183_411))
        loader.exclude(keys=spike)

    Args:
        directory: The ledger's directory (`Loader.record_provenance`'s).
        steps: Consecutive steps, as `Loader.step` counts them.
        rank: Only this rank's batches; None for every rank's.

    Raises:
        ConfigurationError: Not a range of consecutive steps.
        StorageError: No ledger there, or a null key in it (named with its position among
            the chosen rows).
    """
    if not isinstance(steps, range) or steps.step != 1:
        raise ConfigurationError(f"steps takes a range of consecutive steps, e.g. range(100, 120); got {steps!r}")
    import pyarrow.compute as compute

    table = read_ledger(directory, rank=rank)
    step = table.column("step")
    chosen = compute.and_(
        compute.and_(compute.greater_equal(step, steps.start), compute.less(step, steps.stop)),
        compute.invert(table.column("padding")),
    )
    keys = table.filter(chosen).column("key").to_pylist()
    # A null read as a key would be the text "None": refused by name, as a damaged ledger's row.
    return list(
        dict.fromkeys(key_text(key, position, f"{directory}: the ledger's keys", StorageError) for position, key in enumerate(keys))
    )
