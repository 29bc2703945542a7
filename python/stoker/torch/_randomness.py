"""The global random generators a dataset's ``__getitem__`` may draw from (torch's, Python's
``random``, NumPy's legacy one): noticing that it draws, and seeding them per item.

Threads share these generators, so items fetched concurrently would draw from them in whatever
order the threads run: augmentation would change from run to run. The drop-in DataLoader looks
at the first item of an iteration to see whether the dataset draws at all, and if it does,
fetches items where the draws stay in a fixed order (see `stoker.torch.DataLoader`).
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["draws_from_global_rng", "item_seed", "seed_global_rngs"]


def _snapshot() -> tuple[Any, ...]:
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state(legacy=False) if numpy is not None else None
    return torch.random.get_rng_state(), random.getstate(), numpy_state


def _same(before: tuple[Any, ...], after: tuple[Any, ...]) -> bool:
    torch_before, python_before, numpy_before = before
    torch_after, python_after, numpy_after = after
    if not torch.equal(torch_before, torch_after) or python_before != python_after:
        return False
    if numpy_before is None or numpy_after is None:
        return numpy_before is numpy_after
    numpy = sys.modules["numpy"]
    return (
        bool(numpy.array_equal(numpy_before["state"]["key"], numpy_after["state"]["key"]))
        and all(numpy_before[name] == numpy_after[name] for name in ("has_gauss", "gauss"))
        and numpy_before["state"]["pos"] == numpy_after["state"]["pos"]
    )


def draws_from_global_rng(call: Callable[[], Any]) -> tuple[Any, bool]:
    """``call()`` and whether it advanced torch's, ``random``'s or NumPy's global generator.
    Run it where nothing else draws at the same time (the calling thread, before any fetch)."""
    before = _snapshot()
    result = call()
    return result, not _same(before, _snapshot())


def item_seed(base_seed: int, index: Any) -> int:
    """A 63-bit seed for one item from the iteration's base seed and the item's index, so an item
    is augmented the same way whichever worker fetches it, and differently each epoch."""
    # Python's hash of a str changes from run to run; this one does not.
    number = index if isinstance(index, int) else int.from_bytes(hashlib.blake2b(repr(index).encode(), digest_size=8).digest(), "little")
    mixed = (base_seed * 0x9E3779B97F4A7C15 + number * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    mixed ^= mixed >> 31
    return mixed & 0x7FFFFFFFFFFFFFFF


def seed_global_rngs(seed: int) -> None:
    """Seed torch's, ``random``'s and (when imported) NumPy's global generators from ``seed``."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (1 << 32))
